package clientgo

import (
	"context"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// TestMetadata drives custom resources through the metadata client
// (PartialObjectMetadata): get, list, watch, patch, delete.
func TestMetadata(t *testing.T) {
	ctx := ctxFor(t)
	cfg := config(t)
	f := newFixture(t)
	install(t, cfg, f)
	ws := dynamic.NewForConfigOrDie(cfg).Resource(f.gvr()).Namespace(f.namespace)
	mc := metadata.NewForConfigOrDie(cfg).Resource(f.gvr()).Namespace(f.namespace)

	created, err := ws.Create(ctx, widget(f, "m1", 1, "red"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := ws.Create(ctx, widget(f, "m2", 2, "red"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create m2: %v", err)
	}

	pom, err := mc.Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if pom.UID != created.GetUID() || pom.ResourceVersion != created.GetResourceVersion() || pom.Name != "m1" || pom.Namespace != f.namespace ||
		!apiequality.Semantic.DeepEqual(pom.Labels, created.GetLabels()) || !apiequality.Semantic.DeepEqual(pom.Annotations, created.GetAnnotations()) {
		t.Fatalf("get: metadata %+v differs from the created object's %v", pom.ObjectMeta, created.Object["metadata"])
	}

	list, err := mc.List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "m1" || list.Items[1].Name != "m2" {
		t.Fatalf("list: %d items, want m1 and m2", len(list.Items))
	}
	mustEqual(t, "list: m1", list.Items[0].ObjectMeta, pom.ObjectMeta, apiequality.Semantic.DeepEqual(list.Items[0].ObjectMeta, pom.ObjectMeta))

	w, err := mc.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	patched, err := mc.Patch(ctx, "m1", types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"patched"},"annotations":{"a":"b"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	if patched.Labels["step"] != "patched" || patched.Annotations["a"] != "b" || patched.Labels[runLabel] != f.suffix {
		t.Fatalf("patch: %+v", patched.ObjectMeta)
	}
	full, err := ws.Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get full: %v", err)
	}
	if full.GetResourceVersion() != patched.ResourceVersion || !apiequality.Semantic.DeepEqual(full.GetLabels(), patched.Labels) ||
		field(full, "spec", "size") != int64(1) {
		t.Fatalf("full object after metadata patch: %v", full.Object)
	}
	ev := waitEvent(t, w, func(ev watch.Event) bool { return ev.Type == watch.Modified }, "MODIFIED")
	got := ev.Object.(*metav1.PartialObjectMetadata)
	mustEqual(t, "watch: patched", got.ObjectMeta, patched.ObjectMeta, apiequality.Semantic.DeepEqual(got.ObjectMeta, patched.ObjectMeta))

	if err := mc.Delete(ctx, "m1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	ev = waitEvent(t, w, func(ev watch.Event) bool { return ev.Type == watch.Deleted }, "DELETED")
	if ev.Object.(*metav1.PartialObjectMetadata).UID != created.GetUID() {
		t.Fatalf("DELETED for %s", ev.Object.(*metav1.PartialObjectMetadata).UID)
	}
	if err := waitGone(ctx, func(ctx context.Context) error { _, err := mc.Get(ctx, "m1", metav1.GetOptions{}); return err }); err != nil {
		t.Fatalf("m1: %v", err)
	}
	if err := mc.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix}); err != nil {
		t.Fatalf("delete collection: %v", err)
	}
	if left, err := mc.List(ctx, metav1.ListOptions{}); err != nil || len(left.Items) != 0 {
		t.Fatalf("after delete collection: %v %v", err, left)
	}
}
