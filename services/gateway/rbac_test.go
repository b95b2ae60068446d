package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/metrics"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// newRBACGateway is a gateway with --authorization-mode RBAC and a token
// file of alice and bob (the test token is admin, in system:masters).
func newRBACGateway(t *testing.T) *testGateway {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("alice-token,alice,1\nbob-token,bob,2,\"devs\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newTestGatewayWith(t, func(c *Config) {
		c.Auth.TokenFile = tokenFile
		c.Auth.AuthorizationModes = []string{httpx.ModeRBAC}
	})
	deadline := time.Now().Add(5 * time.Second)
	for g.svc.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %v", g.svc.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g
}

func as(user string) []string { return []string{"Authorization", "Bearer " + user + "-token"} }

// eventually retries a request until it answers code (the RBAC cache
// follows writes by watch).
func (g *testGateway) eventually(code int, method, path string, body any, header ...string) (*http.Response, []byte) {
	g.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, data := g.do(method, path, body, header...)
		if resp.StatusCode == code {
			return resp, data
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s %s: got %d, want %d: %s", method, path, resp.StatusCode, code, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const rbacV1 = "/apis/rbac.authorization.k8s.io/v1"

// TestRBACAllowDeny: a Role and RoleBinding let alice list the custom
// resources of her namespace; she is denied in another and bob
// everywhere, with kube-apiserver's 403; SelfSubjectAccessReview and
// SelfSubjectRulesReview answer from the same rules.
func TestRBACAllowDeny(t *testing.T) {
	g := newRBACGateway(t)
	g.createCronTabCRD()
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/roles", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "ct-reader"},
		"rules": []any{map[string]any{"apiGroups": []any{"stable.example.com"}, "resources": []any{"crontabs"}, "verbs": []any{"get", "list", "watch"}}},
	})
	rb := g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "alice-reads"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ct-reader"},
		"subjects": []any{map[string]any{"kind": "User", "name": "alice"}},
	})
	if subj := rb["subjects"].([]any)[0].(map[string]any); subj["apiGroup"] != "rbac.authorization.k8s.io" {
		t.Errorf("subject not defaulted: %v", subj)
	}
	g.eventually(http.StatusOK, "GET", "/apis/stable.example.com/v1/namespaces/team-a/crontabs", nil, as("alice")...)

	resp, body := g.do("GET", "/apis/stable.example.com/v1/namespaces/team-b/crontabs", nil, as("alice")...)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"message":"crontabs.stable.example.com is forbidden: User \"alice\" cannot list resource \"crontabs\" in API group \"stable.example.com\" in the namespace \"team-b\""`) {
		t.Errorf("alice in team-b: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("GET", "/apis/stable.example.com/v1/namespaces/team-a/crontabs", nil, as("bob")...)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `User \"bob\" cannot list resource`) {
		t.Errorf("bob: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("DELETE", "/apis/stable.example.com/v1/namespaces/team-a/crontabs/x", nil, as("alice")...)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice delete: %d %s", resp.StatusCode, body)
	}

	ssar := func(user, ns, verb string) map[string]any {
		return g.expect(http.StatusCreated, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", map[string]any{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
			"spec": map[string]any{"resourceAttributes": map[string]any{"namespace": ns, "verb": verb, "group": "stable.example.com", "resource": "crontabs"}},
		}, as(user)...)["status"].(map[string]any)
	}
	if st := ssar("alice", "team-a", "list"); st["allowed"] != true || st["reason"] != `RBAC: allowed by RoleBinding "alice-reads/team-a" of Role "ct-reader" to User "alice"` {
		t.Errorf("SSAR alice team-a: %v", st)
	}
	if st := ssar("alice", "team-b", "list"); st["allowed"] != false {
		t.Errorf("SSAR alice team-b: %v", st)
	}
	rules := g.expect(http.StatusCreated, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": map[string]any{"namespace": "team-a"},
	}, as("alice")...)
	if got := rules["status"].(map[string]any)["resourceRules"]; !strings.Contains(toJSON(t, got), `{"apiGroups":["stable.example.com"],"resources":["crontabs"],"verbs":["get","list","watch"]}`) {
		t.Errorf("SSRR: %s", toJSON(t, rules))
	}

	// the decisions are counted with mode RBAC, and the cache answers
	rec := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`crdplane_gateway_authorization_decisions_total{decision="allowed",mode="RBAC"}`, `crdplane_gateway_authorization_decisions_total{decision="no-opinion",mode="RBAC"}`, `crdplane_gateway_rbac_decision_cache_total{result="hit"}`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// a binding to a missing role: its reason is upstream's
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-c/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "devs"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"},
		"subjects": []any{map[string]any{"kind": "Group", "name": "devs"}},
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := ssar("bob", "team-c", "get")
		if st["reason"] == `RBAC: clusterrole.rbac.authorization.k8s.io "x" not found` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SSAR bob team-c: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRBACEscalation: a user who may create Roles and RoleBindings cannot
