package clientgo

import (
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// TestTyped drives CRDs through the generated apiextensions clientset with
// its default content type.
func TestTyped(t *testing.T) { typedCRUD(t, config(t)) }

// TestTypedProtobuf is the same with the protobuf content type, as Kubernetes'
// own components and many operators configure their clientsets.
func TestTypedProtobuf(t *testing.T) {
	cfg := config(t)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	typedCRUD(t, cfg)
}

func typedCRUD(t *testing.T, cfg *rest.Config) {
	ctx := ctxFor(t)
	f := newFixture(t)
	cs := apiextclient.NewForConfigOrDie(cfg)
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()

	created, err := crds.Create(ctx, f.crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { deleteCRD(t, cs, f.crd.Name) })
	mustEqual(t, "create: spec", created.Spec, f.crd.Spec, apiequality.Semantic.DeepEqual(created.Spec, f.crd.Spec))
	mustEqual(t, "create: labels", created.Labels, f.crd.Labels, apiequality.Semantic.DeepEqual(created.Labels, f.crd.Labels))
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("create: metadata not filled in: %+v", created.ObjectMeta)
	}

	got := waitEstablished(t, cs, f.crd.Name)
	mustEqual(t, "get: spec", got.Spec, created.Spec, apiequality.Semantic.DeepEqual(got.Spec, created.Spec))
	if got.UID != created.UID || !got.CreationTimestamp.Equal(&created.CreationTimestamp) {
		t.Fatalf("get: uid/creationTimestamp %s/%s, created %s/%s", got.UID, got.CreationTimestamp, created.UID, created.CreationTimestamp)
	}
	if got.Status.AcceptedNames.Kind != "Widget" || got.Status.AcceptedNames.Plural != "widgets" {
		t.Fatalf("get: acceptedNames %+v", got.Status.AcceptedNames)
	}

	list, err := crds.List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != f.crd.Name || list.ResourceVersion == "" {
		t.Fatalf("list by label: %d items (rv %q), want only %s", len(list.Items), list.ResourceVersion, f.crd.Name)
	}
	mustEqual(t, "list: spec", list.Items[0].Spec, created.Spec, apiequality.Semantic.DeepEqual(list.Items[0].Spec, created.Spec))

	w, err := crds.Watch(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + f.suffix, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	var updated *apiextv1.CustomResourceDefinition
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := crds.Get(ctx, f.crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Labels["clients.crdplane.io/step"] = "updated"
		cur.Spec.Versions[0].AdditionalPrinterColumns = append(cur.Spec.Versions[0].AdditionalPrinterColumns,
			apiextv1.CustomResourceColumnDefinition{Name: "Phase", Type: "string", JSONPath: ".status.phase"})
		updated, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if len(updated.Spec.Versions[0].AdditionalPrinterColumns) != 3 || updated.Labels["clients.crdplane.io/step"] != "updated" {
		t.Fatalf("update: answer lacks the change: %+v %v", updated.Spec.Versions[0].AdditionalPrinterColumns, updated.Labels)
	}
	again, err := crds.Get(ctx, f.crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get after update: %v", err)
	}
	mustEqual(t, "get after update: spec", again.Spec, updated.Spec, apiequality.Semantic.DeepEqual(again.Spec, updated.Spec))
	mustEqual(t, "get after update: labels", again.Labels, updated.Labels, apiequality.Semantic.DeepEqual(again.Labels, updated.Labels))

	// The watch shows the update (status changes may come between).
	waitEvent(t, w, func(ev watch.Event) bool {
		c, ok := ev.Object.(*apiextv1.CustomResourceDefinition)
		return ok && ev.Type == watch.Modified && c.Labels["clients.crdplane.io/step"] == "updated" &&
			apiequality.Semantic.DeepEqual(c.Spec, updated.Spec)
	}, "MODIFIED with the update")

	if err := crds.Delete(ctx, f.crd.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitEvent(t, w, func(ev watch.Event) bool {
		c, ok := ev.Object.(*apiextv1.CustomResourceDefinition)
		return ok && ev.Type == watch.Deleted && c.UID == created.UID
	}, "DELETED")
	if _, err := crds.Get(ctx, f.crd.Name, metav1.GetOptions{}); err == nil {
		t.Fatalf("get after DELETED event: still there")
	}
}

// waitEvent reads w until match accepts an event.
func waitEvent(t *testing.T, w watch.Interface, match func(watch.Event) bool, what string) watch.Event {
	t.Helper()
	timeout := time.After(time.Minute)
	var seen []string
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s; saw %v", what, seen)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error event before %s: %#v", what, ev.Object)
			}
			if match(ev) {
				return ev
			}
			seen = append(seen, string(ev.Type))
		case <-timeout:
			t.Fatalf("no %s event in 1m; saw %v", what, seen)
		}
	}
}
