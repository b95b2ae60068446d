package registry

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

const jsonContentType = "application/json"

// Verbs of the resources in discovery.
var (
	crVerbs            = []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
	crVerbsTerminating = []string{"delete", "deletecollection", "get", "list", "watch"}
	crdVerbs           = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	subresourceVerbs   = []string{"get", "patch", "update"}
)

// storageVersionHash is upstream's hash of a group/version/kind, telling
// clients when the storage version of a resource changed.
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// discoveryIndex keeps the rendered discovery documents, updated
// incrementally as CRDs change: a CRD change re-renders the documents of
// its group only; the documents that list every group (/apis, legacy and
// aggregated) are concatenated from per-group parts on the first request
// after a change. Every document carries a strong ETag.
type discoveryIndex struct {
	mu     sync.Mutex
	crds   map[string]map[string]*CRD // group → name → Established CRD
	groups map[string]*groupDocs      // groups with something served
	order  []string                   // builtinGroups, then CRD groups by name
	top    *topDocs                   // nil: re-assemble on the next request
}

// document is one rendered discovery document.
type document struct {
	body []byte
	etag string // quoted upper-case hex SHA-512 of body
}

func newDocument(body []byte) document {
	return document{body: body, etag: fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(body)))}
}

// groupDocs are the rendered documents of one group and its parts in the
// documents of every group.
type groupDocs struct {
	apiGroup   document            // /apis/<group>
	versions   map[string]document // /apis/<group>/<version>
	listEntry  []byte              // its APIGroup in /apis
	aggregated map[string][]byte   // its APIGroupDiscovery, by apidiscovery version
}

// topDocs are the documents of every group.
type topDocs struct {
	list       document
	aggregated map[string]document // by apidiscovery version
}

// aggregatedVersions are the apidiscovery.k8s.io versions served.
var aggregatedVersions = []string{"v2", "v2beta1"}

func newDiscoveryIndex() *discoveryIndex {
	x := &discoveryIndex{crds: map[string]map[string]*CRD{}, groups: map[string]*groupDocs{}}
	x.setGroup(apiRegistrationGroup, renderGroup(apiRegistrationGroupDocs()))
	x.setGroup(authenticationGroup, renderGroup(authenticationGroupDocs()))
	x.setGroup(authorizationGroup, renderGroup(authorizationGroupDocs()))
	x.setGroup(rbacGroup, renderGroup(rbacGroupDocs()))
	x.setGroup(groupName, renderGroup(builtinGroup()))
	return x
}

// update applies one informer change (old nil: added; new nil: deleted).
func (x *discoveryIndex) update(old, new *CRD) {
	x.mu.Lock()
	defer x.mu.Unlock()
	touched := map[string]bool{}
	for _, c := range []*CRD{old, new} {
		if c == nil || isBuiltinGroup(c.Spec.Group) {
			continue
		}
		if m := x.crds[c.Spec.Group]; m != nil {
			if _, ok := m[c.Name]; ok {
				delete(m, c.Name)
				touched[c.Spec.Group] = true
			}
		}
	}
	if new != nil && !isBuiltinGroup(new.Spec.Group) && conditionTrue(new, condEstablished) {
		m := x.crds[new.Spec.Group]
		if m == nil {
			m = map[string]*CRD{}
			x.crds[new.Spec.Group] = m
		}
		m[new.Name] = new
		touched[new.Spec.Group] = true
	}
	for g := range touched {
		crds := x.crds[g]
		if len(crds) == 0 {
			delete(x.crds, g)
		}
		x.setGroup(g, renderGroup(buildGroup(g, crds)))
	}
}

// setGroup installs a group's documents (nil: the group serves nothing),
// dropping the documents of every group when they change.
func (x *discoveryIndex) setGroup(name string, docs *groupDocs) {
	prev := x.groups[name]
	switch {
	case docs == nil && prev == nil:
		return
	case docs == nil:
		delete(x.groups, name)
		n := len(builtinGroups)
		i := sort.SearchStrings(x.order[n:], name) + n
		x.order = append(x.order[:i], x.order[i+1:]...)
	case prev == nil:
		x.groups[name] = docs
		if isBuiltinGroup(name) {
			// set up in builtinGroups' order, before any CRD group
			x.order = append(x.order, name)
			break
		}
		n := len(builtinGroups)
		i := sort.SearchStrings(x.order[n:], name) + n
		x.order = append(x.order[:i], append([]string{name}, x.order[i:]...)...)
	default:
		x.groups[name] = docs
		if prev.sameParts(docs) {
			return
		}
	}
	x.top = nil
}

