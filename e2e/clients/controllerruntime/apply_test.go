package controllerruntime

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestServerSideApply applies Gadgets with controller-runtime's client as
// operators do (client.Apply with a field owner): create, change, another
// owner's conflict, ForceOwnership, and a status apply; managedFields
// name each owner. client.Apply is the patch type both generations have
// (v0.22+ adds Client.Apply over ApplyConfigurations, which v0.18 lacks).
func TestServerSideApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	suffix := unique(t)
	group := "a" + suffix + ".cr.clients.crdplane.io"
	c, err := client.New(cfg, client.Options{Scheme: newScheme(t, group)})
	if err != nil {
		t.Fatal(err)
	}
	crd := gadgetCRD(group, suffix)
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("install CRD: %v", err)
	}
	t.Cleanup(func() { deleteCRD(t, c, crd.Name) })
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var got apiextv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD not established: %v", err)
	}

	ns := "clients-" + suffix
	gadget := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": "applied", "namespace": ns, "labels": map[string]any{runLabel: suffix}},
			"spec":     spec,
		}}
	}
	owners := func(u *unstructured.Unstructured) map[string]bool {
		m := map[string]bool{}
		for _, e := range u.GetManagedFields() {
			m[e.Manager+"/"+string(e.Operation)+"/"+e.Subresource] = true
		}
		return m
	}

	//nolint:staticcheck // client.Apply is the patch type v0.18 and v0.25 share
	apply := client.Apply
	u := gadget(map[string]any{"size": int64(2), "color": "red"})
	if err := c.Patch(ctx, u, apply, client.FieldOwner("gadget-operator")); err != nil {
		t.Fatalf("apply create: %v", err)
	}
	if u.GetUID() == "" || u.GetGeneration() != 1 || !owners(u)["gadget-operator/Apply/"] {
		t.Fatalf("created: %v", u.Object["metadata"])
	}
	u = gadget(map[string]any{"size": int64(4)})
	if err := c.Patch(ctx, u, apply, client.FieldOwner("gadget-operator")); err != nil {
		t.Fatalf("apply change: %v", err)
	}
	if spec := u.Object["spec"].(map[string]any); spec["size"] != int64(4) || spec["color"] != nil || u.GetGeneration() != 2 {
		t.Fatalf("changed: %v (generation %d)", spec, u.GetGeneration())
	}
	u = gadget(map[string]any{"size": int64(8)})
	err = c.Patch(ctx, u, apply, client.FieldOwner("other"))
	if err == nil || !strings.Contains(err.Error(), `conflict with "gadget-operator"`) {
		t.Fatalf("conflict: %v", err)
	}
	u = gadget(map[string]any{"size": int64(8)})
	if err := c.Patch(ctx, u, apply, client.FieldOwner("other"), client.ForceOwnership); err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if u.Object["spec"].(map[string]any)["size"] != int64(8) || !owners(u)["other/Apply/"] {
		t.Fatalf("forced: %v %v", u.Object["spec"], owners(u))
	}
	st := gadget(nil)
	delete(st.Object, "spec")
	st.Object["status"] = map[string]any{"phase": "Ready", "observedGeneration": u.GetGeneration()}
	if err := c.Status().Patch(ctx, st, apply, client.FieldOwner("gadget-operator"), client.ForceOwnership); err != nil {
		t.Fatalf("status apply: %v", err)
	}
	if st.Object["status"].(map[string]any)["phase"] != "Ready" || !owners(st)["gadget-operator/Apply/status"] {
		t.Fatalf("status: %v %v", st.Object["status"], owners(st))
	}
	var back unstructured.Unstructured
	back.SetAPIVersion(group + "/v1")
	back.SetKind("Gadget")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "applied"}, &back); err != nil {
		t.Fatal(err)
	}
	if back.Object["spec"].(map[string]any)["size"] != int64(8) || back.GetResourceVersion() != st.GetResourceVersion() {
		t.Fatalf("read back %v at %s, want size 8 at %s", back.Object["spec"], back.GetResourceVersion(), st.GetResourceVersion())
	}
	if err := c.Delete(ctx, &back); err != nil {
		t.Fatalf("delete: %v", err)
	}
}
