package cr

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/budgetcache"
	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/structural"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// schemaCache keeps the compiled structural schema of every CRD version
// the gateway needs one for, keyed by CRD uid, generation and version,
// within a memory budget (pkg/budgetcache, as the validator's): each
// version is charged its estimate (crdlimits.EstimateStructuralSize)
// before it is compiled; beyond the limit the least recently used CRD
// generations are evicted (they compile again on their next request), and
// a CRD whose versions alone exceed it is refused with a 500. Superseded
// generations and deleted CRDs are evicted as the CRD cache reports
// changes (onChange). Metrics: crdplane_gateway_compiled_crd_* and
// crdplane_gateway_schema_cache_requests_total.
type schemaCache struct {
	cache *budgetcache.Cache[*compiledSchema]
	// mu guards compiledSchema.sameAs.
	mu sync.Mutex
	// memo spares reads the decoding of objects reading leaves as they are.
	memo *readMemo
}

func newSchemaCache(limit int64) *schemaCache {
	return &schemaCache{cache: budgetcache.New[*compiledSchema](budgetcache.Config{
		Service: "gateway", Limit: limit, Estimate: crdlimits.EstimateStructuralSize}), memo: newReadMemo(readMemoMax)}
}

// CompiledSchemas reports the compiled-schema cache's figures (bytes
// charged, evictions, CRD generations and versions cached).
func (a *Server) CompiledSchemas() budgetcache.Stats { return a.schemas.cache.Stats() }

// onChange evicts the entries a CRD change supersedes (crdcache.OnChange).
func (c *schemaCache) onChange(old, new *crdcache.CRD) { c.cache.OnChange(old, new) }

// compiledSchema is a version's compiled schema and whether it declares
// any default (reads then default stored objects).
type compiledSchema struct {
	// id names this compilation in the read memo (readMemo).
	id       uint64
	s        *structural.Schema
	defaults bool
	// props is the version's schema as the CRD declares it (nil: none).
	props *apiextensionsv1.JSONSchemaProps
	// sameAs caches, per other version of the CRD, whether its schema is
	// this version's (then an object converted from it has nothing to
	// prune here). Guarded by schemaCache.mu.
	sameAs map[string]bool
}

// get returns the compiled schema of r's CRD at version.
func (c *schemaCache) get(r *resource, version string) (*structural.Schema, error) {
	cs, err := c.compiled(r, version)
	if err != nil {
		return nil, err
	}
	return cs.s, nil
}

// compiled returns r's CRD's version compiled, once per CRD generation
// while it stays cached. Its errors are a Kubernetes 500 (over the
// budget), or the version's schema does not compile.
func (c *schemaCache) compiled(r *resource, version string) (*compiledSchema, error) {
	crd := r.crd
	v, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, version, err)
	}
	return c.cache.Version(crd, version, func(*budgetcache.Entry[*compiledSchema]) (*compiledSchema, error) {
		var props *apiextensionsv1.JSONSchemaProps
		if v != nil {
			props = v.OpenAPIV3Schema
		}
		s, err := structural.Compile(props, structural.WithPreserveUnknownFields(crd.Spec.PreserveUnknownFields))
		if err != nil {
			return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, version, err)
		}
		return &compiledSchema{id: schemaIDs.Add(1), s: s, defaults: hasDefault(props), props: props}, nil
	})
}

// internalError is err as a 500: err itself when it is a Kubernetes
// Status already (the compiled-schema budget's refusal), else wrapped.
func internalError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(err)
}

// hasDefault reports whether a schema declares a default anywhere.
func hasDefault(p *apiextensionsv1.JSONSchemaProps) bool {
	if p == nil {
		return false
	}
	if p.Default != nil {
		return true
	}
	for _, c := range p.Properties {
		if hasDefault(&c) {
			return true
		}
	}
	if p.Items != nil {
		if hasDefault(p.Items.Schema) {
			return true
		}
		for i := range p.Items.JSONSchemas {
			if hasDefault(&p.Items.JSONSchemas[i]) {
				return true
			}
		}
	}
	if p.AdditionalProperties != nil && hasDefault(p.AdditionalProperties.Schema) {
		return true
	}
	return false
}

