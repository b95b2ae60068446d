package e2e

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// attackPolicy audits everything at Metadata, but the RequestReceived
// stage.
const attackPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/api*", "/version", "/openapi*", "/healthz", "/readyz", "/livez"]
- level: Metadata
`

const attackUA = "attack-test/1.0"

// attacker sends raw requests to s as one client (a client certificate
// or none), over HTTP/1.1 so that an oversized header reaches the server.
type attacker struct {
	s      *server
	client *http.Client
}

func newAttacker(t *testing.T, s *server, cert *tls.Certificate) *attacker {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	for _, c := range kc.Clusters {
		roots.AppendCertsFromPEM(c.CertificateAuthorityData)
	}
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: tc, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	t.Cleanup(tr.CloseIdleConnections)
	return &attacker{s: s, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (a *attacker) do(t *testing.T, method, path, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", attackUA)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// auditLines reads the audit log as JSON objects, without the fields that
// differ from run to run (auditID, timestamps).
func auditLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("audit line %s: %v", line, err)
		}
		for _, k := range []string{"auditID", "requestReceivedTimestamp", "stageTimestamp"} {
			if _, ok := m[k]; !ok {
				t.Errorf("audit event without %s: %s", k, line)
			}
			delete(m, k)
		}
		out = append(out, m)
	}
	return out
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAttacksRefusedAndAudited runs `crdplane run` with client
// certificates, a front proxy, a token file, RBAC and an audit log, and
// sends what kube-apiserver must refuse, each as a write: an unknown
// client certificate, an expired one, front-proxy headers without the
// front proxy's certificate (alone, from a certificate of the front
// proxy's CA not in --requestheader-allowed-names, and from a known user,
// who stays himself), the admin's token in ?access_token=, an oversized header, and
// a RoleBinding to a ClusterRole its author does not hold. Each gets
// upstream's status, nothing is written, and every refusal the server
// handles is in the audit log with the fields upstream writes: a 401 at
// ResponseStarted with "Authentication failed, ..." and no user, a 403 at
// ResponseComplete with the authorization annotations and the Status.
func TestAttacksRefusedAndAudited(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clientCA, otherCA, proxyCA := newCA(t), newCA(t), newCA(t)
	now := time.Now().Add(-time.Minute)
	pair := func(crt, key []byte) tls.Certificate {
		c, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	unknown := pair(issue(t, otherCA, "system:admin", []string{"system:masters"}, now, time.Hour))
	expired := pair(issue(t, clientCA, "system:admin", []string{"system:masters"}, now.Add(-72*time.Hour), time.Hour))
	alice := pair(issue(t, clientCA, "alice", []string{"dev"}, now, time.Hour))
	// The front proxy's CA, but not its name (--requestheader-allowed-names).
	notTheProxy := pair(issue(t, proxyCA, "someone-else", nil, now, time.Hour))
	logPath := filepath.Join(dir, "audit.log")
	s := startServer(t, "",
		"--client-ca-file", write("client-ca.crt", clientCA.CACertPEM),
		"--requestheader-client-ca-file", write("proxy-ca.crt", proxyCA.CACertPEM),
		"--requestheader-allowed-names", "front-proxy",
		"--token-file", write("tokens.csv", []byte("bob-token,bob,1002,\"devs\"\n")),
		"--authorization-mode", "RBAC",
		"--audit-policy-file", write("policy.yaml", []byte(attackPolicy)),
		"--audit-log-path", logPath)
	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
	// bob may create RoleBindings in default, nothing else.
	s.must(t, "create", "role", "rb-creator", "--verb=create", "--resource=rolebindings.rbac.authorization.k8s.io")
	s.must(t, "create", "rolebinding", "bob-creates-bindings", "--role=rb-creator", "--user=bob")
	kc, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	adminToken := ""
	for _, ai := range kc.AuthInfos {
		adminToken = ai.Token
	}
	if adminToken == "" {
		t.Fatal("no admin token in the kubeconfig")
	}

	const crontabs = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	const rolebindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings"
	masters := map[string]string{"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}
	unauthorized := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}` + "\n"
	crontabRef := map[string]any{"resource": "crontabs", "namespace": "default", "apiGroup": "stable.example.com", "apiVersion": "v1"}
	failedAuthn := func(uri, message string) map[string]any {
		return map[string]any{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseStarted",
			"requestURI": uri, "verb": "create", "user": map[string]any{}, "sourceIPs": []any{"127.0.0.1"}, "userAgent": attackUA,
			"objectRef": crontabRef, "responseStatus": map[string]any{"metadata": map[string]any{}, "message": message, "code": 401.0}}
	}
	aliceForbidden := `crontabs.stable.example.com is forbidden: User "alice" cannot create resource "crontabs" in API group "stable.example.com" in the namespace "default"`
	var want []map[string]any
	for i, tc := range []struct {
		name    string
		cert    *tls.Certificate
		query   string
		headers map[string]string
		code    int
		body    string
		event   map[string]any // nil: not audited
	}{
		{name: "unknown client certificate", cert: &unknown, code: 401, body: unauthorized,
			event: failedAuthn(crontabs, "Authentication failed, attempted: x509")},
		{name: "expired client certificate", cert: &expired, code: 401, body: unauthorized,
			event: failedAuthn(crontabs, "Authentication failed, attempted: x509")},
		{name: "front proxy headers without a certificate", headers: masters, code: 401, body: unauthorized,
			event: failedAuthn(crontabs, "Authentication failed, no credentials provided")},
		{name: "front proxy headers from a certificate of the front proxy's CA with another name", cert: &notTheProxy, headers: masters, code: 401, body: unauthorized,
			event: failedAuthn(crontabs, "Authentication failed, attempted: x509")},
		{name: "front proxy headers from alice", cert: &alice, headers: masters, code: 403,
			body: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + strings.ReplaceAll(aliceForbidden, `"`, `\"`) + `","reason":"Forbidden","details":{"group":"stable.example.com","kind":"crontabs"},"code":403}` + "\n",
			event: map[string]any{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseComplete",
				"requestURI": crontabs, "verb": "create",
				"user": map[string]any{"username": "alice", "groups": []any{"dev", "system:authenticated"},
					"extra": map[string]any{"authentication.kubernetes.io/credential-id": []any{fmt.Sprintf("X509SHA256=%x", sha256.Sum256(alice.Certificate[0]))}}},
				"sourceIPs": []any{"127.0.0.1"}, "userAgent": attackUA, "objectRef": crontabRef,
				"responseStatus": map[string]any{"metadata": map[string]any{}, "status": "Failure", "message": aliceForbidden, "reason": "Forbidden",
					"details": map[string]any{"group": "stable.example.com", "kind": "crontabs"}, "code": 403.0},
				"annotations": map[string]any{"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""}}},
		{name: "token in the query string", query: "?access_token=" + adminToken, code: 401, body: unauthorized,
			event: failedAuthn(crontabs+"?access_token="+adminToken, "Authentication failed, attempted: access_token")},
		// net/http answers before any handler (kube-apiserver's
		// MaxHeaderBytes is 1 MiB too): nothing to audit.
		{name: "oversized header", headers: map[string]string{"X-Padding": strings.Repeat("a", 2<<20)}, code: 431,
			body: "431 Request Header Fields Too Large"},
	} {
		name := fmt.Sprintf("evil-%d", i)
		code, body := newAttacker(t, s, tc.cert).do(t, "POST", crontabs+tc.query, cronTabJSON(name), tc.headers)
		if code != tc.code || body != tc.body {
			t.Errorf("%s: %d %s\nwant %d %s", tc.name, code, body, tc.code, tc.body)
		}
		if tc.event != nil {
			want = append(want, tc.event)
		}
	}

	// bob binds cluster-admin: he may create RoleBindings, but not grant
	// what he does not hold.
	binding := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"bob-admin"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"bob"}]}`
	escalation := `rolebindings.rbac.authorization.k8s.io "bob-admin" is forbidden: user "bob" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["*"], Resources:["*"], Verbs:["*"]}
{NonResourceURLs:["*"], Verbs:["*"]}`
	// bob's RoleBinding reaches the gateway's policy, and the bootstrap
	// policy (cluster-admin) is written.
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, _, _ := s.kubectl(t, "", "auth", "can-i", "create", "rolebindings", "--as=bob", "--as-group=devs")
		_, _, err := s.kubectl(t, "", "get", "clusterrole", "cluster-admin")
		if strings.TrimSpace(out) == "yes" && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob never allowed to create RoleBindings: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, body := newAttacker(t, s, nil).do(t, "POST", rolebindings, binding, map[string]string{"Authorization": "Bearer bob-token"})
	var st map[string]any
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 403 || st["message"] != escalation || st["reason"] != "Forbidden" {
		t.Fatalf("escalation: %d %s\nwant message %s", code, body, escalation)
	}
	bindingRef := map[string]any{"resource": "rolebindings", "namespace": "default", "name": "bob-admin", "apiGroup": "rbac.authorization.k8s.io", "apiVersion": "v1"}
	want = append(want, map[string]any{"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": "ResponseComplete",
		"requestURI": rolebindings, "verb": "create",
		"user":      map[string]any{"username": "bob", "uid": "1002", "groups": []any{"devs", "system:authenticated"}},
		"sourceIPs": []any{"127.0.0.1"}, "userAgent": attackUA, "objectRef": bindingRef,
		"responseStatus": map[string]any{"metadata": map[string]any{}, "status": "Failure", "message": escalation, "reason": "Forbidden",
			"details": map[string]any{"name": "bob-admin", "group": "rbac.authorization.k8s.io", "kind": "rolebindings"}, "code": 403.0},
		"annotations": map[string]any{"authorization.k8s.io/decision": "allow",
			"authorization.k8s.io/reason": `RBAC: allowed by RoleBinding "bob-creates-bindings/default" of Role "rb-creator" to User "bob"`}})

	// Nothing was written.
	if out := s.must(t, "get", "crontabs", "-o", "name"); out != "" {
		t.Errorf("crontabs written: %q", out)
	}
	if _, errOut, err := s.kubectl(t, "", "get", "rolebinding", "bob-admin"); err == nil || !strings.Contains(errOut, `rolebindings.rbac.authorization.k8s.io "bob-admin" not found`) {
		t.Errorf("the escalating RoleBinding: %v %s", err, errOut)
	}

	// The audit log: the refusals, as upstream writes them, in order.
	var got []map[string]any
	for _, e := range auditLines(t, logPath) {
		if e["userAgent"] == attackUA {
			got = append(got, e)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit events of the attacks, want %d:\n%s", len(got), len(want), jsonOf(t, got))
	}
	for i := range want {
		if g, w := jsonOf(t, got[i]), jsonOf(t, want[i]); g != w {
			t.Errorf("audit event %d:\n got %s\nwant %s", i, g, w)
		}
	}
}
