package openapi

// The OpenAPI v3 documents of CRD group-versions are upstream's: each CRD
// version's part is built by upstream's builder (BuildOpenAPIV3, as
// kube-apiserver's openapiv3 controller calls it) and the parts of a
// group-version are merged with its MergeSpecsV3. The builder of the
// library this module builds with (k8s.io/apiextensions-apiserver v0.37)
// differs from v1.33's only in the Kubernetes models it puts beside a CRD's
// own schemas and in one list parameter; asV133 puts v1.33's back:
//
//   - the io.k8s.* component schemas (ObjectMeta, ListMeta, Status,
//     DeleteOptions, Patch, Scale and what they reference) are v1.33's,
//     recorded in v133_components.json: the io.k8s.* schemas of the
//     document v1.33's builder (k8s.io/apiextensions-apiserver v0.33.13,
//     as conformance/upstream pins it) builds for a namespaced CRD with
//     status and scale subresources, identical to what the conformance
//     oracle's reference serves (TestV3SnapshotCoversBuilder notices a
//     schema the library's builder adds that is not recorded). The v0.37
//     models word Scale.metadata's description differently, give
//     ScaleSpec.replicas a default, drop the defaults of list and map
//     items (DeleteOptions.dryRun, ObjectMeta labels, annotations,
//     finalizers, managedFields, ownerReferences, StatusDetails.causes)
//     and the allOf wrapping of those references, drop
//     x-kubernetes-list-type of Status.details, add ListMeta.shardInfo
//     (and the ShardInfo schema, dropped here), and list the
//     x-kubernetes-group-version-kind of DeleteOptions for the API groups
//     of v0.37's client-go scheme;
//   - list operations lose the shardSelector query parameter (a v0.37
//     ListOptions field).

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

//go:embed v133_components.json
var v133ComponentsJSON []byte

var (
	v133Once       sync.Once
	v133Components map[string]*spec.Schema
	v133Rendered   map[string]json.RawMessage // as json.Marshal renders them
)

// v133Schemas returns v1.33's io.k8s.* component schemas by name.
func v133Schemas() map[string]*spec.Schema {
	v133Once.Do(func() {
		if err := json.Unmarshal(v133ComponentsJSON, &v133Components); err != nil {
			panic(fmt.Sprintf("openapi: v133_components.json: %v", err))
		}
		v133Rendered = make(map[string]json.RawMessage, len(v133Components))
		for name, s := range v133Components {
			b, err := json.Marshal(s)
			if err != nil {
				panic(fmt.Sprintf("openapi: %s: %v", name, err))
			}
			v133Rendered[name] = b
		}
	})
	return v133Components
}

// v137Only are component schemas v1.33 does not have.
var v137Only = []string{"io.k8s.apimachinery.pkg.apis.meta.v1.ShardInfo"}

// buildV3 builds version's part of its group-version document, as
// upstream's openapiv3 controller does, worded as v1.33 (asV133).
func buildV3(crd *CRD, version string) (*spec3.OpenAPI, error) {
	s, err := builder.BuildOpenAPIV3(crd, version, builder.Options{V2: false, IncludeSelectableFields: true})
	if err != nil {
		return nil, err
	}
	asV133(s)
	return s, nil
}

// asV133 puts v1.33's Kubernetes models and list parameters into a part
// built by the v0.37 builder.
func asV133(s *spec3.OpenAPI) {
	if s.Components != nil {
		v133 := v133Schemas()
		for name := range s.Components.Schemas {
			if !strings.HasPrefix(name, "io.k8s.") {
				continue
			}
			if slices.Contains(v137Only, name) {
				delete(s.Components.Schemas, name)
			} else if v, ok := v133[name]; ok {
				s.Components.Schemas[name] = v
			}
		}
	}
	if s.Paths == nil {
		return
	}
	drop := func(ps []*spec3.Parameter) []*spec3.Parameter {
		return slices.DeleteFunc(ps, func(p *spec3.Parameter) bool { return p != nil && p.Name == "shardSelector" })
	}
	for _, p := range s.Paths.Paths {
		if p == nil {
			continue
		}
		p.Parameters = drop(p.Parameters)
		for _, op := range []*spec3.Operation{p.Get, p.Put, p.Post, p.Delete, p.Options, p.Head, p.Patch, p.Trace} {
			if op != nil {
				op.Parameters = drop(op.Parameters)
			}
		}
	}
}

// v3Part is one CRD version's part of a group-version document, kept
// rendered: each path item and component schema as JSON, so that a
// group-version's document is assembled from its parts' bytes (as
// MergeSpecsV3 then json.Marshal would render it) and a CRD change renders
// only its own parts.
type v3Part struct {
	crd     *CRD // as last built (or to be built)
	version string
	built   bool
	err     error
	head    json.RawMessage // {"openapi":...,"info":...
	// pathsZ is the path items, path → item, as one JSON object
	// compressed with DEFLATE: some 40 KB of repetitive JSON per CRD
	// version, 10× smaller kept so, inflated when a document is rendered
	pathsZ  []byte
	schemas map[string]json.RawMessage // component name → schema
}

