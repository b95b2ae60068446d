package clientgo

import (
	"context"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

func widget(f fixture, name string, size int64, color string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": f.group + "/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name":        name,
			"namespace":   f.namespace,
			"labels":      map[string]any{runLabel: f.suffix},
			"annotations": map[string]any{"clients.crdplane.io/note": "n-" + name},
		},
		"spec": map[string]any{"size": size, "color": color},
	}}
}

func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

// sameObject: two reads of one object agree on identity, metadata, spec and status.
func sameObject(a, b *unstructured.Unstructured) bool {
	return a.GetUID() == b.GetUID() && a.GetResourceVersion() == b.GetResourceVersion() &&
		apiequality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) &&
		apiequality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations()) &&
		apiequality.Semantic.DeepEqual(field(a, "spec"), field(b, "spec")) &&
		apiequality.Semantic.DeepEqual(field(a, "status"), field(b, "status"))
}

// TestDynamic drives custom resources through the dynamic client: create,
// get, list, watch, update, merge and JSON patch, the status subresource,
// delete.
func TestDynamic(t *testing.T) {
	ctx := ctxFor(t)
	cfg := config(t)
	f := newFixture(t)
	install(t, cfg, f)
	dc := dynamic.NewForConfigOrDie(cfg)
	ws := dc.Resource(f.gvr()).Namespace(f.namespace)

	in := widget(f, "w1", 3, "red")
	created, err := ws.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	mustEqual(t, "create: spec", field(created, "spec"), field(in, "spec"), apiequality.Semantic.DeepEqual(field(created, "spec"), field(in, "spec")))
	mustEqual(t, "create: labels", created.GetLabels(), in.GetLabels(), apiequality.Semantic.DeepEqual(created.GetLabels(), in.GetLabels()))
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetNamespace() != f.namespace {
		t.Fatalf("create: metadata %v", created.Object["metadata"])
	}

	got, err := ws.Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	mustEqual(t, "get", got.Object, created.Object, sameObject(got, created))

	if _, err := ws.Create(ctx, widget(f, "w2", 5, "blue"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create w2: %v", err)
	}
	list, err := ws.List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 2 || list.Items[0].GetName() != "w1" || list.Items[1].GetName() != "w2" {
		t.Fatalf("list: %d items, want w1 and w2", len(list.Items))
	}
	mustEqual(t, "list: w1", list.Items[0].Object, created.Object, sameObject(&list.Items[0], created))
	// Paged: limit 1 then continue.
	page, err := ws.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(page.Items) != 1 || page.GetContinue() == "" {
		t.Fatalf("list limit=1: %v, %d items, continue %q", err, len(page.Items), page.GetContinue())
	}
	rest, err := ws.List(ctx, metav1.ListOptions{Limit: 1, Continue: page.GetContinue()})
	if err != nil || len(rest.Items) != 1 || rest.Items[0].GetName() != "w2" {
		t.Fatalf("list continue: %v, %+v", err, rest.Items)
	}

	w, err := ws.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), FieldSelector: "metadata.name=w1"})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	// Update.
	got.Object["spec"].(map[string]any)["size"] = int64(4)
	got.SetLabels(map[string]string{runLabel: f.suffix, "step": "update"})
	updated, err := ws.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	mustEqual(t, "update: spec", field(updated, "spec"), field(got, "spec"), apiequality.Semantic.DeepEqual(field(updated, "spec"), field(got, "spec")))
	ev := waitEvent(t, w, func(ev watch.Event) bool { return ev.Type == watch.Modified }, "MODIFIED (update)")
	mustEqual(t, "watch: update", ev.Object, updated.Object, sameObject(ev.Object.(*unstructured.Unstructured), updated))

	// Merge patch, then JSON patch.
	merged, err := ws.Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"color":"green"},"metadata":{"labels":{"step":"merge"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if field(merged, "spec", "color") != "green" || field(merged, "spec", "size") != int64(4) || merged.GetLabels()["step"] != "merge" {
		t.Fatalf("merge patch: got %v", merged.Object)
	}
	jsonPatched, err := ws.Patch(ctx, "w1", types.JSONPatchType, []byte(`[{"op":"test","path":"/spec/color","value":"green"},{"op":"replace","path":"/spec/size","value":7}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("json patch: %v", err)
	}
	if field(jsonPatched, "spec", "size") != int64(7) || field(jsonPatched, "spec", "color") != "green" {
		t.Fatalf("json patch: got %v", jsonPatched.Object)
	}
	ev = waitEvent(t, w, func(ev watch.Event) bool {
		return ev.Type == watch.Modified && ev.Object.(*unstructured.Unstructured).GetResourceVersion() == jsonPatched.GetResourceVersion()
	}, "MODIFIED (json patch)")
	mustEqual(t, "watch: json patch", ev.Object, jsonPatched.Object, sameObject(ev.Object.(*unstructured.Unstructured), jsonPatched))

	// Status subresource: spec changes through /status are ignored.
	st := jsonPatched.DeepCopy()
	st.Object["status"] = map[string]any{"phase": "Ready", "observed": int64(7)}
	st.Object["spec"].(map[string]any)["size"] = int64(99)
	withStatus, err := ws.UpdateStatus(ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if field(withStatus, "status", "phase") != "Ready" || field(withStatus, "spec", "size") != int64(7) {
		t.Fatalf("update status: got %v", withStatus.Object)
	}
	viaStatus, err := ws.Get(ctx, "w1", metav1.GetOptions{}, "status")
	if err != nil {
		t.Fatalf("get status: %v", err)
	}
	mustEqual(t, "get status", viaStatus.Object, withStatus.Object, sameObject(viaStatus, withStatus))

	// Delete with a UID precondition; the watch reports it.
	uid := created.GetUID()
	if err := ws.Delete(ctx, "w1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	ev = waitEvent(t, w, func(ev watch.Event) bool { return ev.Type == watch.Deleted }, "DELETED")
	if ev.Object.(*unstructured.Unstructured).GetUID() != uid {
		t.Fatalf("DELETED event for uid %s, want %s", ev.Object.(*unstructured.Unstructured).GetUID(), uid)
	}
	if err := waitGone(ctx, func(ctx context.Context) error { _, err := ws.Get(ctx, "w1", metav1.GetOptions{}); return err }); err != nil {
		t.Fatalf("w1: %v", err)
	}
	if err := ws.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix}); err != nil {
		t.Fatalf("delete collection: %v", err)
	}
	left, err := ws.List(ctx, metav1.ListOptions{})
	if err != nil || len(left.Items) != 0 {
		t.Fatalf("after delete collection: %v, %d items", err, len(left.Items))
	}
}
