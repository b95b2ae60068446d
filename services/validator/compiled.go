package validator

import (
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/metrics"
	"github.com/crdplane/crdplane/pkg/structural"
	"github.com/crdplane/crdplane/services/validator/celrules"
)

// compiledVersion is what admission needs of one CRD version.
type compiledVersion struct {
	crdName    string
	group      string
	version    string
	kind       string
	apiVersion string // group/version
	namespaced bool
	schema     *structural.Schema
	cel        *celrules.Validator // nil without x-kubernetes-validations
	hasStatus  bool
	status     *structural.Schema // .status's schema when the status subresource is on
	scale      *apiextensionsv1.CustomResourceSubresourceScale
	// crd is the CRD compiled (read only); fm what its field managers
	// need, built on first use.
	crd *CRD
	fm  managedState
}

func findVersion(crd *CRD, version string) (*apiextensionsv1.CustomResourceDefinitionVersion, error) {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			return &crd.Spec.Versions[i], nil
		}
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("version %q is not defined in CustomResourceDefinition %s", version, crd.Name))
}

func compileVersion(crd *CRD, version string) (*compiledVersion, error) {
	v, err := findVersion(crd, version)
	if err != nil {
		return nil, err
	}
	var props *apiextensionsv1.JSONSchemaProps
	if v.Schema != nil {
		props = v.Schema.OpenAPIV3Schema
	}
	s, err := structural.Compile(props, structural.WithPreserveUnknownFields(crd.Spec.PreserveUnknownFields))
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s version %s: %w", crd.Name, version, err)
	}
	celValidator, err := celrules.Compile(props)
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s version %s: x-kubernetes-validations: %w", crd.Name, version, err)
	}
	kind := crd.Status.AcceptedNames.Kind
	if kind == "" {
		kind = crd.Spec.Names.Kind
	}
	cv := &compiledVersion{
		crdName:    crd.Name,
		group:      crd.Spec.Group,
		version:    version,
		kind:       kind,
		apiVersion: crd.Spec.Group + "/" + version,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		schema:     s,
		cel:        celValidator,
		crd:        crd,
	}
	if sub := v.Subresources; sub != nil {
		if sub.Status != nil {
			cv.hasStatus = true
			cv.status = s.Property("status")
		}
		cv.scale = sub.Scale
	}
	return cv, nil
}

type compiledKey struct {
	uid        types.UID
	generation int64
	version    string
}

type compiledEntry struct {
	once sync.Once
	cv   *compiledVersion
	err  error
}

// compiledCache keeps compiled CRD versions keyed by CRD uid, generation and
// version. Entries of superseded generations and deleted CRDs are evicted
// as the source reports changes.
type compiledCache struct {
	mu      sync.Mutex
	entries map[compiledKey]*compiledEntry
	latest  map[types.UID]int64 // newest generation seen per CRD; -1: deleted
}

// schemaCacheRequests counts compiled-schema lookups by result (hit, miss).
var schemaCacheRequests = metrics.NewCounterVec("validator", "schema_cache_requests_total",
	"Compiled-schema cache lookups (CRD uid + generation + version), by result: hit or miss.", "result")

func newCompiledCache() *compiledCache {
	return &compiledCache{entries: map[compiledKey]*compiledEntry{}, latest: map[types.UID]int64{}}
}

// get returns crd's version compiled, compiling it once.
func (c *compiledCache) get(crd *CRD, version string) (*compiledVersion, error) {
	if _, err := findVersion(crd, version); err != nil {
		return nil, err
	}
	key := compiledKey{crd.UID, crd.Generation, version}
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok {
		schemaCacheRequests.WithLabelValues("hit").Inc()
	} else {
		schemaCacheRequests.WithLabelValues("miss").Inc()
		e = &compiledEntry{}
		// Do not keep what is already superseded (a change raced with
		// this request); it is still compiled for this request.
		if latest, seen := c.latest[crd.UID]; !seen || (latest >= 0 && latest <= crd.Generation) {
			c.entries[key] = e
		}
	}
	c.mu.Unlock()
	e.once.Do(func() { e.cv, e.err = compileVersion(crd, version) })
	return e.cv, e.err
}

// onChange evicts the entries that old's change supersedes.
func (c *compiledCache) onChange(old, new *CRD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if new != nil {
		if g, ok := c.latest[new.UID]; !ok || g < new.Generation {
			c.latest[new.UID] = new.Generation
		}
	}
	if old == nil {
		return
	}
	if new == nil || new.UID != old.UID {
		c.latest[old.UID] = -1
	}
	for k := range c.entries {
		if k.uid != old.UID {
			continue
		}
		if new == nil || new.UID != old.UID || k.generation < new.Generation {
			delete(c.entries, k)
		}
	}
}

// len is the number of cached entries (tests).
func (c *compiledCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