func (g *groupDocs) sameParts(o *groupDocs) bool {
	if !bytes.Equal(g.listEntry, o.listEntry) {
		return false
	}
	for _, v := range aggregatedVersions {
		if !bytes.Equal(g.aggregated[v], o.aggregated[v]) {
			return false
		}
	}
	return true
}

// document returns /apis (group ""), /apis/<group> or
// /apis/<group>/<version>, and its content type. Only served versions of
// Established CRDs appear.
func (x *discoveryIndex) document(group, ver, accept string) (string, document, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if group == "" {
		top := x.topLocked()
		if ct, v, ok := wantsAggregated(accept); ok {
			return ct, top.aggregated[v], nil
		}
		return jsonContentType, top.list, nil
	}
	g, ok := x.groups[group]
	if !ok {
		return "", document{}, notFoundResource()
	}
	if ver == "" {
		return jsonContentType, g.apiGroup, nil
	}
	d, ok := g.versions[ver]
	if !ok {
		return "", document{}, notFoundResource()
	}
	return jsonContentType, d, nil
}

// topLocked assembles the documents of every group from the groups' parts.
func (x *discoveryIndex) topLocked() *topDocs {
	if x.top != nil {
		return x.top
	}
	join := func(prefix string, part func(*groupDocs) []byte) []byte {
		n := len(prefix) + 2
		for _, name := range x.order {
			n += len(part(x.groups[name])) + 1
		}
		b := make([]byte, 0, n)
		b = append(b, prefix...)
		for i, name := range x.order {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, part(x.groups[name])...)
		}
		return append(b, "]}"...)
	}
	top := &topDocs{
		list:       newDocument(join(`{"kind":"APIGroupList","apiVersion":"v1","groups":[`, func(g *groupDocs) []byte { return g.listEntry })),
		aggregated: map[string]document{},
	}
	for _, v := range aggregatedVersions {
		prefix := `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/` + v + `","metadata":{},"items":[`
		top.aggregated[v] = newDocument(join(prefix, func(g *groupDocs) []byte { return g.aggregated[v] }))
	}
	x.top = top
	return top
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode discovery: %v", err))
	}
	return b
}

// renderGroup renders a group's documents (nil when it serves nothing).
func renderGroup(g *discoveryGroup) *groupDocs {
	if g == nil || len(g.order) == 0 {
		return nil
	}
	d := &groupDocs{
		apiGroup:   newDocument(mustJSON(g.apiGroup(true))),
		versions:   map[string]document{},
		listEntry:  mustJSON(g.apiGroup(false)),
		aggregated: map[string][]byte{},
	}
	for _, v := range g.order {
		d.versions[v] = newDocument(mustJSON(&metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: g.name + "/" + v,
			APIResources: g.versions[v].resources,
		}))
	}
	agg := g.aggregated()
	d.aggregated["v2"] = mustJSON(agg)
	d.aggregated["v2beta1"] = mustJSON(toV2beta1(agg))
	return d
}

// discoveryGroup is what discovery knows of a group: its versions (by
// priority) and the resources of each version.
type discoveryGroup struct {
	name     string
	versions map[string]*discoveryVersion
	order    []string // highest priority first
}

type discoveryVersion struct {
	resources  []metav1.APIResource
	aggregated []aggregatedResource
}

// buildGroup describes the served versions of a group's Established CRDs.
func buildGroup(name string, crds map[string]*CRD) *discoveryGroup {
	g := &discoveryGroup{name: name, versions: map[string]*discoveryVersion{}}
	names := make([]string, 0, len(crds))
	for n := range crds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g.addCRD(crds[n])
	}
	sort.Slice(g.order, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(g.order[i], g.order[j]) > 0
	})
	return g
}

func (g *discoveryGroup) version(name string) *discoveryVersion {
	v, ok := g.versions[name]
	if !ok {
		v = &discoveryVersion{}
		g.versions[name] = v
		g.order = append(g.order, name)
	}
	return v
}

// authenticationGroup is served by the gateway's authenticators: the
// TokenReviews and SelfSubjectReviews, create-only, not stored.
const authenticationGroup = "authentication.k8s.io"

// authorizationGroup is served by the gateway's authorizers: the access
// reviews, create-only, not stored.
const authorizationGroup = "authorization.k8s.io"

