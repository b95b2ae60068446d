package clientgo

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// TestDiscovery reads the server's groups and resources with the discovery
// client and maps kinds to resources with the deferred discovery REST
// mapper, which must learn a CRD created after it first looked.
func TestDiscovery(t *testing.T) {
	ctx := ctxFor(t)
	cfg := config(t)
	f := newFixture(t)
	install(t, cfg, f)
	dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)

	var res *metav1.APIResourceList
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var err error
		res, err = dc.ServerResourcesForGroupVersion(f.group + "/v1")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s/v1 not discovered: %v", f.group, err)
	}
	byName := map[string]metav1.APIResource{}
	for _, r := range res.APIResources {
		byName[r.Name] = r
	}
	w, ok := byName["widgets"]
	if !ok || w.Kind != "Widget" || !w.Namespaced || w.SingularName != "widget" ||
		!slices.Equal(w.ShortNames, f.crd.Spec.Names.ShortNames) || !slices.Equal(w.Categories, f.crd.Spec.Names.Categories) {
		t.Fatalf("widgets resource: %+v", w)
	}
	for _, verb := range []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"} {
		if !slices.Contains(w.Verbs, verb) {
			t.Fatalf("widgets verbs %v lack %s", w.Verbs, verb)
		}
	}
	if st, ok := byName["widgets/status"]; !ok || st.Kind != "Widget" || !slices.Contains(st.Verbs, "patch") {
		t.Fatalf("widgets/status: %+v", st)
	}

	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("server groups and resources: %v", err)
	}
	if !slices.ContainsFunc(groups, func(g *metav1.APIGroup) bool {
		return g.Name == f.group && g.PreferredVersion.GroupVersion == f.group+"/v1"
	}) {
		t.Fatalf("group %s not among %d groups", f.group, len(groups))
	}
	if !slices.ContainsFunc(resources, func(l *metav1.APIResourceList) bool { return l.GroupVersion == "apiextensions.k8s.io/v1" }) {
		t.Fatal("apiextensions.k8s.io/v1 not among the resources")
	}
	if v, err := dc.ServerVersion(); err != nil || v.Major == "" {
		t.Fatalf("server version: %v %+v", err, v)
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	m, err := mapper.RESTMapping(schema.GroupKind{Group: f.group, Kind: "Widget"}, "v1")
	if err != nil {
		t.Fatalf("REST mapping of Widget: %v", err)
	}
	if m.Resource != f.gvr() || m.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Fatalf("REST mapping of Widget: %v %s", m.Resource, m.Scope.Name())
	}
	if gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: f.group, Resource: "widget"}); err != nil || gvk.Kind != "Widget" || gvk.Version != "v1" {
		t.Fatalf("KindFor widget: %v %v", gvk, err)
	}
	crdMapping, err := mapper.RESTMapping(schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"})
	if err != nil || crdMapping.Resource.Resource != "customresourcedefinitions" || crdMapping.Scope.Name() != meta.RESTScopeNameRoot {
		t.Fatalf("REST mapping of CustomResourceDefinition: %v %v", crdMapping, err)
	}
	if ex, err := restmapper.NewShortcutExpander(mapper, dc, nil).ResourceFor(schema.GroupVersionResource{Resource: f.crd.Spec.Names.ShortNames[0]}); err != nil || ex != f.gvr() {
		t.Fatalf("short name %s: %v %v", f.crd.Spec.Names.ShortNames[0], ex, err)
	}

	// A CRD created after the mapper first looked: after Reset (what
	// kubectl and controller-runtime do on a miss) the mapper finds it.
	g := newFixture(t)
	cs := apiextclient.NewForConfigOrDie(cfg)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, g.crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create second CRD: %v", err)
	}
	t.Cleanup(func() { deleteCRD(t, cs, g.crd.Name) })
	waitEstablished(t, cs, g.crd.Name)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		m, err = mapper.RESTMapping(schema.GroupKind{Group: g.group, Kind: "Widget"}, "v1")
		if err != nil {
			mapper.Reset()
			return false, nil
		}
		return true, nil
	})
	if err != nil || m.Resource != g.gvr() {
		t.Fatalf("REST mapping of the new CRD's kind: %v %v", m, err)
	}
}