// build builds and renders the part (once).
func (p *v3Part) build() {
	if p.built {
		return
	}
	p.built = true
	s, err := buildV3(p.crd, p.version)
	if err != nil {
		p.err = err
		return
	}
	head, err := json.Marshal(struct {
		Version string     `json:"openapi"`
		Info    *spec.Info `json:"info"`
	}{s.Version, s.Info})
	if err != nil {
		p.err = err
		return
	}
	p.head = head[:len(head)-1]
	paths := map[string]json.RawMessage{}
	if s.Paths != nil {
		for k, v := range s.Paths.Paths {
			if !strings.HasPrefix(k, "/") {
				continue
			}
			if paths[k], err = json.Marshal(v); err != nil {
				p.err = err
				return
			}
		}
	}
	if p.pathsZ, err = deflate(paths); err != nil {
		p.err = err
		return
	}
	p.schemas = map[string]json.RawMessage{}
	if s.Components != nil {
		v133Schemas()
		for k, v := range s.Components.Schemas {
			if b, ok := v133Rendered[k]; ok {
				// the same for every part: rendered once
				p.schemas[k] = b
				continue
			}
			if p.schemas[k], err = json.Marshal(v); err != nil {
				p.err = err
				return
			}
		}
	}
}

// v3GV is the OpenAPI v3 state of one group-version: the parts of the
// CRDs that serve it, or served it (as upstream's openapiv3 controller, a
// version that stops being served keeps its last document until its CRD
// is deleted or no longer Established), and the merged document's hash.
type v3GV struct {
	parts map[string]*v3Part // by CRD name
	// hash is the merged document's ("": stale); the Builder's cache may
	// keep its body
	hash string
	// modified is when the document last changed: its first render after
	// the parts changed (hash "")
	modified time.Time
}

// rendered records d, just rendered from gv's parts, as gv's document:
// its hash, and when it changed, which a render of unchanged parts (the
// cache had dropped the body) keeps.
func (gv *v3GV) rendered(d *Document) {
	if gv.hash == "" {
		gv.modified = time.Now()
	}
	gv.hash = d.Hash
	d.Modified = gv.modified
}

// renderV3 merges the parts of a group-version (building the ones not
// built yet) as MergeSpecsV3 does and renders the document as json.Marshal
// renders the merged spec: paths and component schemas by name. Schemas of
// meta.v1 and autoscaling.v1 shared by several parts appear once; a part
// whose own schema another part already has is left out (upstream's merge
// fails then, keeping the previous document).
func renderV3(gv *v3GV) *Document {
	names := make([]string, 0, len(gv.parts))
	for name := range gv.parts {
		names = append(names, name)
	}
	slices.Sort(names)
	var head json.RawMessage
	paths := map[string]json.RawMessage{}
	schemas := map[string]json.RawMessage{}
parts:
	for _, name := range names {
		p := gv.parts[name]
		p.build()
		if p.err != nil {
			continue
		}
		for k := range p.schemas {
			if _, dup := schemas[k]; dup && !strings.HasPrefix(k, metaGVPrefix) && !strings.HasPrefix(k, autoscalingGVPrefix) {
				continue parts
			}
		}
		if head == nil {
			head = p.head
		}
		for k, v := range p.schemas {
			if _, dup := schemas[k]; !dup {
				schemas[k] = v
			}
		}
		if err := inflateInto(paths, p.pathsZ); err != nil {
			// kept by build itself: cannot happen short of memory corruption
			panic(fmt.Sprintf("openapi: paths of %s %s: %v", name, p.version, err))
		}
	}
	var b bytes.Buffer
	if head == nil {
		head = json.RawMessage(`{"openapi":"","info":null`)
	}
	b.Write(head)
	if len(paths) > 0 {
		b.WriteString(`,"paths":`)
		writeObject(&b, paths)
	}
	if len(schemas) > 0 {
		b.WriteString(`,"components":{"schemas":`)
		writeObject(&b, schemas)
		b.WriteByte('}')
	}
	b.WriteByte('}')
	body := b.Bytes()
	return &Document{Body: body, Hash: hash(body)}
}

// Prefixes of the component schemas every CRD part carries.
const (
	metaGVPrefix        = "io.k8s.apimachinery.pkg.apis.meta.v1"
	autoscalingGVPrefix = "io.k8s.api.autoscaling.v1"
)

// deflate renders m as a JSON object (writeObject) compressed with DEFLATE.
func deflate(m map[string]json.RawMessage) ([]byte, error) {
	var raw bytes.Buffer
	writeObject(&raw, m)
	var z bytes.Buffer
	w, err := flate.NewWriter(&z, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(z.Bytes()), nil
}

// inflateInto adds the members of a deflated JSON object to m.
func inflateInto(m map[string]json.RawMessage, z []byte) error {
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(z)))
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, &m)
}

// writeObject writes m as a JSON object, keys sorted.
func writeObject(b *bytes.Buffer, m map[string]json.RawMessage) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(m[k])
	}
	b.WriteByte('}')
}
