package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// putObject stores a custom resource directly (as the gateway would).
func putObject(t *testing.T, group, plural, ns, name string) {
	t.Helper()
	key := fmt.Sprintf("/registry/%s/%s/%s/%s", group, plural, ns, name)
	obj := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Item","metadata":{"name":%q,"namespace":%q,"uid":"u-%s"}}`, group, name, ns, name)
	if _, err := testStorage.Create(testCtx(t), &storagev1.CreateRequest{Key: key, Object: []byte(obj)}); err != nil {
		t.Fatalf("store %s: %v", key, err)
	}
}

func countObjects(t *testing.T, group, plural string) int {
	t.Helper()
	resp, err := testStorage.List(testCtx(t), &storagev1.ListRequest{Prefix: "/registry/" + group + "/" + plural + "/", Options: &commonv1.ListOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.GetObjects())
}

func TestDeleteRemovesObjects(t *testing.T) {
	group := newGroup(t)
	name := "items." + group
	createT(t, crdJSON(group, "items", "Item"))
	waitEstablished(t, name)
	for _, ns := range []string{"a", "b"} {
		for i := range 3 {
			putObject(t, group, "items", ns, fmt.Sprintf("item-%d", i))
		}
	}
	// a CRD of another group with the same plural is left alone
	other := newGroup(t)
	createT(t, crdJSON(other, "items", "Item"))
	waitEstablished(t, "items."+other)
	putObject(t, other, "items", "a", "keep")

	resp, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	marked := decodeT(t, resp.GetObject())
	if marked.DeletionTimestamp == nil || !hasFinalizer(marked, cleanupFinalizer) {
		t.Errorf("delete response: deletionTimestamp %v finalizers %v", marked.DeletionTimestamp, marked.Finalizers)
	}
	term := findCondition(marked, condTerminating)
	if term == nil || term.Status != apiextensionsv1.ConditionTrue || term.Reason != "InstanceDeletionPending" ||
		term.Message != "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon" {
		t.Errorf("Terminating = %+v", term)
	}

	eventually(t, 10*time.Second, "CRD gone", func() bool {
		_, err := testRegistry.Get(testCtx(t), &registryv1.GetRequest{Name: name})
		return status(err).Code == http.StatusNotFound
	})
	if n := countObjects(t, group, "items"); n != 0 {
		t.Errorf("%d objects left", n)
	}
	if n := countObjects(t, other, "items"); n != 1 {
		t.Errorf("other group's objects: %d", n)
	}

	// recreated, it starts empty
	createT(t, crdJSON(group, "items", "Item"))
	waitEstablished(t, name)
	if n := countObjects(t, group, "items"); n != 0 {
		t.Errorf("recreated CRD has %d objects", n)
	}
}

func TestDeleteNeverEstablished(t *testing.T) {
	group := newGroup(t)
	createT(t, crdJSON(group, "ones", "One"))
	waitEstablished(t, "ones."+group)
	// twos cannot get its names, so it is never established
	createT(t, crdJSON(group, "twos", "One", func(o map[string]any) {
		spec(o)["names"].(map[string]any)["singular"] = "two"
	}))
	eventually(t, 5*time.Second, "names conflict", func() bool {
		c := findCondition(getT(t, "twos."+group), condNamesAccepted)
		return c != nil && c.Status == apiextensionsv1.ConditionFalse
	})
	// keep it around with a foreign finalizer to look at the final condition
	if _, err := testRegistry.Patch(testCtx(t), &registryv1.PatchRequest{
		Name: "twos." + group, PatchType: "application/merge-patch+json", Patch: []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: "twos." + group}); err != nil {
		t.Fatal(err)
	}
	var crd *CRD
	eventually(t, 5*time.Second, "cleanup finalizer removed", func() bool {
		crd = getT(t, "twos."+group)
		return !hasFinalizer(crd, cleanupFinalizer)
	})
	term := findCondition(crd, condTerminating)
	if term == nil || term.Status != apiextensionsv1.ConditionFalse || term.Reason != "NeverEstablished" || term.Message != "resource was never established" {
		t.Errorf("Terminating = %+v", term)
	}
	if crd.DeletionGracePeriodSeconds != nil {
		t.Errorf("first delete: deletionGracePeriodSeconds %d", *crd.DeletionGracePeriodSeconds)
	}
	// a second delete leaves it while a finalizer holds it, with
	// deletionGracePeriodSeconds 0 (upstream's generic store)
	resp, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: "twos." + group})
	if err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if again := decodeT(t, resp.GetObject()); again.DeletionTimestamp == nil || !again.DeletionTimestamp.Equal(crd.DeletionTimestamp) ||
		again.DeletionGracePeriodSeconds == nil || *again.DeletionGracePeriodSeconds != 0 || again.Generation != crd.Generation {
		t.Fatalf("second delete: %+v", again.ObjectMeta)
	}
	// dropping the last finalizer deletes it
	if _, err := testRegistry.Patch(testCtx(t), &registryv1.PatchRequest{
		Name: "twos." + group, PatchType: "application/json-patch+json", Patch: []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := testRegistry.Get(testCtx(t), &registryv1.GetRequest{Name: "twos." + group}); status(err).Code != http.StatusNotFound {
		t.Errorf("after removing the finalizer: %v", err)
	}
}

func TestDeletePreconditions(t *testing.T) {
	group := newGroup(t)
	name := "nuts." + group
	crd := createT(t, crdJSON(group, "nuts", "Nut"))
	tests := []struct {
		req  *registryv1.DeleteRequest
		code int32
		msg  string
	}{
		{&registryv1.DeleteRequest{Name: "nope." + group}, 404, fmt.Sprintf(`customresourcedefinitions.apiextensions.k8s.io "nope.%s" not found`, group)},
		{&registryv1.DeleteRequest{Name: name, PreconditionUid: "x"}, 409,
			fmt.Sprintf(`Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io "%s": Precondition failed: UID in precondition: x, UID in object meta: %s`, name, crd.UID)},
		{&registryv1.DeleteRequest{Name: name, PreconditionResourceVersion: "1"}, 409, ""},
	}
	for _, tt := range tests {
		_, err := testRegistry.Delete(testCtx(t), tt.req)
		s := status(err)
		if s.Code != tt.code || (tt.msg != "" && s.Message != tt.msg) {
			t.Errorf("%+v: got %d %q", tt.req, s.Code, s.Message)
		}
	}
	// dry run leaves it untouched
	resp, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: name, DryRun: true})
	if err != nil || decodeT(t, resp.GetObject()).DeletionTimestamp == nil {
		t.Fatalf("dry run: %v", err)
	}
	if getT(t, name).DeletionTimestamp != nil {
		t.Error("dry run marked the CRD")
	}
}

