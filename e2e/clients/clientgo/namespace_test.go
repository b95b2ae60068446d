package clientgo

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// TestNamespacesProtobuf drives core/v1 Namespaces through the typed
// clientset over protobuf (as Kubernetes' components configure it):
// create, get, list, watch, update, strategic merge patch, then a delete
// that empties the namespace of its custom resources before it goes. A
// server without core/v1 namespaces (the standalone upstream
// apiextensions-apiserver) skips it.
func TestNamespacesProtobuf(t *testing.T) {
	cfg := config(t)
	if res, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerResourcesForGroupVersion("v1"); err != nil ||
		!slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == "namespaces" }) {
		t.Skipf("the server does not serve core/v1 namespaces (%v)", err)
	}
	ctx := ctxFor(t)
	f := newFixture(t)
	install(t, cfg, f)
	pb := *cfg
	pb.ContentType = runtime.ContentTypeProtobuf
	pb.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	nss := kubernetes.NewForConfigOrDie(&pb).CoreV1().Namespaces()
	name := f.namespace

	created, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{runLabel: f.suffix}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Status.Phase != corev1.NamespaceActive || !slices.Contains(created.Spec.Finalizers, corev1.FinalizerKubernetes) ||
		created.Labels[corev1.LabelMetadataName] != name || created.UID == "" {
		t.Fatalf("create: %+v", created)
	}
	got, err := nss.Get(ctx, name, metav1.GetOptions{})
	if err != nil || got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("get: %v %+v", err, got)
	}
	list, err := nss.List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != name {
		t.Fatalf("list: %v %+v", err, list)
	}
	if byPhase, err := nss.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Active,metadata.name=" + name}); err != nil || len(byPhase.Items) != 1 {
		t.Fatalf("list by status.phase: %v %+v", err, byPhase)
	}
	w, err := nss.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	got.Labels["color"] = "red"
	updated, err := nss.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil || updated.Labels["color"] != "red" {
		t.Fatalf("update: %v %+v", err, updated)
	}
	waitEvent(t, w, func(ev watch.Event) bool {
		ns, ok := ev.Object.(*corev1.Namespace)
		return ev.Type == watch.Modified && ok && ns.Labels["color"] == "red"
	}, "MODIFIED (update)")
	patched, err := nss.Patch(ctx, name, types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"size":"big"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Labels["size"] != "big" || patched.Labels["color"] != "red" {
		t.Fatalf("strategic merge patch: %v %+v", err, patched)
	}

	// a custom resource inside goes with the namespace
	dyn := dynamic.NewForConfigOrDie(cfg).Resource(f.gvr()).Namespace(name)
	if _, err := dyn.Create(ctx, widget(f, "w1", 1, "blue"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a widget: %v", err)
	}
	if err := nss.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitEvent(t, w, func(ev watch.Event) bool { return ev.Type == watch.Deleted }, "DELETED")
	if _, err := nss.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := dyn.Get(ctx, "w1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the widget in the deleted namespace: %v", err)
	}
}
