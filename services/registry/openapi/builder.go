// Package openapi builds the OpenAPI v3 documents kube-apiserver publishes at
// /openapi/v3: an index of group-versions and one document per group-version
// with the paths of every resource (operations carrying
// x-kubernetes-group-version-kind and their query parameters, which kubectl
// reads to decide whether the server validates fields) and the schemas (CRD
// schemas plus upstream's own definitions of ObjectMeta and the CRD type).
//
// Documents are kept per group-version and rebuilt only for the
// group-versions a CRD change touches.
package openapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

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
	// Hash is the upper-case hex SHA-512 of Body, as upstream puts in the
	// index's serverRelativeURL.
	Hash string
}

// Builder holds the current documents.
type Builder struct {
	mu    sync.RWMutex
	crds  map[string]*CRD            // by name, Established only
	gvs   map[string]map[string]*CRD // "apis/<group>/<version>" → CRDs by name
	docs  map[string]*Document       // "apis/<group>/<version>" → document
	index *Document
}

// New returns a Builder holding only the apiextensions.k8s.io/v1 document.
func New() *Builder {
	b := &Builder{crds: map[string]*CRD{}, gvs: map[string]map[string]*CRD{}, docs: map[string]*Document{}}
	b.docs[crdGVPath] = render(apiextensionsDocument())
	b.rebuildIndexLocked()
	return b
}

// Update applies one CRD change (old nil: added; new nil: deleted) and
// rebuilds the documents of the group-versions it touches.
func (b *Builder) Update(old, new *CRD) {
	b.mu.Lock()
	defer b.mu.Unlock()
	touched := map[string]bool{}
	if old != nil {
		if prev, ok := b.crds[old.Name]; ok {
			for _, gv := range servedGVs(prev) {
				delete(b.gvs[gv], prev.Name)
				touched[gv] = true
			}
			delete(b.crds, old.Name)
		}
	}
	if new != nil {
		if prev, ok := b.crds[new.Name]; ok {
			for _, gv := range servedGVs(prev) {
				delete(b.gvs[gv], prev.Name)
				touched[gv] = true
			}
			delete(b.crds, new.Name)
		}
		if established(new) && new.DeletionTimestamp == nil {
			b.crds[new.Name] = new
			for _, gv := range servedGVs(new) {
				if b.gvs[gv] == nil {
					b.gvs[gv] = map[string]*CRD{}
				}
				b.gvs[gv][new.Name] = new
				touched[gv] = true
			}
		}
	}
	if len(touched) == 0 {
		return
	}
	for gv := range touched {
		if len(b.gvs[gv]) == 0 {
			delete(b.gvs, gv)
			delete(b.docs, gv)
			continue
		}
		b.docs[gv] = render(groupVersionDocument(gv, b.gvs[gv]))
	}
	b.rebuildIndexLocked()
}

// Index returns the /openapi/v3 index.
func (b *Builder) Index() *Document {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.index
}

// Get returns the document of path ("apis/<group>/<version>").
func (b *Builder) Get(path string) (*Document, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	d, ok := b.docs[path]
	return d, ok
}

func (b *Builder) rebuildIndexLocked() {
	type entry struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	}
	paths := make(map[string]entry, len(b.docs))
	for p, d := range b.docs {
		paths[p] = entry{ServerRelativeURL: "/openapi/v3/" + p + "?hash=" + d.Hash}
	}
	body, err := json.Marshal(map[string]any{"paths": paths})
	if err != nil {
		panic(fmt.Sprintf("openapi index: %v", err))
	}
	b.index = &Document{Body: body, Hash: hash(body)}
}

func render(doc map[string]any) *Document {
	body, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("openapi document: %v", err))
	}
	return &Document{Body: body, Hash: hash(body)}
}

func hash(b []byte) string { return fmt.Sprintf("%X", sha512.Sum512(b)) }

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
// into schemas.
func addSchemaClosure(schemas map[string]any, name string) {
	if _, ok := schemas[name]; ok {
		return
	}
	def, ok := definitions()[name]
	if !ok {
		return
	}
	schemas[name] = def.Schema
	for _, dep := range def.Dependencies {
		addSchemaClosure(schemas, friendlyName(dep))
	}
}

func sortedNames(m map[string]*CRD) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
