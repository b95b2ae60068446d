package registry

import (
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
	// a second delete leaves it while a finalizer holds it
	resp, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: "twos." + group})
	if err != nil || decodeT(t, resp.GetObject()).DeletionTimestamp == nil {
		t.Fatalf("second delete: %v", err)
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