// builtinGroups are the groups crdplane serves itself, first in /apis in
// kube-apiserver's order (apiregistration.k8s.io first, as the
// aggregator puts it, then by group priority: authentication.k8s.io
// 17700, authorization.k8s.io 17600,
// rbac.authorization.k8s.io 17000, apiextensions.k8s.io 16700); CRDs
// cannot add to them.
var builtinGroups = []string{apiRegistrationGroup, authenticationGroup, authorizationGroup, rbacGroup, groupName}

// apiRegistrationGroup is the APIRegistrationService's:
// apiregistration.k8s.io/v1 APIServices.
const apiRegistrationGroup = "apiregistration.k8s.io"

// apiRegistrationGroupDocs describes apiregistration.k8s.io/v1 as
// kube-apiserver lists it: apiservices (with the api-extensions category)
// and apiservices/status.
func apiRegistrationGroupDocs() *discoveryGroup {
	g := &discoveryGroup{name: apiRegistrationGroup, versions: map[string]*discoveryVersion{}}
	v := g.version("v1")
	v.resources = append(v.resources,
		metav1.APIResource{Name: "apiservices", SingularName: "apiservice", Kind: "APIService", Verbs: rbacVerbs, Categories: []string{"api-extensions"},
			StorageVersionHash: storageVersionHash(apiRegistrationGroup, "v1", "APIService")},
		metav1.APIResource{Name: "apiservices/status", SingularName: "", Kind: "APIService", Verbs: []string{"get", "patch", "update"}})
	v.aggregated = append(v.aggregated, aggregatedResource{resource: "apiservices", singular: "apiservice", kind: &metav1.GroupVersionKind{Kind: "APIService"},
		cluster: true, verbs: rbacVerbs, categories: []string{"api-extensions"}, status: &metav1.GroupVersionKind{Kind: "APIService"}})
	return g
}

func isBuiltinGroup(name string) bool { return slices.Contains(builtinGroups, name) }

// rbacGroup is the RBACService's: rbac.authorization.k8s.io/v1, between
// authorization.k8s.io and apiextensions.k8s.io in kube-apiserver's order
// (its group priority 17000).
const rbacGroup = "rbac.authorization.k8s.io"

// rbacVerbs are the verbs of every RBAC resource.
var rbacVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// rbacGroupDocs describes rbac.authorization.k8s.io/v1 as kube-apiserver
// lists it.
func rbacGroupDocs() *discoveryGroup {
	g := &discoveryGroup{name: rbacGroup, versions: map[string]*discoveryVersion{}}
	v := g.version("v1")
	for _, r := range []struct {
		kind       string
		namespaced bool
	}{{"ClusterRoleBinding", false}, {"ClusterRole", false}, {"RoleBinding", true}, {"Role", true}} {
		singular := strings.ToLower(r.kind)
		v.resources = append(v.resources, metav1.APIResource{Name: singular + "s", SingularName: singular, Namespaced: r.namespaced, Kind: r.kind, Verbs: rbacVerbs,
			StorageVersionHash: storageVersionHash(rbacGroup, "v1", r.kind)})
		v.aggregated = append(v.aggregated, aggregatedResource{resource: singular + "s", singular: singular, kind: &metav1.GroupVersionKind{Kind: r.kind}, cluster: !r.namespaced, verbs: rbacVerbs})
	}
	return g
}

// authorizationGroupDocs describes authorization.k8s.io/v1 as
// kube-apiserver lists it: the four reviews, verb create only.
func authorizationGroupDocs() *discoveryGroup {
	g := &discoveryGroup{name: authorizationGroup, versions: map[string]*discoveryVersion{}}
	v := g.version("v1")
	for _, r := range []struct {
		kind       string
		namespaced bool
	}{{"LocalSubjectAccessReview", true}, {"SelfSubjectAccessReview", false}, {"SelfSubjectRulesReview", false}, {"SubjectAccessReview", false}} {
		singular := strings.ToLower(r.kind)
		v.resources = append(v.resources, metav1.APIResource{Name: singular + "s", SingularName: singular, Namespaced: r.namespaced, Kind: r.kind, Verbs: reviewVerbs})
		v.aggregated = append(v.aggregated, aggregatedResource{resource: singular + "s", singular: singular, kind: &metav1.GroupVersionKind{Kind: r.kind}, cluster: !r.namespaced, verbs: reviewVerbs})
	}
	return g
}

