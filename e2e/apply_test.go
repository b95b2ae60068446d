package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/platform/platformtest"
)

const dialYAML = `apiVersion: ssa.example.com/v1
kind: Dial
metadata:
  name: d
  namespace: default
spec:
  color: %s
  size: 1
  replicas: 1
`

func dial(color string) string { return strings.Replace(dialYAML, "%s", color, 1) }

// managersOf lists an object's managedFields as manager/operation[/subresource].
func managersOf(obj map[string]any) []string {
	md, _ := obj["metadata"].(map[string]any)
	mf, _ := md["managedFields"].([]any)
	var out []string
	for _, e := range mf {
		m := e.(map[string]any)
		s := m["manager"].(string) + "/" + m["operation"].(string)
		if sub, _ := m["subresource"].(string); sub != "" {
			s += "/" + sub
		}
		out = append(out, s)
	}
	return out
}

func hasManager(obj map[string]any, want string) bool {
	for _, m := range managersOf(obj) {
		if m == want {
			return true
		}
	}
	return false
}

// TestKubectlServerSideApply drives server-side apply with kubectl 1.33:
// create, change, a second manager's conflict and --force-conflicts,
// --subresource=status, --show-managed-fields, and kubectl's client-side →
// server-side apply migration.
func TestKubectlServerSideApply(t *testing.T) {
	s := startServer(t, "")
	s.must(t, "apply", "--server-side", "-f", testdata("ssa-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/dials.ssa.example.com")

	t.Run("create and change", func(t *testing.T) {
		out, errOut, err := s.kubectl(t, dial("red"), "apply", "--server-side", "-f", "-")
		if err != nil || !strings.Contains(out, "dial.ssa.example.com/d serverside-applied") {
			t.Fatalf("apply: %v %s %s", err, out, errOut)
		}
		if _, errOut, err := s.kubectl(t, dial("blue"), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatalf("change: %v %s", err, errOut)
		}
		obj := getJSON(t, s, "dials", "d", "--show-managed-fields")
		if obj["spec"].(map[string]any)["color"] != "blue" || obj["metadata"].(map[string]any)["generation"] != float64(2) {
			t.Fatalf("after change: %v", obj)
		}
		if got := managersOf(obj); len(got) != 1 || got[0] != "kubectl/Apply" {
			t.Fatalf("managedFields: %v", got)
		}
	})

	t.Run("conflict and force", func(t *testing.T) {
		_, errOut, err := s.kubectl(t, dial("green"), "apply", "--server-side", "--field-manager=other", "-f", "-")
		if err == nil || !strings.Contains(errOut, `Apply failed with 1 conflict: conflict with "kubectl": .spec.color`) {
			t.Fatalf("conflict: %v %s", err, errOut)
		}
		if _, errOut, err := s.kubectl(t, dial("green"), "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"); err != nil {
			t.Fatalf("force: %v %s", err, errOut)
		}
		obj := getJSON(t, s, "dials", "d", "--show-managed-fields")
		if obj["spec"].(map[string]any)["color"] != "green" || !hasManager(obj, "other/Apply") {
			t.Fatalf("after force: %v", obj)
		}
	})

	t.Run("status", func(t *testing.T) {
		st := "apiVersion: ssa.example.com/v1\nkind: Dial\nmetadata:\n  name: d\n  namespace: default\nstatus:\n  phase: Running\n"
		if _, errOut, err := s.kubectl(t, st, "apply", "--server-side", "--subresource=status", "--field-manager=ctrl", "-f", "-"); err != nil {
			t.Fatalf("status apply: %v %s", err, errOut)
		}
		obj := getJSON(t, s, "dials", "d", "--show-managed-fields")
		if obj["status"].(map[string]any)["phase"] != "Running" || !hasManager(obj, "ctrl/Apply/status") {
			t.Fatalf("after status apply: %v", obj)
		}
	})

	t.Run("show-managed-fields", func(t *testing.T) {
		with := s.must(t, "get", "dials", "d", "-o", "yaml", "--show-managed-fields")
		for _, want := range []string{"managedFields:", "manager: kubectl", "operation: Apply", "f:color: {}", "subresource: status"} {
			if !strings.Contains(with, want) {
				t.Fatalf("--show-managed-fields lacks %q:\n%s", want, with)
			}
		}
		if without := s.must(t, "get", "dials", "d", "-o", "yaml"); strings.Contains(without, "managedFields") {
			t.Fatalf("managedFields shown without the flag:\n%s", without)
		}
	})

	t.Run("scale", func(t *testing.T) {
		// kubectl scale takes spec.replicas over from the apply's manager
		// (an Update entry on scale; an object without replicas gets none,
		// as upstream: its Scale field manager fails and drops the entry).
		s.must(t, "scale", "dials/d", "--replicas=3")
		obj := getJSON(t, s, "dials", "d", "--show-managed-fields")
		// kubectl scale sends no fieldManager: the manager is the
		// User-Agent's program name (kubectl.1.33 for the pinned binary).
		if obj["spec"].(map[string]any)["replicas"] != float64(3) || !hasManager(obj, strings.TrimSuffix(filepath.Base(kubectlBinary()), ".exe")+"/Update/scale") {
			t.Fatalf("after scale: %v %v", obj["spec"], managersOf(obj))
		}
	})

	t.Run("client-side then server-side", func(t *testing.T) {
		csa := strings.Replace(dial("red"), "name: d", "name: csa", 1)
		if _, errOut, err := s.kubectl(t, csa, "apply", "-f", "-"); err != nil {
			t.Fatalf("client-side apply: %v %s", err, errOut)
		}
		obj := getJSON(t, s, "dials", "csa", "--show-managed-fields")
		if !hasManager(obj, "kubectl-client-side-apply/Update") {
			t.Fatalf("after client-side apply: %v", managersOf(obj))
		}
		// The migration: kubectl's first server-side apply takes over what
		// the client-side apply owned (no conflict), and later client-side
		// applies keep working from the rewritten last-applied annotation.
		if _, errOut, err := s.kubectl(t, strings.Replace(csa, "color: red", "color: blue", 1), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatalf("server-side apply after client-side: %v %s", err, errOut)
		}
		obj = getJSON(t, s, "dials", "csa", "--show-managed-fields")
		if obj["spec"].(map[string]any)["color"] != "blue" || !hasManager(obj, "kubectl/Apply") {
			t.Fatalf("after server-side apply: %v %v", obj["spec"], managersOf(obj))
		}
		ann, _ := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
		if la, _ := ann["kubectl.kubernetes.io/last-applied-configuration"].(string); !strings.Contains(la, `"color":"blue"`) {
			t.Fatalf("last-applied not rewritten: %q", la)
		}
		// Removing a field in a later server-side apply removes it from the
		// object (the client-side manager's ownership was migrated).
		noSize := strings.Replace(strings.Replace(csa, "color: red", "color: blue", 1), "  size: 1\n", "", 1)
		if _, errOut, err := s.kubectl(t, noSize, "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatalf("server-side apply without size: %v %s", err, errOut)
		}
		obj = getJSON(t, s, "dials", "csa")
		if _, ok := obj["spec"].(map[string]any)["size"]; ok {
			t.Fatalf("size kept after the migration: %v", obj["spec"])
		}
	})
}

// TestClientGoApply applies custom resources with client-go's dynamic
// client (an ApplyConfiguration as unstructured): create, change, a
// conflict, force, and ApplyStatus.
func TestClientGoApply(t *testing.T) {
	_, cfg := platformtest.Start(t)
	dc := dynamic.NewForConfigOrDie(cfg)
	platformtest.CreateCRD(t, dc, readObject(t, "ssa-crd.yaml"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dials := dc.Resource(schema.GroupVersionResource{Group: "ssa.example.com", Version: "v1", Resource: "dials"}).Namespace("default")
	cfgOf := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ssa.example.com/v1", "kind": "Dial",
			"metadata": map[string]any{"name": "g", "namespace": "default"},
			"spec":     spec,
		}}
	}
	created, err := dials.Apply(ctx, "g", cfgOf(map[string]any{"color": "red", "size": int64(1)}), metav1.ApplyOptions{FieldManager: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetGeneration() != 1 || len(created.GetManagedFields()) != 1 || created.GetManagedFields()[0].Manager != "app" ||
		created.GetManagedFields()[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("created: %v", created.Object["metadata"])
	}
	changed, err := dials.Apply(ctx, "g", cfgOf(map[string]any{"color": "blue"}), metav1.ApplyOptions{FieldManager: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := changed.Object["spec"].(map[string]any)["size"]; ok || changed.GetGeneration() != 2 {
		t.Fatalf("changed: %v", changed.Object)
	}
	_, err = dials.Apply(ctx, "g", cfgOf(map[string]any{"color": "green"}), metav1.ApplyOptions{FieldManager: "other"})
	if err == nil || !strings.Contains(err.Error(), `conflict with "app"`) {
		t.Fatalf("conflict: %v", err)
	}
	forced, err := dials.Apply(ctx, "g", cfgOf(map[string]any{"color": "green"}), metav1.ApplyOptions{FieldManager: "other", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if forced.Object["spec"].(map[string]any)["color"] != "green" {
		t.Fatalf("forced: %v", forced.Object["spec"])
	}
	st := cfgOf(nil)
	delete(st.Object, "spec")
	st.Object["status"] = map[string]any{"phase": "Ready"}
	withStatus, err := dials.ApplyStatus(ctx, "g", st, metav1.ApplyOptions{FieldManager: "ctrl"})
	if err != nil {
		t.Fatal(err)
	}
	if withStatus.Object["status"].(map[string]any)["phase"] != "Ready" {
		t.Fatalf("status: %v", withStatus.Object)
	}
	// A merge patch through the same client records an Update entry
	// named after client-go's User-Agent (the test binary's name).
	patched, err := dials.Patch(ctx, "g", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var updaters int
	for _, e := range patched.GetManagedFields() {
		if e.Operation == metav1.ManagedFieldsOperationUpdate && e.Manager != "" {
			updaters++
		}
	}
	if updaters != 1 {
		t.Fatalf("merge patch entries: %v", patched.GetManagedFields())
	}
}
