// Package openapi builds the OpenAPI documents kube-apiserver publishes:
// /openapi/v3, an index of group-versions and one document per group-version
// with the paths of every resource (operations carrying
// x-kubernetes-group-version-kind and their query parameters, which kubectl
// reads to decide whether the server validates fields) and the schemas (CRD
// schemas plus upstream's own definitions of ObjectMeta and the CRD type);
// and /openapi/v2, one swagger document with the lossy v3 → v2 conversion
// of the CRD schemas (v2.go).
//
// Documents are kept per group-version and rendered again only for the
// group-versions a CRD change touches, on the first request after it.
package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	generated "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// CRD is a CustomResourceDefinition.
type CRD = apiextensionsv1.CustomResourceDefinition

// Document is one rendered document.
type Document struct {
	Body []byte
	// Hash identifies Body: the upper-case hex SHA-512 of Body, as upstream
	// puts in the index's serverRelativeURL (for /openapi/v2, assembled from
	// parts, the SHA-512 of the parts' hashes).
	Hash string
	// Modified is when the document last changed (what upstream's
	// handlers send as Last-Modified): when it was built again after a
	// CRD change, not when a copy the cache dropped was rendered again.
	Modified time.Time
}

// Builder holds the documents. CRD changes only mark the group-versions
// they touch; a document is rendered on the first request that needs it
// after a change, so that a burst of changes (the initial list of every
// CRD) renders each document once.
type Builder struct {
	mu     sync.Mutex
	crds   map[string]*CRD     // by name, Established only
	gvs    map[string]*gvState // "apis/<group>/<version>" served now (v2)
	v3     map[string]*v3GV    // "apis/<group>/<version>" with a v3 document
	apiext *Document           // apis/apiextensions.k8s.io/v1
	// builtin are the documents of builtinGroups, by path
	builtin map[string]*Document
	// bodies keeps the most recently used v3 group-version documents
	bodies *bodyCache
	index  *Document // nil: stale
	v2doc  *Document // nil: stale
	v2pb   *Document // nil: stale
}

// gvState is one CRD group-version served now: its CRDs and its share of
// /openapi/v2.
type gvState struct {
	crds map[string]*CRD
	v2   *v2Part // nil: stale
}

// New returns a Builder holding only the static documents: apiextensions.k8s.io/v1
// and the built-in groups (core/v1 Namespaces, rbac.authorization.k8s.io/v1).
func New() *Builder { return NewWithCache(DefaultDocumentCacheBytes) }

// NewWithCache is New keeping at most cacheBytes of rendered v3
// group-version documents: with thousands of CRDs their documents (some
// 70 KB each) would be most of the registry's memory; one not kept is
// rendered again, identical, when asked for.
func NewWithCache(cacheBytes int) *Builder {
	return &Builder{crds: map[string]*CRD{}, gvs: map[string]*gvState{}, v3: map[string]*v3GV{},
		apiext: &Document{Body: v133APIExtensionsV1, Hash: hash(v133APIExtensionsV1), Modified: time.Now()}, builtin: builtinDocuments(), bodies: newBodyCache(cacheBytes)}
}

// builtinDocuments are rendered once per process: they never change.
var builtinDocuments = sync.OnceValue(func() map[string]*Document {
	docs := make(map[string]*Document, len(builtinGroups))
	for _, g := range builtinGroups {
		docs[g.gvPath] = render(g.document())
	}
	return docs
})

// Update applies one CRD change (old nil: added; new nil: deleted),
// marking the documents of the group-versions it touches.
func (b *Builder) Update(old, new *CRD) {
	b.mu.Lock()
	defer b.mu.Unlock()
	name := ""
	if new != nil {
		name = new.Name
	} else if old != nil {
		name = old.Name
	}
	if b.updateV3(name, new) {
		b.index = nil
	}
	if old != nil && new != nil {
		if prev, ok := b.crds[new.Name]; ok && sameDocuments(prev, new) {
			// a status change: the documents stay as they are
			b.crds[new.Name] = new
			for _, gv := range servedGVs(new) {
				b.gvs[gv].crds[new.Name] = new
			}
			return
		}
	}
	touched := map[string]bool{}
	for _, c := range []*CRD{old, new} {
		if c == nil {
			continue
		}
		if prev, ok := b.crds[c.Name]; ok {
			for _, gv := range servedGVs(prev) {
				delete(b.gvs[gv].crds, prev.Name)
				touched[gv] = true
			}
			delete(b.crds, c.Name)
		}
	}
	if new != nil && established(new) && new.DeletionTimestamp == nil {
		b.crds[new.Name] = new
		for _, gv := range servedGVs(new) {
			st := b.gvs[gv]
			if st == nil {
				st = &gvState{crds: map[string]*CRD{}}
				b.gvs[gv] = st
			}
			st.crds[new.Name] = new
			touched[gv] = true
		}
	}
	if len(touched) == 0 {
		return
	}
	for gv := range touched {
		if len(b.gvs[gv].crds) == 0 {
			delete(b.gvs, gv)
			continue
		}
		b.gvs[gv].v2 = nil
	}
	b.v2doc, b.v2pb = nil, nil
}

