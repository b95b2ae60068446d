package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// TestAuthnAuthz runs `crdplane run` with every authentication mode of
// kube-apiserver (client certificates, a token file, a TokenReview webhook,
// a front proxy) and a SubjectAccessReview webhook authorizer that denies
// bob the crontabs, and drives it with kubectl 1.33: alice (client
// certificate) and carol (webhook token) are served, bob (token file) gets
// upstream's Forbidden message, an expired certificate and a token in the
// query string are Unauthorized, the front proxy's headers count only from
// the front proxy; kubectl auth can-i answers from the same authorizers.
func TestAuthnAuthz(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	clientCA, proxyCA := newCA(t), newCA(t)
	now := time.Now().Add(-time.Minute)
	aliceCrt, aliceKey := issue(t, clientCA, "alice", []string{"dev"}, now, time.Hour)
	oldCrt, oldKey := issue(t, clientCA, "alice", []string{"dev"}, now.Add(-72*time.Hour), time.Hour)
	proxyCrt, proxyKey := issue(t, proxyCA, "front-proxy", nil, now, time.Hour)

	tokenReviews := webhook(t, write, "authn.kubeconfig", func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if tr.Spec.Token == "carol-token" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "carol", Groups: []string{"webhook-users"}}}
		}
		_ = json.NewEncoder(w).Encode(tr)
	})
	sars := webhook(t, write, "authz.kubeconfig", func(w http.ResponseWriter, r *http.Request) {
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		ra := sar.Spec.ResourceAttributes
		if sar.Spec.User == "bob" && ra != nil && ra.Resource == "crontabs" {
			sar.Status = authzv1.SubjectAccessReviewStatus{Denied: true, Reason: "bob may not touch crontabs"}
		} else {
			sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: true}
		}
		_ = json.NewEncoder(w).Encode(sar)
	})

	s := startServer(t, "",
		"--client-ca-file", write("client-ca.crt", clientCA.CACertPEM),
		"--token-file", write("tokens.csv", []byte("bob-token,bob,1001,\"devs,qa\"\n")),
		"--authentication-token-webhook-config-file", tokenReviews,
		"--requestheader-client-ca-file", write("proxy-ca.crt", proxyCA.CACertPEM),
		"--requestheader-allowed-names", "front-proxy",
		"--authorization-mode", "Webhook",
		"--authorization-webhook-config-file", sars)
	if !strings.Contains(s.logs.String(), "authorization") || !strings.Contains(s.logs.String(), "mode=Webhook") {
		t.Errorf("the authorization mode is not logged at startup:\n%s", tail(s.logs.String(), 2000))
	}

	// The admin (the generated token, in system:masters) sets up.
	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")

	alice := s.as(t, "alice", &clientcmdapi.AuthInfo{ClientCertificateData: aliceCrt, ClientKeyData: aliceKey})
	bob := s.as(t, "bob", &clientcmdapi.AuthInfo{Token: "bob-token"})
	carol := s.as(t, "carol", &clientcmdapi.AuthInfo{Token: "carol-token"})
	expired := s.as(t, "expired", &clientcmdapi.AuthInfo{ClientCertificateData: oldCrt, ClientKeyData: oldKey})
	stranger := s.as(t, "stranger", &clientcmdapi.AuthInfo{Token: "nobody-token"})

	alice.must(t, "create", "-f", testdata("crontab-valid.yaml"))
	if out := alice.must(t, "get", "crontabs", "-o", "name"); strings.TrimSpace(out) != "crontab.stable.example.com/my-new-cron-object" {
		t.Errorf("alice's list: %q", out)
	}
	if out := carol.must(t, "get", "crontab", "my-new-cron-object", "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Errorf("carol's get: %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "crontabs"}, `Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "bob" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default": bob may not touch crontabs`},
		{[]string{"get", "crontab", "my-new-cron-object"}, `Error from server (Forbidden): crontabs.stable.example.com "my-new-cron-object" is forbidden: User "bob" cannot get resource "crontabs" in API group "stable.example.com" in the namespace "default": bob may not touch crontabs`},
		{[]string{"delete", "crontab", "my-new-cron-object"}, `Error from server (Forbidden): crontabs.stable.example.com "my-new-cron-object" is forbidden: User "bob" cannot delete resource "crontabs" in API group "stable.example.com" in the namespace "default": bob may not touch crontabs`},
	} {
		if errOut := bob.fails(t, tc.args...); strings.TrimSpace(errOut) != tc.want {
			t.Errorf("bob %v:\n got %s\nwant %s", tc.args, errOut, tc.want)
		}
	}
	// Bob may read what the webhook allows him (the CRDs).
	bob.must(t, "get", "crd", "crontabs.stable.example.com")
	// kubectl auth can-i asks the same authorizers (SelfSubjectAccessReview).
	if out := alice.must(t, "auth", "can-i", "create", "crontabs"); strings.TrimSpace(out) != "yes" {
		t.Errorf("alice can-i: %q", out)
	}
	if out, _, err := bob.kubectl(t, "", "auth", "can-i", "list", "crontabs.stable.example.com"); err == nil || strings.TrimSpace(out) != "no - bob may not touch crontabs" {
		t.Errorf("bob can-i: %q %v", out, err)
	}
	if out := bob.must(t, "auth", "can-i", "get", "customresourcedefinitions"); strings.TrimSpace(out) != "yes" {
		t.Errorf("bob can-i get crds: %q", out)
	}
	for name, c := range map[string]*server{"expired certificate": expired, "unknown token": stranger} {
		if errOut := c.fails(t, "get", "crontabs"); !strings.Contains(errOut, "error: You must be logged in to the server (Unauthorized)") {
			t.Errorf("%s: %s", name, errOut)
		}
	}

	// Raw requests: the front proxy, its headers from another client, a
	// token in the query string.
	proxyCert, err := tls.X509KeyPair(proxyCrt, proxyKey)
	if err != nil {
		t.Fatal(err)
	}
	aliceCert, err := tls.X509KeyPair(aliceCrt, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	const crontabs = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	for _, tc := range []struct {
		name  string
		cert  *tls.Certificate
		path  string
		user  string
		code  int
		inMsg string
	}{
		{"front proxy for dave", &proxyCert, crontabs, "dave", 200, ""},
		{"front proxy for bob", &proxyCert, crontabs, "bob", 403, `User \"bob\" cannot list resource \"crontabs\"`},
		{"bob's headers from alice", &aliceCert, crontabs, "bob", 200, ""},
		{"bob's headers without a certificate", nil, crontabs, "bob", 401, ""},
		{"token in the query string", nil, crontabs + "?access_token=bob-token", "", 401, ""},
	} {
		code, body := rawGet(t, s, tc.cert, tc.path, tc.user)
		if code != tc.code || !strings.Contains(body, tc.inMsg) {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}
}

// as is s with a kubeconfig for another user (s's server and CA).
func (s *server) as(t *testing.T, name string, ai *clientcmdapi.AuthInfo) *server {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Contexts {
		c.AuthInfo = name
	}
	kc.AuthInfos = map[string]*clientcmdapi.AuthInfo{name: ai}
	c := *s
	c.Kubeconfig = filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return &c
}

func newCA(t *testing.T) *localpki.PKI {
	t.Helper()
	p, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func issue(t *testing.T, ca *localpki.PKI, cn string, orgs []string, from time.Time, validity time.Duration) ([]byte, []byte) {
	t.Helper()
	c, k, err := ca.IssueClient(cn, orgs, from, validity)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// webhook serves h over HTTPS and writes the kubeconfig naming it.
func webhook(t *testing.T, write func(string, []byte) string, name string, h http.HandlerFunc) string {
	t.Helper()
	ca := newCA(t)
	cert, err := tls.X509KeyPair(ca.ServingCertPEM, ca.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		h(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return write(name, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: webhook
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: crdplane
contexts:
- name: webhook
  context: {cluster: webhook, user: crdplane}
current-context: webhook
`, srv.URL, base64.StdEncoding.EncodeToString(ca.CACertPEM)))
}

// rawGet GETs path from s with a client certificate (nil: none) and the
// front proxy's X-Remote-User header (when user is set).
func rawGet(t *testing.T, s *server, cert *tls.Certificate, path, user string) (int, string) {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	for _, c := range kc.Clusters {
		roots.AppendCertsFromPEM(c.CertificateAuthorityData)
	}
	tc := &tls.Config{RootCAs: roots}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	if user != "" {
		req.Header.Set("X-Remote-User", user)
		req.Header.Set("X-Remote-Group", "proxied")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
