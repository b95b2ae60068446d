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

// TestRBACEscalationGCFields: as kube-apiserver, an update that changes
// only ownerReferences or finalizers (what the garbage collector writes) is
// not checked for escalation; any other change of the same object is.
func TestRBACEscalationGCFields(t *testing.T) {
	g := newRBACGateway(t)
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/roles", map[string]any{
		"metadata": map[string]any{"name": "role-admin"},
		"rules":    []any{map[string]any{"apiGroups": []any{"rbac.authorization.k8s.io"}, "resources": []any{"roles", "rolebindings"}, "verbs": []any{"get", "update", "patch"}}},
	}, "Content-Type", "application/json")
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "alice-admin"},
		"roleRef":  map[string]any{"kind": "Role", "name": "role-admin"},
		"subjects": []any{map[string]any{"kind": "User", "name": "alice"}},
	})
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/roles", map[string]any{
		"metadata": map[string]any{"name": "wide"},
		"rules":    []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}},
	})
	g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/team-a/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "wide-to-bob"},
		"roleRef":  map[string]any{"kind": "Role", "name": "wide"},
		"subjects": []any{map[string]any{"kind": "User", "name": "bob"}},
	})
	merge := append(as("alice"), "Content-Type", "application/merge-patch+json")
	owner := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"6a1e3f0e-4b1c-4a39-9d2e-1f5b7c9d0a11"}]}}`
	for _, path := range []string{rbacV1 + "/namespaces/team-a/roles/wide", rbacV1 + "/namespaces/team-a/rolebindings/wide-to-bob"} {
		// finalizers and ownerReferences: allowed (once her binding is seen)
		g.eventually(http.StatusOK, "PATCH", path, `{"metadata":{"finalizers":["example.com/keep"]}}`, merge...)
		g.expect(http.StatusOK, "PATCH", path, owner, merge...)
		got := g.expect(http.StatusOK, "GET", path, nil)
		if md := toJSON(t, got["metadata"]); !strings.Contains(md, `"finalizers":["example.com/keep"]`) || !strings.Contains(md, `"ownerReferences":[`) {
			t.Errorf("%s after the GC-field patches: %s", path, md)
		}
		// a PUT of what she read, finalizers removed: allowed
		got["metadata"].(map[string]any)["finalizers"] = nil
		g.expect(http.StatusOK, "PUT", path, got, as("alice")...)
		// anything else: the escalation check, refused, nothing written
		resp, body := g.do("PATCH", path, `{"metadata":{"labels":{"a":"b"}}}`, merge...)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}`) {
			t.Errorf("%s: label patch: %d %s", path, resp.StatusCode, body)
		}
		resp, body = g.do("PATCH", path, `{"metadata":{"labels":{"a":"b"},"finalizers":["example.com/keep"]}}`, merge...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: label and finalizer patch: %d %s", path, resp.StatusCode, body)
		}
		if got := g.expect(http.StatusOK, "GET", path, nil); strings.Contains(toJSON(t, got["metadata"]), `"labels"`) || strings.Contains(toJSON(t, got["metadata"]), `finalizers`) {
			t.Errorf("%s after the refused patches: %s", path, toJSON(t, got["metadata"]))
		}
	}
}

// TestRBACDelete: a removed object is answered with upstream's Status; the
// propagation options set the garbage collector's finalizers, and an
// object they (or its own finalizers) hold is marked and answered itself.
func TestRBACDelete(t *testing.T) {
	g := newTestGateway(t)
	roles := rbacV1 + "/namespaces/a/roles"
	mk := func(name string, fins ...string) string {
		md := map[string]any{"name": name}
		if len(fins) > 0 {
			md["finalizers"] = fins
		}
		got := g.expect(http.StatusCreated, "POST", roles, map[string]any{"metadata": md})
		return got["metadata"].(map[string]any)["uid"].(string)
	}
	uid := mk("plain")
	got := g.expect(http.StatusOK, "DELETE", roles+"/plain", nil)
	if want := `{"apiVersion":"v1","details":{"group":"rbac.authorization.k8s.io","kind":"roles","name":"plain","uid":"` + uid + `"},"kind":"Status","metadata":{},"status":"Success"}`; toJSON(t, got) != want {
		t.Errorf("delete: %s, want %s", toJSON(t, got), want)
	}
	g.expect(http.StatusNotFound, "GET", roles+"/plain", nil)
	finalizers := func(obj map[string]any) string {
		md := obj["metadata"].(map[string]any)
		if md["deletionTimestamp"] == nil {
			return "not marked"
		}
		return toJSON(t, md["finalizers"])
	}
	for _, c := range []struct {
		name, query, body string
		own               []string
		code              int
		want              string
	}{
		{"fg", "?propagationPolicy=Foreground", "", nil, http.StatusOK, `["foregroundDeletion"]`},
		{"orphan", "?propagationPolicy=Orphan", "", nil, http.StatusOK, `["orphan"]`},
		{"od-false", "", `{"orphanDependents":false}`, nil, http.StatusAccepted, `["foregroundDeletion"]`},
		{"own", "?propagationPolicy=Background", "", []string{"example.com/keep"}, http.StatusOK, `["example.com/keep"]`},
		{"own-orphan", "?propagationPolicy=Orphan", "", []string{"example.com/keep", "foregroundDeletion"}, http.StatusOK, `["example.com/keep","orphan"]`},
	} {
		mk(c.name, c.own...)
		var body any
		if c.body != "" {
			body = c.body
		}
		if got := g.expect(c.code, "DELETE", roles+"/"+c.name+c.query, body, "Content-Type", "application/json"); finalizers(got) != c.want {
			t.Errorf("%s: answered finalizers %s, want %s", c.name, finalizers(got), c.want)
		}
		if got := g.expect(http.StatusOK, "GET", roles+"/"+c.name, nil); finalizers(got) != c.want {
			t.Errorf("%s: stored finalizers %s, want %s", c.name, finalizers(got), c.want)
		}
		// the finalizers removed, the object goes
		g.expect(http.StatusOK, "PATCH", roles+"/"+c.name, `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json")
		g.expect(http.StatusNotFound, "GET", roles+"/"+c.name, nil)
	}
	// a second delete of a marked object changes its finalizers as asked
	mk("again", "example.com/keep")
	g.expect(http.StatusOK, "DELETE", roles+"/again", nil)
	if got := g.expect(http.StatusOK, "DELETE", roles+"/again?propagationPolicy=Foreground", nil); finalizers(got) != `["example.com/keep","foregroundDeletion"]` {
		t.Errorf("second delete: %s", finalizers(got))
	}
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