// putObjectWithFinalizer stores a custom resource that has a finalizer
// (generation 1, as the gateway creates them).
func putObjectWithFinalizer(t *testing.T, group, plural, ns, name string) string {
	t.Helper()
	key := fmt.Sprintf("/registry/%s/%s/%s/%s", group, plural, ns, name)
	obj := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Item","metadata":{"finalizers":["example.com/keep"],"generation":1,"name":%q,"namespace":%q,"uid":"u-%s"},"spec":{"size":1}}`, group, name, ns, name)
	if _, err := testStorage.Create(testCtx(t), &storagev1.CreateRequest{Key: key, Object: []byte(obj)}); err != nil {
		t.Fatalf("store %s: %v", key, err)
	}
	return key
}

// TestDeleteWaitsForObjectFinalizers: as upstream's CRD finalizer, the
// objects of a deleted CRD are deleted as a DeleteCollection of custom
// resources does: those with finalizers are only marked (deletionTimestamp,
// deletionGracePeriodSeconds 0, generation+1) and the CRD stays, Terminating
// "InstanceDeletionInProgress" with its cleanup finalizer, until they are
// gone; status is not rewritten meanwhile.
func TestDeleteWaitsForObjectFinalizers(t *testing.T) {
	group := newGroup(t)
	name := "boxes." + group
	createT(t, crdJSON(group, "boxes", "Box"))
	waitEstablished(t, name)
	putObject(t, group, "boxes", "a", "plain")
	kept := putObjectWithFinalizer(t, group, "boxes", "b", "kept")

	if _, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: name}); err != nil {
		t.Fatal(err)
	}
	var marked map[string]any
	eventually(t, 5*time.Second, "the plain object gone, the kept one marked", func() bool {
		resp, err := testStorage.Get(testCtx(t), &storagev1.GetRequest{Key: kept})
		if err != nil {
			t.Fatal(err)
		}
		marked = map[string]any{}
		if err := json.Unmarshal(resp.GetObject(), &marked); err != nil {
			t.Fatal(err)
		}
		return countObjects(t, group, "boxes") == 1 && marked["metadata"].(map[string]any)["deletionTimestamp"] != nil
	})
	m := marked["metadata"].(map[string]any)
	if m["deletionGracePeriodSeconds"] != float64(0) || m["generation"] != float64(2) || fmt.Sprint(m["finalizers"]) != "[example.com/keep]" ||
		fmt.Sprint(marked["spec"]) != "map[size:1]" {
		t.Errorf("marked object: %v", marked)
	}
	time.Sleep(500 * time.Millisecond)
	crd := getT(t, name)
	term := findCondition(crd, condTerminating)
	if !hasFinalizer(crd, cleanupFinalizer) || term == nil || term.Status != apiextensionsv1.ConditionTrue || term.Reason != "InstanceDeletionInProgress" ||
		term.Message != "CustomResource deletion is in progress" {
		t.Fatalf("terminating CRD: finalizers %v, Terminating %+v", crd.Finalizers, term)
	}
	// waiting writes nothing
	time.Sleep(500 * time.Millisecond)
	if again := getT(t, name); again.ResourceVersion != crd.ResourceVersion {
		t.Errorf("the CRD was rewritten while waiting: resourceVersion %s, then %s", crd.ResourceVersion, again.ResourceVersion)
	}

	// the object's finalizer is done: it goes, and so does the CRD
	if _, err := testStorage.Delete(testCtx(t), &storagev1.DeleteRequest{Key: kept}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "CRD gone", func() bool {
		_, err := testRegistry.Get(testCtx(t), &registryv1.GetRequest{Name: name})
		return status(err).Code == http.StatusNotFound
	})
}

