package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// TestNamespaceCreateValidation: the name is a DNS-1123 label, worded as
// kube-apiserver's ValidateNamespaceName; finalizer names as core
// validation checks them.
func TestNamespaceCreateValidation(t *testing.T) {
	cases := []struct {
		name string
		body string
		want string // "" valid
	}{
		{"valid", `{"metadata":{"name":"team-a"}}`, ""},
		{"uppercase", `{"metadata":{"name":"Team"}}`, `Namespace "Team" is invalid: metadata.name: Invalid value: "Team": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"dot", `{"metadata":{"name":"a.b"}}`, `Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": must not contain dots`},
		{"too long", fmt.Sprintf(`{"metadata":{"name":%q}}`, strings.Repeat("a", 64)), `must be no more than 63 characters`},
		{"no name", `{"metadata":{}}`, `Namespace "" is invalid: metadata.name: Required value: name or generateName is required`},
		{"bad spec finalizer", `{"metadata":{"name":"f"},"spec":{"finalizers":["foo"]}}`, `spec.finalizers: Invalid value: "foo": name is neither a standard finalizer name nor is it fully qualified`},
		{"qualified spec finalizer", `{"metadata":{"name":"f"},"spec":{"finalizers":["example.com/x"]}}`, ""},
		{"bad metadata finalizer", `{"metadata":{"name":"f","finalizers":["bar"]}}`, `metadata.finalizers[0]: Invalid value: "bar": name is neither a standard finalizer name nor is it fully qualified`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, _, err := decodeNamespace([]byte(`{"apiVersion":"v1","kind":"Namespace",`+tc.body[1:]), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := prepareNamespaceCreate(ns); err != nil {
				t.Fatal(err)
			}
			err = invalidNamespace(ns.Name, validateNamespaceCreate(ns))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want 422 containing %q", err, tc.want)
			}
		})
	}
}

// TestNamespaceStrategy: create defaults (phase Active, the kubernetes
// finalizer, the metadata.name label, no generation); updates keep what
// each subresource does not own.
func TestNamespaceStrategy(t *testing.T) {
	ns := &Namespace{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{corev1.LabelMetadataName: "other"}}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"example.com/x"}}}
	ns.Status.Phase = corev1.NamespaceTerminating
	if err := prepareNamespaceCreate(ns); err != nil {
		t.Fatal(err)
	}
	if ns.Status.Phase != corev1.NamespaceActive || ns.Generation != 0 || ns.UID == "" || ns.CreationTimestamp.IsZero() {
		t.Fatalf("prepared %+v", ns)
	}
	if want := []corev1.FinalizerName{"example.com/x", corev1.FinalizerKubernetes}; !slices.Equal(ns.Spec.Finalizers, want) {
		t.Fatalf("spec.finalizers %v, want %v", ns.Spec.Finalizers, want)
	}
	if got := ns.Labels[corev1.LabelMetadataName]; got != "s" {
		t.Fatalf("label %q, want the name", got)
	}

	cases := []struct {
		sub        string
		keepSpec   bool // spec.finalizers stay the old ones
		keepStatus bool
	}{
		{"", true, true},
		{"status", true, false},
		{"finalize", false, true},
	}
	for _, tc := range cases {
		t.Run("update "+tc.sub, func(t *testing.T) {
			upd := ns.DeepCopy()
			upd.Spec.Finalizers = nil
			upd.Status.Phase = corev1.NamespaceTerminating
			upd.Labels = map[string]string{"a": "b"}
			prepareNamespaceUpdate(upd, ns, tc.sub)
			if got := len(upd.Spec.Finalizers) == 2; got != tc.keepSpec {
				t.Errorf("spec kept %v, want %v", got, tc.keepSpec)
			}
			if got := upd.Status.Phase == corev1.NamespaceActive; got != tc.keepStatus {
				t.Errorf("status kept %v, want %v", got, tc.keepStatus)
			}
			if upd.Labels[corev1.LabelMetadataName] != "s" || upd.Labels["a"] != "b" {
				t.Errorf("labels %v", upd.Labels)
			}
		})
	}
}

// TestNamespaceStatusValidation: the phase must agree with the deletion
// timestamp (ValidateNamespaceStatusUpdate).
func TestNamespaceStatusValidation(t *testing.T) {
	old := &Namespace{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "1"}}
	upd := old.DeepCopy()
	upd.Status.Phase = corev1.NamespaceTerminating
	err := invalidNamespace("p", validateNamespaceUpdate(upd, old, "status"))
	if err == nil || !strings.Contains(err.Error(), "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty") {
		t.Fatalf("got %v", err)
	}
}

