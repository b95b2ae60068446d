package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/platform/platformtest"
)

// TestClientGoDynamic drives custom resources with client-go's dynamic
// client: create, get, list with a label selector, update, a stale update,
// watch from a list's resourceVersion, and delete.
func TestClientGoDynamic(t *testing.T) {
	_, cfg := platformtest.Start(t)
	dc := dynamic.NewForConfigOrDie(cfg)
	servable := platformtest.CreateCRD(t, dc, readObject(t, "crontab-crd.yaml"))
	t.Logf("CRD create to servable: %v", servable)
	if servable > time.Second {
		t.Errorf("CRD took %v to become servable, want < 1s", servable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cts := dc.Resource(platformtest.CronTabs).Namespace("default")

	list, err := cts.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cts.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	obj := readObject(t, "crontab-valid.yaml")
	obj.SetLabels(map[string]string{"app": "cron"})
	created, err := cts.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetGeneration() != 1 || created.GetCreationTimestamp().Time.IsZero() {
		t.Fatalf("server metadata missing: %v", created.Object["metadata"])
	}
	if _, err := cts.Create(ctx, obj, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}

	other := readObject(t, "crontab-valid.yaml")
	other.SetName("other")
	if _, err := cts.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel, err := cts.List(ctx, metav1.ListOptions{LabelSelector: "app=cron"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Items) != 1 || sel.Items[0].GetName() != "my-new-cron-object" {
		t.Fatalf("label selector list: %d items", len(sel.Items))
	}

	upd := created.DeepCopy()
	if err := unstructured.SetNestedField(upd.Object, int64(3), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	updated, err := cts.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetGeneration() != 2 {
		t.Fatalf("generation after spec change: %d", updated.GetGeneration())
	}
	if _, err := cts.Update(ctx, upd, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}

	bad := readObject(t, "crontab-invalid.yaml")
	_, err = cts.Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid create: %v", err)
	}
	if causes := err.(apierrors.APIStatus).Status().Details.Causes; len(causes) != 2 {
		t.Fatalf("causes: %+v", causes)
	}

	if err := cts.Delete(ctx, "my-new-cron-object", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cts.Get(ctx, "my-new-cron-object", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}

	var got []watch.EventType
	want := []watch.EventType{watch.Added, watch.Added, watch.Modified, watch.Deleted}
	for len(got) < len(want) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			got = append(got, ev.Type)
		case <-ctx.Done():
			t.Fatalf("watch events %v, want %v", got, want)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("watch events %v, want %v", got, want)
		}
	}
}

// readObject decodes a YAML fixture from testdata/.
func readObject(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(testdata(name))
	if err != nil {
		t.Fatal(err)
	}
	return platformtest.Object(t, b)
}