// readDefaults applies to stored objects what upstream's storage decoder
// does before converting them to the request version: each object is
// coerced and defaulted with the schema of its own version (the version it
// was stored at, upstream's unstructuredDefaulter at the object's GVK; not
// the current storage version, which may since have moved): metadata
// normalised (malformed fields dropped), unknown fields pruned, defaults
// set, so that objects stored before a default existed read with it. An
// object whose version's schema has no defaults is returned as it is (it
// was pruned and defaulted when written), and nothing is decoded; one
// whose apiVersion names no version of the CRD is defaulted at the
// storage version. Objects that reading leaves byte for byte as stored
// (those written with the same schema) are remembered (readMemo) and
// later returned as they are without decoding.
func (c *schemaCache) readDefaults(r *resource, objs [][]byte) ([][]byte, error) {
	var out [][]byte
	byVersion := map[string]*compiledSchema{}
	schemaOf := func(v string) (*compiledSchema, error) {
		if cs, ok := byVersion[v]; ok {
			return cs, nil
		}
		at := v
		if !crdHasVersion(r, at) {
			at = r.storageVersion
		}
		cs, err := c.compiled(r, at)
		if err != nil {
			return nil, err
		}
		byVersion[v] = cs
		return cs, nil
	}
	for i, data := range objs {
		// Remembered objects first, by the apiVersion they start with
		// (as crdplane writes them): a remembered object is in
		// encoding/json's form, without duplicate keys, so that is its
		// apiVersion. Anything else is read with the apiVersion as
		// upstream's decoder finds it.
		if lead, ok := leadingAPIVersion(data); ok {
			cs, err := schemaOf(versionOf(lead))
			if err != nil {
				return nil, err
			}
			if cs.defaults && c.memo.unchanged(c.memo.key(cs.id, data)) {
				if first, known := resourceVersionFirst(data, lead); known && !first {
					continue // resourceVersion is in place already
				}
				if sorted := sortResourceVersion(data); len(sorted) > 0 && &sorted[0] != &data[0] {
					if out == nil {
						out = make([][]byte, len(objs))
						copy(out, objs)
					}
					out[i] = sorted
				}
				continue
			}
		}
		cs, err := schemaOf(versionOf(objectAPIVersion(data)))
		if err != nil {
			return nil, err
		}
		if !cs.defaults {
			continue
		}
		k := c.memo.key(cs.id, data)
		obj, err := listing.DecodeObject(data)
		if err != nil {
			return nil, fmt.Errorf("stored object: %w", err)
		}
		if _, err := structural.Normalize(obj, cs.s, true); err != nil {
			return nil, err
		}
		structural.Default(obj, cs.s)
		enc, err := listing.EncodeObject(obj)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(enc, sortResourceVersion(data)) {
			c.memo.add(k)
		}
		if bytes.Equal(enc, data) {
			continue
		}
		if out == nil {
			out = make([][]byte, len(objs))
			copy(out, objs)
		}
		out[i] = enc
	}
	if out == nil {
		return objs, nil
	}
	return out, nil
}

// asDecoded applies to an object read from storage (at r's request
// version) what upstream's storage decoder applies: metadata normalised
// (malformed fields dropped), unknown fields pruned, defaults set. It
// works on obj in place.
func (c *schemaCache) asDecoded(r *resource, obj object) error {
	s, err := c.get(r, r.version)
	if err != nil {
		return err
	}
	if _, err := structural.Normalize(obj, s, true); err != nil {
		return err
	}
	structural.Default(obj, s)
	return nil
}

// conversionPruner is what upstream's schemaCoercingConverter applies to an
// object after converting it to a version: its decoder's coercion at that
// version's schema (root metadata round trip, pruning of the fields the
// schema does not specify, embedded resources' metadata), so that an object
// read at (or written to) another version than it was at carries only
// what the target schema keeps. Defaults are not applied (upstream's
// storage codec defaults before converting, at the object's own version).
type conversionPruner struct {
	c      *schemaCache
	r      *resource
	target string // the version converted to
	cs     *compiledSchema
}

// pruner returns the pruner of conversions of r's objects to version.
func (c *schemaCache) pruner(r *resource, version string) (*conversionPruner, error) {
	cs, err := c.compiled(r, version)
	if err != nil {
		return nil, err
	}
	return &conversionPruner{c: c, r: r, target: version, cs: cs}, nil
}

// needed reports whether an object converted from version from may carry
// what the target schema prunes: from is another version whose schema
// differs from the target's ("" or an unknown version: assume it does).
func (p *conversionPruner) needed(from string) bool {
	if from == p.target {
		return false
	}
	p.c.mu.Lock()
	same, ok := p.cs.sameAs[from]
	p.c.mu.Unlock()
	if ok {
		return !same
	}
	same = false
	if other, err := p.c.compiled(p.r, from); err == nil {
		same = equality.Semantic.DeepEqual(other.props, p.cs.props)
	}
	p.c.mu.Lock()
	if p.cs.sameAs == nil {
		p.cs.sameAs = map[string]bool{}
	}
	p.cs.sameAs[from] = same
	p.c.mu.Unlock()
	return !same
}

// apply coerces one converted object (JSON) to the target schema, as
// upstream's unstructuredSchemaCoercer after a conversion (malformed
// metadata is an error there, not dropped).
func (p *conversionPruner) apply(obj []byte) ([]byte, error) {
	o, err := listing.DecodeObject(obj)
	if err != nil {
		return nil, fmt.Errorf("converted object: %w", err)
	}
	if _, err := structural.Normalize(o, p.cs.s, false); err != nil {
		return nil, fmt.Errorf("converted object: %w", err)
	}
	return listing.EncodeObject(o)
}