// grant what she does not hold (upstream's 403 lists it), nor bind a role
// she does not hold without the bind verb; with escalate she can.
func TestRBACEscalation(t *testing.T) {
	g := newRBACGateway(t)
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/roles", map[string]any{
		"metadata": map[string]any{"name": "role-admin"},
		"rules": []any{
			map[string]any{"apiGroups": []any{"rbac.authorization.k8s.io"}, "resources": []any{"roles", "rolebindings"}, "verbs": []any{"create", "get", "patch"}},
			map[string]any{"apiGroups": []any{"stable.example.com"}, "resources": []any{"crontabs"}, "verbs": []any{"get"}},
		},
	}, "Content-Type", "application/json")
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "alice-admin"},
		"roleRef":  map[string]any{"kind": "Role", "name": "role-admin"},
		"subjects": []any{map[string]any{"kind": "User", "name": "alice"}},
	})
	held := map[string]any{"metadata": map[string]any{"name": "held"},
		"rules": []any{map[string]any{"apiGroups": []any{"stable.example.com"}, "resources": []any{"crontabs"}, "verbs": []any{"get"}}}}
	g.eventually(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/roles", held, as("alice")...)

	more := map[string]any{"metadata": map[string]any{"name": "more"},
		"rules": []any{map[string]any{"apiGroups": []any{"stable.example.com"}, "resources": []any{"crontabs"}, "verbs": []any{"get", "delete", "create"}}}}
	resp, body := g.do("POST", rbacV1+"/namespaces/team-a/roles", more, as("alice")...)
	want := `roles.rbac.authorization.k8s.io \"more\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"stable.example.com\"], Resources:[\"crontabs\"], Verbs:[\"delete\" \"create\"]}`
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), want) {
		t.Errorf("escalating create: %d %s", resp.StatusCode, body)
	}
	// a patch that escalates is refused too, and writes nothing
	resp, body = g.do("PATCH", rbacV1+"/namespaces/team-a/roles/held", `{"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}`, append(as("alice"), "Content-Type", "application/merge-patch+json")...)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}`) {
		t.Errorf("escalating patch: %d %s", resp.StatusCode, body)
	}
	if got := g.expect(http.StatusOK, "GET", rbacV1+"/namespaces/team-a/roles/held", nil); !strings.Contains(toJSON(t, got["rules"]), `"verbs":["get"]`) {
		t.Errorf("held after the refused patch: %v", got["rules"])
	}
	// binding a role she does not hold
	g.expect(http.StatusCreated, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", map[string]any{
		"metadata": map[string]any{"name": "ct-admin"},
		"rules":    []any{map[string]any{"apiGroups": []any{"stable.example.com"}, "resources": []any{"crontabs"}, "verbs": []any{"*"}}},
	})
	bind := map[string]any{"metadata": map[string]any{"name": "bob-admin"},
		"roleRef":  map[string]any{"kind": "ClusterRole", "name": "ct-admin"},
		"subjects": []any{map[string]any{"kind": "User", "name": "bob"}}}
	resp, body = g.do("POST", rbacV1+"/namespaces/team-a/rolebindings", bind, as("alice")...)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `rolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"stable.example.com\"], Resources:[\"crontabs\"], Verbs:[\"*\"]}`) {
		t.Errorf("escalating bind: %d %s", resp.StatusCode, body)
	}
	// with bind on it, she may
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/roles", map[string]any{
		"metadata": map[string]any{"name": "binder"},
		"rules":    []any{map[string]any{"apiGroups": []any{"rbac.authorization.k8s.io"}, "resources": []any{"clusterroles"}, "verbs": []any{"bind"}, "resourceNames": []any{"ct-admin"}}},
	})
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "alice-binder"},
		"roleRef":  map[string]any{"kind": "Role", "name": "binder"},
		"subjects": []any{map[string]any{"kind": "User", "name": "alice"}},
	})
	g.eventually(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/rolebindings", bind, as("alice")...)
}

