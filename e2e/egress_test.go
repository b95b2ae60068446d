package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/crdplane/crdplane/pkg/egress/egresstest"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// TestRunEgressSelector runs `crdplane run --egress-selector-config-file`
// with the cluster selection through an HTTP CONNECT proxy: a conversion
// webhook named by clientConfig.service, whose in-cluster name only the
// proxy resolves, converts through it, and conversions fail with
// upstream's wording once the proxy is down.
func TestRunEgressSelector(t *testing.T) {
	wh := startConversionWebhook(t, "crontab-conversion.webhooks.svc")
	const svcAddr = "crontab-conversion.webhooks.svc:443"
	proxy := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{svcAddr: wh.addr}})
	config := egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+proxy.URL+`
- name: controlplane
  connection:
    proxyProtocol: Direct
`)
	s := startServer(t, "", "--egress-selector-config-file", config)
	b, err := os.ReadFile(testdata("conversion-crontab-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := strings.NewReplacer(
		"url: WEBHOOK_URL", "service: {namespace: webhooks, name: crontab-conversion, path: /convert}",
		"CA_BUNDLE", base64.StdEncoding.EncodeToString(wh.caPEM)).Replace(string(b))
	s.mustIn(t, crd, "apply", "-f", "-")
	s.must(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/crontabs.example.com")
	s.mustIn(t, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"egress","namespace":"default"},"hostPort":"db.example.com:5432","spec":{"cronSpec":"* * * * */5"}}`, "create", "-f", "-")
	out := s.must(t, "get", "crontabs.v1.example.com", "egress", "-o", "jsonpath={.apiVersion} {.host} {.port}")
	if out != "example.com/v1 db.example.com 5432" {
		t.Fatalf("read at v1: %q", out)
	}
	if wh.handler.Reviews() == 0 || proxy.Connects() == 0 {
		t.Fatalf("%d reviews, %d CONNECTs", wh.handler.Reviews(), proxy.Connects())
	}
	for _, target := range proxy.Targets() {
		if target != svcAddr {
			t.Fatalf("CONNECT %s, want %s", target, svcAddr)
		}
	}

	// The proxy down: a write at v1 needs the webhook (v1beta1 is stored).
	proxy.Close()
	_, errOut, err := s.kubectl(t, `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"down","namespace":"default"},"host":"db","port":"1","spec":{"cronSpec":"* * * * */5"}}`, "create", "-f", "-")
	want := fmt.Sprintf(`conversion webhook for example.com/v1, Kind=CronTab failed: Post "https://%s/convert?timeout=30s": dial tcp %s: connect: connection refused`, svcAddr, proxy.Addr)
	if err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("proxy down: %v\n%s\nwant %s", err, errOut, want)
	}
	if _, errOut, err := s.kubectl(t, "", "get", "crontabs.v1beta1.example.com", "down"); err == nil || !strings.Contains(errOut, `"down" not found`) {
		t.Fatalf("written while the proxy was down: %v %s", err, errOut)
	}
}

// privateTLS serves h over TLS with a certificate for name (signed by a
// CA of its own, returned) on a loopback port, returned.
func privateTLS(t *testing.T, name string, h http.Handler) (caPEM []byte, addr string) {
	t.Helper()
	pki, err := localpki.Generate([]string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return pki.CACertPEM, srv.Listener.Addr().String()
}

// TestRunEgressSelectorGateway: with --egress-selector-config-file the
// gateway's own webhooks dial through the controlplane selection and the
// aggregation layer (availability checks and proxied requests) through
// the cluster selection, as kube-apiserver's: a token webhook and an
// APIService's backend whose names only their proxies resolve are
// reached through them.
func TestRunEgressSelectorGateway(t *testing.T) {
	tokenCA, tokenAddr := privateTLS(t, "tokens.private", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		if name, ok := strings.CutPrefix(tr.Spec.Token, "wh-"); ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: name, Groups: []string{"system:masters"}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tr)
	}))
	// a minimal extension server for wardle.example.com/v1alpha1
	extCA, extAddr := privateTLS(t, "api.wardle.svc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/apis/wardle.example.com/v1alpha1" {
			_, _ = io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"wardle.example.com/v1alpha1","resources":[{"name":"flunders","singularName":"flunder","namespaced":true,"kind":"Flunder","verbs":["get","list"]}]}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"path":%q,"user":%q}`, r.URL.Path, r.Header.Get("X-Remote-User")) //nolint:gosec // G705: a test backend echoing what reached it, as JSON
	}))
	cp := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{"tokens.private:443": tokenAddr}})
	cluster := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{"api.wardle.svc:443": extAddr}})
	config := egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+cluster.URL+`
- name: controlplane
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+cp.URL+`
`)
	kc := filepath.Join(t.TempDir(), "tokens.kubeconfig")
	if err := os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: tokens
  cluster: {server: "https://tokens.private", certificate-authority-data: %s}
users:
- name: crdplane
contexts:
- name: tokens
  context: {cluster: tokens, user: crdplane}
current-context: tokens
`, base64.StdEncoding.EncodeToString(tokenCA)), 0o600); err != nil {
		t.Fatal(err)
	}
	ops := freeAddr(t)
	s := startServer(t, "", "--egress-selector-config-file", config, "--authentication-token-webhook-config-file", kc, "--ops-listen", ops)

	// a token only the webhook knows
	if out := s.must(t, "--token", "wh-dave", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); out != "dave" {
		t.Fatalf("whoami = %q", out)
	}
	if got := cp.Targets(); len(got) == 0 || got[0] != "tokens.private:443" {
		t.Fatalf("controlplane tunnels %v", got)
	}

	s.mustIn(t, fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.wardle.example.com
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: wardle, name: api, port: 443}
  caBundle: %s
`, base64.StdEncoding.EncodeToString(extCA)), "apply", "-f", "-")
	s.must(t, "wait", "--for", "condition=Available", "--timeout", "60s", "apiservice/v1alpha1.wardle.example.com")
	if out := s.must(t, "get", "--raw", "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one"); out != `{"path":"/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one","user":"admin"}` {
		t.Fatalf("proxied GET = %q", out)
	}
	if cluster.Connects() < 2 {
		t.Fatalf("%d cluster tunnels, want the availability check's and the GET's", cluster.Connects())
	}
	for _, target := range cluster.Targets() {
		if target != "api.wardle.svc:443" {
			t.Fatalf("cluster tunnel to %s", target)
		}
	}
	// upstream's egress dialer metrics, on crdplane's /metrics
	resp, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`apiserver_egress_dialer_dial_duration_seconds_count{protocol="http_connect",transport="tcp"}`, "crdplane_http_requests_total"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