// updateV3 follows a CRD change (new nil: deleted) in the v3 documents as
// upstream's openapiv3 controller does: a CRD that is gone or not
// Established leaves every group-version; otherwise each served version
// gets a new part when the spec changed (generation or uid), and versions
// no longer served keep theirs. It reports whether a document changed.
func (b *Builder) updateV3(name string, new *CRD) bool {
	changed := false
	if new == nil || !established(new) {
		for gv, st := range b.v3 {
			if _, ok := st.parts[name]; ok {
				delete(st.parts, name)
				st.hash = ""
				changed = true
				if len(st.parts) == 0 {
					delete(b.v3, gv)
					b.bodies.remove(gv)
				}
			}
		}
		return changed
	}
	for _, v := range new.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := "apis/" + new.Spec.Group + "/" + v.Name
		st := b.v3[gv]
		if st == nil {
			st = &v3GV{parts: map[string]*v3Part{}}
			b.v3[gv] = st
		}
		if p, ok := st.parts[name]; ok && p.crd.UID == new.UID && p.crd.Generation == new.Generation && new.Generation != 0 {
			continue
		}
		st.parts[name] = &v3Part{crd: new, version: v.Name}
		st.hash = ""
		changed = true
	}
	return changed
}

// Index returns the /openapi/v3 index.
func (b *Builder) Index() *Document {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.index != nil {
		return b.index
	}
	type entry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	// the stale documents are rendered in parallel for their hashes; the
	// cache keeps the last ones rendered
	var stale []string
	for gv, st := range b.v3 {
		if st.hash == "" {
			stale = append(stale, gv)
		}
	}
	// in batches, so that thousands of stale documents (the first index
	// after a restart) are not all held at once
	const batch = 256
	docs := make([]*Document, min(batch, len(stale)))
	for start := 0; start < len(stale); start += batch {
		gvs := stale[start:min(start+batch, len(stale))]
		parallel(len(gvs), func(i int) { docs[i] = renderV3(b.v3[gvs[i]]) })
		for i, gv := range gvs {
			b.v3[gv].rendered(docs[i])
			b.bodies.put(gv, docs[i])
			docs[i] = nil
		}
	}
	paths := make(map[string]entry, len(b.v3)+1+len(b.builtin))
	paths[crdGVPath] = entry{ServerRelativeURL: "/openapi/v3/" + crdGVPath + "?hash=" + b.apiext.Hash}
	for gv, d := range b.builtin {
		paths[gv] = entry{ServerRelativeURL: "/openapi/v3/" + gv + "?hash=" + d.Hash}
	}
	for gv := range b.v3 {
		paths[gv] = entry{ServerRelativeURL: "/openapi/v3/" + gv + "?hash=" + b.v3[gv].hash}
	}
	body, err := json.Marshal(map[string]any{"paths": paths})
	if err != nil {
		panic(fmt.Sprintf("openapi index: %v", err))
	}
	b.index = &Document{Body: body, Hash: hash(body), Modified: time.Now()}
	return b.index
}

