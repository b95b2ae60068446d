package httpx

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/pkg/egress/egresstest"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// privateWebhook serves h over TLS with a certificate for name, and
// returns a kubeconfig naming it https://<name>:443, an address only an
// egress proxy resolves (to the server's, in hosts).
func privateWebhook(t *testing.T, name string, hosts map[string]string, h http.HandlerFunc) (kubeconfig string, calls *atomic.Int64) {
	t.Helper()
	ca, err := localpki.Generate([]string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(ca.ServingCertPEM, ca.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	calls = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		h(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	hosts[name+":443"] = srv.Listener.Addr().String()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: webhook
  cluster:
    server: https://%s
    certificate-authority-data: %s
users:
- name: gateway
contexts:
- name: webhook
  context: {cluster: webhook, user: gateway}
current-context: webhook
`, name, base64.StdEncoding.EncodeToString(ca.CACertPEM))
	return writeFile(t, t.TempDir(), name+".kubeconfig", []byte(kc)), calls
}

// TestWebhooksEgress: the token, authorization and audit webhooks, named
// by URLs only the egress proxy resolves, are reached through the dialer
// given (the controlplane selection, as kube-apiserver's); without it the
// token webhook cannot be reached and the request is 401.
func TestWebhooksEgress(t *testing.T) {
	hosts := map[string]string{}
	tokenKC, tokenCalls := privateWebhook(t, "tokens.private", hosts, tokenReviewer)
	sarKC, sarCalls := privateWebhook(t, "sar.private", hosts, sarReviewer(make(chan authzv1.SubjectAccessReview, 16)))
	lists := make(chan auditv1.EventList, 8)
	auditKC, _ := privateWebhook(t, "audit.private", hosts, func(w http.ResponseWriter, r *http.Request) {
		var l auditv1.EventList
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil {
			http.Error(w, "bad event list", 400)
			return
		}
		lists <- l
	})
	p := egresstest.Start(t, egresstest.Options{Hosts: hosts})
	cfg, err := egress.ReadConfigFile(egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: controlplane
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+p.URL+`
`))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	policy := writeFile(t, t.TempDir(), "p.yaml", []byte(testPolicy))

	edge := func(t *testing.T, dial utilnet.DialFunc) *httptest.Server {
		a, err := NewAuthenticator(t.Context(), AuthConfig{TokenWebhookConfigFile: tokenKC, WebhookDial: dial})
		if err != nil {
			t.Fatal(err)
		}
		az, err := NewAuthorizer(AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: sarKC, WebhookDial: dial})
		if err != nil {
			t.Fatal(err)
		}
		auditor, err := NewAuditor(AuditConfig{PolicyFile: policy, WebhookConfigFile: auditKC, WebhookMode: AuditModeBlocking, WebhookInitialBackoff: 10 * time.Millisecond, WebhookDial: dial})
		if err != nil {
			t.Fatal(err)
		}
		if err := auditor.Run(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(auditor.Shutdown)
		srv := httptest.NewServer(&Edge{Auth: a, Authz: az, Audit: auditor, MaxBody: 1 << 20, Next: auditBackend()})
		t.Cleanup(srv.Close)
		return srv
	}

	t.Run("through the proxy", func(t *testing.T) {
		srv := edge(t, sel.Dialer(egress.ControlPlane).DialContext)
		resp := send(t, srv, "GET", "/apis/stable.example.com/v1/namespaces/default/widgets/nope", "wh-dave", "", "", nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("= %d, want the backend's 404", resp.StatusCode)
		}
		if tokenCalls.Load() != 1 || sarCalls.Load() != 1 {
			t.Errorf("token reviews %d, access reviews %d; want 1 each", tokenCalls.Load(), sarCalls.Load())
		}
		select {
		case l := <-lists:
			if len(l.Items) != 1 || l.Items[0].User.Username != "dave" || l.Items[0].ResponseStatus.Code != 404 {
				t.Errorf("audit webhook got %+v", l.Items)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event list reached the audit webhook")
		}
		seen := map[string]bool{}
		for _, target := range p.Targets() {
			seen[target] = true
		}
		for _, want := range []string{"tokens.private:443", "sar.private:443", "audit.private:443"} {
			if !seen[want] {
				t.Errorf("no tunnel to %s; tunnels: %v", want, p.Targets())
			}
		}
	})

	t.Run("direct", func(t *testing.T) {
		before := tokenCalls.Load()
		srv := edge(t, nil)
		resp := send(t, srv, "GET", "/apis/stable.example.com/v1/namespaces/default/widgets/nope", "wh-erin", "", "", nil)
		if resp.StatusCode != http.StatusUnauthorized || tokenCalls.Load() != before {
			t.Fatalf("= %d with %d token reviews, want 401 and none: the webhook's name resolves only through the proxy", resp.StatusCode, tokenCalls.Load()-before)
		}
	})
}
