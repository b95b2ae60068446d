package registry

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// discoveryCache keeps the discovery model of the informer's CRDs until
// they change.
type discoveryCache struct {
	inf     *informer
	mu      sync.Mutex
	changes uint64
	model   *discoveryModel
}

func (c *discoveryCache) get() *discoveryModel {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.model == nil || c.inf.changeCount() != c.changes {
		crds, n := c.inf.snapshot()
		c.model, c.changes = buildDiscovery(crds), n
	}
	return c.model
}

// discoveryDocument renders /apis (group ""), /apis/<group> or
// /apis/<group>/<version> from a discovery model. Only served versions of
// Established CRDs appear.
func discoveryDocument(m *discoveryModel, group, ver, accept string) (string, []byte, error) {
	if group == "" {
		if ct, v, ok := wantsAggregated(accept); ok {
			return encodeDiscovery(ct, m.aggregated(v))
		}
		return encodeDiscovery(jsonContentType, m.groupList())
	}
	g, ok := m.groups[group]
	if !ok {
		return "", nil, notFoundResource()
	}
	if ver == "" {
		return encodeDiscovery(jsonContentType, g.apiGroup(true))
	}
	v, ok := g.versions[ver]
	if !ok {
		return "", nil, notFoundResource()
	}
	return encodeDiscovery(jsonContentType, &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: group + "/" + ver,
		APIResources: v.resources,
	})
}

func encodeDiscovery(ct string, doc any) (string, []byte, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return "", nil, apierrors.NewInternalError(fmt.Errorf("encode discovery: %w", err))
	}
	return ct, b, nil
}

// discoveryModel is what discovery knows: groups, their versions (by
// priority) and the resources of each version.
type discoveryModel struct {
	groups map[string]*discoveryGroup
	order  []string // apiextensions.k8s.io first, then CRD groups by name
}

type discoveryGroup struct {
	name     string
	versions map[string]*discoveryVersion
	order    []string // highest priority first
}

type discoveryVersion struct {
	resources  []metav1.APIResource
	aggregated []aggregatedResource
}

func buildDiscovery(crds []*CRD) *discoveryModel {
	m := &discoveryModel{groups: map[string]*discoveryGroup{}}
	m.addBuiltin()
	for _, crd := range crds {
		if !conditionTrue(crd, condEstablished) || crd.Spec.Group == groupName {
			continue
		}
		m.addCRD(crd)
	}
	var custom []string
	for name := range m.groups {
		if name != groupName {
			custom = append(custom, name)
		}
	}
	sort.Strings(custom)
	m.order = append([]string{groupName}, custom...)
	for _, g := range m.groups {
		sort.Slice(g.order, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(g.order[i], g.order[j]) > 0
		})
	}
	return m
}

func (m *discoveryModel) group(name string) *discoveryGroup {
	g, ok := m.groups[name]
	if !ok {
		g = &discoveryGroup{name: name, versions: map[string]*discoveryVersion{}}
		m.groups[name] = g
	}
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

// addBuiltin describes apiextensions.k8s.io/v1 itself.
func (m *discoveryModel) addBuiltin() {
	v := m.group(groupName).version("v1")
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
}

// addCRD adds the served versions of an Established CRD.
func (m *discoveryModel) addCRD(crd *CRD) {
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
		g := m.group(crd.Spec.Group)
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

func (m *discoveryModel) groupList() *metav1.APIGroupList {
	out := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, name := range m.order {
		out.Groups = append(out.Groups, *m.groups[name].apiGroup(false))
	}
	return out
}