// Get returns the document of path ("apis/<group>/<version>").
func (b *Builder) Get(path string) (*Document, bool) {
	if path == crdGVPath {
		return b.apiext, true
	}
	if d, ok := b.builtin[path]; ok {
		return d, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.v3[path]; !ok {
		return nil, false
	}
	return b.docLocked(path), true
}

func (b *Builder) docLocked(gv string) *Document {
	st := b.v3[gv]
	if st.hash != "" {
		if d := b.bodies.get(gv, st.hash); d != nil {
			return d
		}
	}
	d := renderV3(st)
	st.rendered(d)
	b.bodies.put(gv, d)
	return d
}

// v2Parts returns every group-version's share of /openapi/v2, in order.
func (b *Builder) v2Parts() []*v2Part {
	b.mu.Lock()
	defer b.mu.Unlock()
	gvs := sortedKeys(b.gvs)
	parallel(len(gvs), func(i int) {
		if st := b.gvs[gvs[i]]; st.v2 == nil {
			st.v2 = renderV2Part(gvs[i], st.crds)
		}
	})
	parts := make([]*v2Part, len(gvs))
	for i, gv := range gvs {
		parts[i] = b.gvs[gv].v2
	}
	return parts
}

// parallel runs fn(0..n-1) on GOMAXPROCS goroutines.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// V2 returns the /openapi/v2 document (JSON).
func (b *Builder) V2() *Document {
	b.mu.Lock()
	d := b.v2doc
	b.mu.Unlock()
	if d != nil {
		return d
	}
	d = assembleV2(b.v2Parts())
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.v2doc == nil {
		b.v2doc = d
	}
	return b.v2doc
}

// V2Proto returns the /openapi/v2 document in its protobuf form
// (gnostic's openapi_v2.Document), as kubectl asks for it.
func (b *Builder) V2Proto() (*Document, error) {
	b.mu.Lock()
	d := b.v2pb
	b.mu.Unlock()
	if d != nil {
		return d, nil
	}
	d, err := assembleV2Proto(b.v2Parts())
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.v2pb == nil {
		b.v2pb = d
	}
	return b.v2pb, nil
}

func render(doc map[string]any) *Document {
	body, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("openapi document: %v", err))
	}
	return &Document{Body: body, Hash: hash(body), Modified: time.Now()}
}

func hash(b []byte) string { return fmt.Sprintf("%X", sha512.Sum512(b)) }

// sameDocuments reports whether a published CRD's change leaves its
// documents alone: same spec (generation), still Established, not deleted.
func sameDocuments(prev, crd *CRD) bool {
	return prev.Generation != 0 && prev.Generation == crd.Generation && prev.UID == crd.UID &&
		established(crd) && crd.DeletionTimestamp == nil
}

func established(crd *CRD) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func servedGVs(crd *CRD) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, "apis/"+crd.Spec.Group+"/"+v.Name)
		}
	}
	return out
}

// ---- schemas shared with upstream's generated definitions ----

var (
	defsOnce sync.Once
	defs     map[string]common.OpenAPIDefinition
)

// definitions returns upstream's OpenAPI definitions (metav1, apiextensions)
// keyed by their friendly name, with refs pointing at #/components/schemas.
func definitions() map[string]common.OpenAPIDefinition {
	defsOnce.Do(func() {
		raw := generated.GetOpenAPIDefinitions(func(path string) spec.Ref {
			return spec.MustCreateRef("#/components/schemas/" + friendlyName(path))
		})
		defs = make(map[string]common.OpenAPIDefinition, len(raw))
		for k, v := range raw {
			defs[friendlyName(k)] = v
		}
	})
	return defs
}

// friendlyName turns a Go type path ("k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta")
// into upstream's schema name ("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").
func friendlyName(name string) string {
	domain, rest, ok := strings.Cut(name, "/")
	if !ok {
		return name
	}
	parts := strings.Split(domain, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + strings.ReplaceAll(rest, "/", ".")
}

// addSchemaClosure puts the named definition and everything it refers to
// into schemas (rendered once: upstream's definitions do not change),
// worded as v1.33's where v133_components.json has it and without the
// schemas v1.33 does not have (the library's models are newer: v3.go).
func addSchemaClosure(schemas map[string]any, name string) {
	if _, ok := schemas[name]; ok || slices.Contains(v137Only, name) {
		return
	}
	def, ok := definitions()[name]
	if !ok {
		return
	}
	v133Schemas()
	if b, ok := v133Rendered[name]; ok {
		schemas[name] = b
	} else {
		schemas[name] = renderedDefinition(name, def.Schema)
	}
	for _, dep := range def.Dependencies {
		addSchemaClosure(schemas, friendlyName(dep))
	}
}

var renderedDefs sync.Map // name → json.RawMessage

func renderedDefinition(name string, s spec.Schema) json.RawMessage {
	if b, ok := renderedDefs.Load(name); ok {
		return b.(json.RawMessage)
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("openapi definition %s: %v", name, err))
	}
	renderedDefs.Store(name, json.RawMessage(b))
	return b
}

// copySchema deep-copies a schema (upstream's definitions are shared).
func copySchema(s spec.Schema) spec.Schema {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	var out spec.Schema
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedNames(m map[string]*CRD) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