// authenticationGroupDocs describes authentication.k8s.io/v1 as
// kube-apiserver lists it: the two reviews, verb create only.
func authenticationGroupDocs() *discoveryGroup {
	g := &discoveryGroup{name: authenticationGroup, versions: map[string]*discoveryVersion{}}
	v := g.version("v1")
	for _, kind := range []string{"SelfSubjectReview", "TokenReview"} {
		singular := strings.ToLower(kind)
		v.resources = append(v.resources, metav1.APIResource{Name: singular + "s", SingularName: singular, Kind: kind, Verbs: reviewVerbs})
		v.aggregated = append(v.aggregated, aggregatedResource{resource: singular + "s", singular: singular, kind: &metav1.GroupVersionKind{Kind: kind}, cluster: true, verbs: reviewVerbs})
	}
	return g
}

// reviewVerbs: the access reviews are only created.
var reviewVerbs = []string{"create"}

// builtinGroup describes apiextensions.k8s.io/v1 itself.
func builtinGroup() *discoveryGroup {
	g := &discoveryGroup{name: groupName, versions: map[string]*discoveryVersion{}}
	v := g.version("v1")
	v.resources = []metav1.APIResource{
		{
			Name:         crdResource,
			SingularName: "customresourcedefinition",
			Kind:         crdKind,
			Verbs:        crdVerbs,
			ShortNames:   []string{"crd", "crds"},
			Categories:   []string{"api-extensions"},
			// kube-apiserver still hashes the v1beta1 storage encoding of CRDs
			StorageVersionHash: storageVersionHash(groupName, "v1beta1", crdKind),
		},
		{Name: crdResource + "/status", Kind: crdKind, Verbs: subresourceVerbs},
	}
	v.aggregated = []aggregatedResource{{
		resource:   crdResource,
		singular:   "customresourcedefinition",
		kind:       &metav1.GroupVersionKind{Kind: crdKind},
		cluster:    true,
		verbs:      crdVerbs,
		shortNames: []string{"crd", "crds"},
		categories: []string{"api-extensions"},
		status:     &metav1.GroupVersionKind{Kind: crdKind},
	}}
	return g
}

// addCRD adds the served versions of an Established CRD.
func (g *discoveryGroup) addCRD(crd *CRD) {
	names := crd.Status.AcceptedNames
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	verbs := crVerbs
	if conditionTrue(crd, condTerminating) {
		verbs = crVerbsTerminating
	}
	hash := ""
	if sv := storageVersion(crd); sv != "" {
		hash = storageVersionHash(crd.Spec.Group, sv, crd.Spec.Names.Kind)
	}
	for _, cv := range crd.Spec.Versions {
		if !cv.Served {
			continue
		}
		v := g.version(cv.Name)
		v.resources = append(v.resources, metav1.APIResource{
			Name:               names.Plural,
			SingularName:       names.Singular,
			Namespaced:         namespaced,
			Kind:               names.Kind,
			Verbs:              verbs,
			ShortNames:         names.ShortNames,
			Categories:         names.Categories,
			StorageVersionHash: hash,
		})
		gvk := &metav1.GroupVersionKind{Group: crd.Spec.Group, Version: cv.Name, Kind: names.Kind}
		ar := aggregatedResource{
			resource: names.Plural, singular: names.Singular, kind: gvk, cluster: !namespaced,
			verbs: verbs, shortNames: names.ShortNames, categories: names.Categories,
		}
		if sub := cv.Subresources; sub != nil && sub.Status != nil {
			v.resources = append(v.resources, metav1.APIResource{
				Name: names.Plural + "/status", Namespaced: namespaced, Kind: names.Kind, Verbs: subresourceVerbs,
			})
			ar.status = gvk
		}
		if sub := cv.Subresources; sub != nil && sub.Scale != nil {
			v.resources = append(v.resources, metav1.APIResource{
				Name: names.Plural + "/scale", Namespaced: namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: subresourceVerbs,
			})
			ar.scale = true
		}
		v.aggregated = append(v.aggregated, ar)
	}
}

// apiGroup renders a group (with TypeMeta when served on its own).
func (g *discoveryGroup) apiGroup(withType bool) *metav1.APIGroup {
	out := &metav1.APIGroup{Name: g.name}
	if withType {
		out.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
	}
	for _, v := range g.order {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
	}
	if len(out.Versions) > 0 {
		out.PreferredVersion = out.Versions[0]
	}
	return out
}