// TestRBACServed: the four kinds through the edge: YAML, protobuf, Tables,
// lists across namespaces, 404s and 422s worded as upstream.
func TestRBACServed(t *testing.T) {
	g := newTestGateway(t)
	g.expect(http.StatusCreated, "POST", rbacV1+"/clusterroles", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: viewer\nrules:\n- apiGroups: [\"\"]\n  resources: [\"namespaces\"]\n  verbs: [\"get\"]\n", "Content-Type", "application/yaml")
	resp, body := g.do("GET", rbacV1+"/clusterroles/viewer", nil, "Accept", "application/vnd.kubernetes.protobuf")
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte("k8s\x00")) || !bytes.Contains(body, []byte("ClusterRole")) {
		t.Errorf("protobuf: %d %q", resp.StatusCode, body)
	}
	table := g.expect(http.StatusOK, "GET", rbacV1+"/clusterroles", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if cols := toJSON(t, table["columnDefinitions"]); !strings.Contains(cols, `"name":"Created At","priority":0,"type":"date"`) {
		t.Errorf("table columns: %s", cols)
	}
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/a/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "b"}, "roleRef": map[string]any{"kind": "ClusterRole", "name": "viewer"},
		"subjects": []any{map[string]any{"kind": "User", "name": "u"}, map[string]any{"kind": "ServiceAccount", "name": "sa", "namespace": "a"}},
	})
	table = g.expect(http.StatusOK, "GET", rbacV1+"/rolebindings", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if rows := toJSON(t, table["rows"]); !strings.Contains(rows, `"cells":["b","ClusterRole/viewer",`) || !strings.Contains(rows, `"u","","a/sa"]`) {
		t.Errorf("binding rows: %s", rows)
	}
	list := g.expect(http.StatusOK, "GET", rbacV1+"/namespaces/a/rolebindings", nil)
	if list["kind"] != "RoleBindingList" || len(list["items"].([]any)) != 1 {
		t.Errorf("list: %v", list)
	}
	resp, body = g.do("POST", rbacV1+"/namespaces/a/roles", map[string]any{"metadata": map[string]any{"name": "r"}, "rules": []any{map[string]any{"verbs": []any{"get"}}}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), `Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].apiGroups: Required value: resource rules must supply at least one api group, rules[0].resources: Required value: resource rules must supply at least one resource]`) {
		t.Errorf("invalid role: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("GET", rbacV1+"/namespaces/a/roles/nope", nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `roles.rbac.authorization.k8s.io \"nope\" not found`) {
		t.Errorf("missing role: %d %s", resp.StatusCode, body)
	}
	g.expect(http.StatusOK, "PATCH", rbacV1+"/namespaces/a/rolebindings/b", `{"subjects":[{"kind":"Group","name":"g"}]}`, "Content-Type", "application/strategic-merge-patch+json")
	g.expect(http.StatusOK, "DELETE", rbacV1+"/namespaces/a/rolebindings/b", nil)
	g.expect(http.StatusNotFound, "GET", rbacV1+"/namespaces/a/rolebindings/b", nil)
	for _, name := range []string{"x1", "x2"} {
		g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/a/roles", map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{"x": "y"}}})
	}
	if got := g.expect(http.StatusOK, "DELETE", rbacV1+"/namespaces/a/roles?labelSelector=x%3Dy", nil); got["kind"] != "RoleList" || len(got["items"].([]any)) != 2 {
		t.Errorf("deletecollection: %v", got)
	}
	g.expect(http.StatusNotFound, "GET", rbacV1+"/namespaces/a/roles/x1", nil)
}