// TestNamespaceFieldSelector: core/v1's field labels of namespaces.
func TestNamespaceFieldSelector(t *testing.T) {
	for in, want := range map[string]string{
		"metadata.name=a":     "metadata.name=a",
		"name=a":              "metadata.name=a",
		"status.phase=Active": "status.phase=Active",
		"":                    "",
	} {
		got, err := namespaceFieldSelector(in)
		if err != nil || got != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := namespaceFieldSelector("spec.x=1"); err == nil || err.Error() != "field label not supported: spec.x" {
		t.Errorf("spec.x: %v", err)
	}
}

// TestNamespaceConditions: the namespace deleter's condition wording.
func TestNamespaceConditions(t *testing.T) {
	conds := namespaceConditions(map[string]int{"widgets.example.com": 2, "a.example.com": 1}, map[string]int{"example.com/f": 1}, nil)
	byType := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	for _, c := range conds {
		byType[c.Type] = c
	}
	if c := byType[corev1.NamespaceContentRemaining]; c.Message != "Some resources are remaining: a.example.com has 1 resource instances, widgets.example.com has 2 resource instances" || c.Reason != "SomeResourcesRemain" {
		t.Errorf("content remaining: %+v", c)
	}
	if c := byType[corev1.NamespaceFinalizersRemaining]; c.Message != "Some content in the namespace has finalizers remaining: example.com/f in 1 resource instances" {
		t.Errorf("finalizers remaining: %+v", c)
	}
	if c := byType[corev1.NamespaceDeletionDiscoveryFailure]; c.Status != corev1.ConditionFalse || c.Reason != "ResourcesDiscovered" {
		t.Errorf("discovery: %+v", c)
	}
}

// TestNamespaceLifecycle: system namespaces exist; a namespace's delete
// marks it Terminating, the controller removes the custom resources in it,
// finalizes and removes it.
func TestNamespaceLifecycle(t *testing.T) {
	ctx := testCtx(t)
	nsc := registryv1.NewNamespaceServiceClient(testConn(t))
	for _, name := range systemNamespaces {
		waitFor(t, func() bool {
			_, err := nsc.Get(ctx, &registryv1.GetRequest{Name: name})
			return err == nil
		})
	}
	group := newGroup(t)
	if _, err := testRegistry.Create(ctx, &registryv1.CreateRequest{Object: crdJSON(group, "things", "Thing")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := testService.inf.get("things." + group); return ok })

	resp, err := nsc.Create(ctx, &registryv1.CreateRequest{Object: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"life"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var created Namespace
	if err := json.Unmarshal(resp.GetObject(), &created); err != nil {
		t.Fatal(err)
	}
	if len(created.ManagedFields) != 1 || created.ManagedFields[0].Operation != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("managedFields %+v", created.ManagedFields)
	}
	key := "/registry/" + group + "/things/life/t1"
	obj := fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Thing","metadata":{"name":"t1","namespace":"life","uid":"u1","creationTimestamp":"2024-01-01T00:00:00Z"}}`, group)
	if _, err := testStorage.Create(ctx, &storagev1.CreateRequest{Key: key, Object: []byte(obj)}); err != nil {
		t.Fatal(err)
	}
	del, err := nsc.Delete(ctx, &registryv1.DeleteRequest{Name: "life"})
	if err != nil {
		t.Fatal(err)
	}
	var marked Namespace
	if err := json.Unmarshal(del.GetObject(), &marked); err != nil {
		t.Fatal(err)
	}
	if marked.DeletionTimestamp == nil || marked.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("after delete: %+v", marked)
	}
	waitFor(t, func() bool {
		_, err := nsc.Get(ctx, &registryv1.GetRequest{Name: "life"})
		return apierrors.IsNotFound(kstatusErr(err))
	})
	if _, err := testStorage.Get(ctx, &storagev1.GetRequest{Key: key}); kstatus.FromError(err).Code != 404 {
		t.Fatalf("the custom resource is still there: %v", err)
	}
}

// testConn dials the test registry.
func testConn(t *testing.T) grpc.ClientConnInterface {
	t.Helper()
	c, err := grpcx.Dial("inproc://registry-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func kstatusErr(err error) error {
	if err == nil {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: *kstatus.FromError(err)}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkNamespaceCreatePath is a create's work in the registry before
// storage: decode, managedFields, strategy, validation.
func BenchmarkNamespaceCreatePath(b *testing.B) {
	body := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench","labels":{"team":"a"}}}`)
	for b.Loop() {
		ns, _, err := decodeNamespace(body, "")
		if err != nil {
			b.Fatal(err)
		}
		if ns, err = trackNamespaceUpdate(nil, ns, "", "kubectl"); err != nil {
			b.Fatal(err)
		}
		if err := prepareNamespaceCreate(ns); err != nil {
			b.Fatal(err)
		}
		if errs := validateNamespaceCreate(ns); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
