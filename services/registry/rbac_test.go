package registry

import (
	"encoding/json"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// TestRBACValidation: v1.33's pkg/apis/rbac/validation wording.
func TestRBACValidation(t *testing.T) {
	cases := []struct {
		resource, body, want string
	}{
		{"roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"a"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`, ""},
		{"roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"a"},"rules":[{"apiGroups":[""],"resources":["pods"]}]}`,
			`Role.rbac.authorization.k8s.io "r" is invalid: rules[0].verbs: Required value: verbs must contain at least one value`},
		{"roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r","namespace":"a"},"rules":[{"nonResourceURLs":["/x"],"verbs":["get"]}]}`,
			`rules[0].nonResourceURLs: Invalid value: []string{"/x"}: namespaced rules cannot apply to non-resource URLs`},
		{"clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"c"},"rules":[{"verbs":["get"],"resources":["a","b"],"resourceNames":["x"]}]}`,
			`[rules[0].apiGroups: Required value: resource rules must supply at least one api group, rules[0].resourceNames: Required value: resource names cannot apply to multiple resources]`},
		{"clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"a/b"}}`,
			`metadata.name: Invalid value: "a/b": may not contain '/'`},
		{"rolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b","namespace":"a"},"roleRef":{"kind":"Foo","name":"r"},"subjects":[{"kind":"User","name":"alice"}]}`,
			`roleRef.kind: Unsupported value: "Foo": supported values: "Role", "ClusterRole"`},
		{"clusterrolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"b"},"roleRef":{"kind":"ClusterRole","name":"r"},"subjects":[{"kind":"ServiceAccount","name":"sa"}]}`,
			`subjects[0].namespace: Required value`},
	}
	for _, tc := range cases {
		k := rbacKinds[tc.resource]
		obj, _, err := k.decode([]byte(tc.body), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := prepareRBACCreate(k, obj); err != nil {
			t.Fatal(err)
		}
		err = k.validateCreate(obj)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: unexpected %v", tc.body, err)
			}
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want 422 containing %q", tc.body, err, tc.want)
		}
	}
}

// TestRBACServiceCRUD: create, get, list, patch (strategic merge),
// update's immutable roleRef and delete of the RBAC kinds through the
// storage service.
func TestRBACServiceCRUD(t *testing.T) {
	ctx := testCtx(t)
	c := registryv1.NewRBACServiceClient(testConn(t))
	roles := &registryv1.RBACTarget{Resource: "roles", Namespace: "crud"}
	_, err := c.Create(ctx, &registryv1.RBACServiceCreateRequest{Target: roles, Request: &registryv1.CreateRequest{
		Object: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"reader"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, &registryv1.RBACServiceGetRequest{Target: roles, Request: &registryv1.GetRequest{Name: "reader"}})
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := json.Unmarshal(got.GetObject(), &role); err != nil {
		t.Fatal(err)
	}
	if role.Namespace != "crud" || role.UID == "" || len(role.ManagedFields) != 1 || role.Kind != "Role" {
		t.Errorf("stored role %+v", role)
	}
	p, err := c.Patch(ctx, &registryv1.RBACServicePatchRequest{Target: roles, Request: &registryv1.PatchRequest{Name: "reader",
		PatchType: "application/strategic-merge-patch+json", Patch: []byte(`{"rules":[{"apiGroups":["x"],"resources":["y"],"verbs":["list"]}]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(p.GetObject(), &role); err != nil || len(role.Rules) != 1 || role.Rules[0].Verbs[0] != "list" {
		t.Errorf("patched %+v (%v)", role, err)
	}
	list, err := c.List(ctx, &registryv1.RBACServiceListRequest{Target: &registryv1.RBACTarget{Resource: "roles"}, Request: &registryv1.ListRequest{}})
	if err != nil || len(list.GetObjects()) == 0 {
		t.Fatalf("list %v %v", list, err)
	}

	crb := &registryv1.RBACTarget{Resource: "clusterrolebindings"}
	if _, err := c.Create(ctx, &registryv1.RBACServiceCreateRequest{Target: crb, Request: &registryv1.CreateRequest{
		Object: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"crud"},"roleRef":{"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"alice"}]}`)}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: crb, Request: &registryv1.UpdateRequest{Name: "crud",
		Object: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"crud"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"}}`)}})
	if st := kstatus.FromError(err); st.Code != 422 || !strings.Contains(st.Message, "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef") {
		t.Errorf("roleRef change: %v", st)
	}
	if _, err := c.Delete(ctx, &registryv1.RBACServiceDeleteRequest{Target: crb, Request: &registryv1.DeleteRequest{Name: "crud"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, &registryv1.RBACServiceGetRequest{Target: crb, Request: &registryv1.GetRequest{Name: "crud"}})
	if st := kstatus.FromError(err); st.Code != 404 || st.Message != `clusterrolebindings.rbac.authorization.k8s.io "crud" not found` {
		t.Errorf("after delete: %v", st)
	}
}

// TestRBACBootstrapAndAggregation: the leader creates the bootstrap
// policy, and fills an aggregating ClusterRole with the rules of the
// ClusterRoles its selector matches (following their changes).
func TestRBACBootstrapAndAggregation(t *testing.T) {
	ctx := testCtx(t)
	c := registryv1.NewRBACServiceClient(testConn(t))
	crs := &registryv1.RBACTarget{Resource: "clusterroles"}
	get := func(name string) *rbacv1.ClusterRole {
		resp, err := c.Get(ctx, &registryv1.RBACServiceGetRequest{Target: crs, Request: &registryv1.GetRequest{Name: name}})
		if err != nil {
			return nil
		}
		var cr rbacv1.ClusterRole
		if err := json.Unmarshal(resp.GetObject(), &cr); err != nil {
			t.Fatal(err)
		}
		return &cr
	}
	for _, name := range []string{"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"} {
		waitFor(t, func() bool { return get(name) != nil })
	}
	waitFor(t, func() bool { cr := get("view"); return cr != nil && len(cr.Rules) > 0 })

	for _, body := range []string{
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"agg-test"},"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"agg-test":"true"}}]}}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"agg-test-b","labels":{"agg-test":"true"}},"rules":[{"apiGroups":["b"],"resources":["bs"],"verbs":["get"]}]}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"agg-test-a","labels":{"agg-test":"true"}},"rules":[{"apiGroups":["a"],"resources":["as"],"verbs":["get"]},{"apiGroups":["b"],"resources":["bs"],"verbs":["get"]}]}`,
	} {
		if _, err := c.Create(ctx, &registryv1.RBACServiceCreateRequest{Target: crs, Request: &registryv1.CreateRequest{Object: []byte(body)}}); err != nil {
			t.Fatal(err)
		}
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"a"}, Resources: []string{"as"}, Verbs: []string{"get"}}, {APIGroups: []string{"b"}, Resources: []string{"bs"}, Verbs: []string{"get"}}}
	waitFor(t, func() bool { cr := get("agg-test"); return cr != nil && apiequality.Semantic.DeepEqual(cr.Rules, want) })
	if _, err := c.Delete(ctx, &registryv1.RBACServiceDeleteRequest{Target: crs, Request: &registryv1.DeleteRequest{Name: "agg-test-a"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		cr := get("agg-test")
		return cr != nil && len(cr.Rules) == 1 && cr.Rules[0].APIGroups[0] == "b"
	})
}