// TestCleanupWaits: the finalizer looks again after growing intervals
// (at most maxCleanupPoll, five checks within the timeout at least) and
// reports a timeout once the wait lasted the timeout.
func TestCleanupWaits(t *testing.T) {
	var w cleanupWaits
	cfg := cleanupConfig{timeout: time.Hour, poll: 100 * time.Millisecond}
	var got []time.Duration
	for range 8 {
		d, timedOut := w.next("a", cfg)
		if timedOut {
			t.Fatal("timed out early")
		}
		got = append(got, d)
	}
	if fmt.Sprint(got) != "[100ms 200ms 400ms 800ms 1.6s 3.2s 5s 5s]" {
		t.Errorf("intervals %v", got)
	}
	if d, _ := w.next("b", cleanupConfig{timeout: time.Second, poll: 100 * time.Millisecond}); d != 100*time.Millisecond {
		t.Errorf("first interval of b: %v", d)
	}
	for range 3 {
		w.next("b", cleanupConfig{timeout: time.Second, poll: 100 * time.Millisecond})
	}
	if d, _ := w.next("b", cleanupConfig{timeout: time.Second, poll: 100 * time.Millisecond}); d != 200*time.Millisecond {
		t.Errorf("interval capped at a fifth of the timeout: %v", d)
	}
	if _, timedOut := w.next("c", cleanupConfig{timeout: 0, poll: time.Millisecond}); !timedOut {
		t.Error("no timeout")
	}
	w.forget("a")
	if d, _ := w.next("a", cfg); d != 100*time.Millisecond {
		t.Errorf("after forget: %v", d)
	}
}
