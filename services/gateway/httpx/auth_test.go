package httpx

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/metadata"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	"github.com/crdplane/crdplane/pkg/enduser"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// pki is a CA able to issue client certificates in tests.
func pki(t testing.TB) *localpki.PKI {
	t.Helper()
	p, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func clientCert(t testing.TB, ca *localpki.PKI, cn string, orgs []string, notBefore time.Time, validity time.Duration) tls.Certificate {
	t.Helper()
	c, k, err := ca.IssueClient(cn, orgs, notBefore, validity)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// webhookServer is a real HTTPS webhook (TokenReview or SubjectAccessReview)
// and the kubeconfig file naming it.
func webhookServer(t testing.TB, h http.HandlerFunc) (kubeconfig string, calls *atomic.Int64) {
	t.Helper()
	ca := pki(t)
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
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: webhook
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: gateway
contexts:
- name: webhook
  context: {cluster: webhook, user: gateway}
current-context: webhook
`, srv.URL, base64.StdEncoding.EncodeToString(ca.CACertPEM))
	return writeFile(t, t.TempDir(), "webhook.kubeconfig", []byte(kc)), calls
}

// tokenReviewer answers TokenReviews: "wh-<name>" is user <name> in group
// webhook-users; anything else is not authenticated.
func tokenReviewer(w http.ResponseWriter, r *http.Request) {
	var tr authnv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil || tr.APIVersion != "authentication.k8s.io/v1" {
		http.Error(w, "bad review", 400)
		return
	}
	if name, ok := strings.CutPrefix(tr.Spec.Token, "wh-"); ok {
		tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: name, UID: "uid-" + name, Groups: []string{"webhook-users"}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(tr)
}

// authSetup is an edge with every authenticator, served over TLS asking
// for client certificates, and the certificates of its clients.
type authSetup struct {
	srv                                               *httptest.Server
	clientCA, otherCA, proxyCA                        *localpki.PKI
	alice, expired, unknown, proxy, otherProxy, carol tls.Certificate
	seen                                              chan http.Header
	tokenReviews                                      *atomic.Int64
}

func newAuthSetup(t *testing.T, authz AuthzConfig) *authSetup {
	s := &authSetup{clientCA: pki(t), otherCA: pki(t), proxyCA: pki(t), seen: make(chan http.Header, 1)}
	dir := t.TempDir()
	now := time.Now().Add(-time.Minute)
	s.alice = clientCert(t, s.clientCA, "alice", []string{"dev", "ops"}, now, time.Hour)
	s.expired = clientCert(t, s.clientCA, "alice", nil, now.Add(-48*time.Hour), time.Hour)
	s.unknown = clientCert(t, s.otherCA, "mallory", []string{"system:masters"}, now, time.Hour)
	s.proxy = clientCert(t, s.proxyCA, "front-proxy-client", nil, now, time.Hour)
	s.otherProxy = clientCert(t, s.proxyCA, "someone-else", nil, now, time.Hour)
	s.carol = clientCert(t, s.clientCA, "front-proxy-client", nil, now, time.Hour) // right name, wrong CA
	var kc string
	kc, s.tokenReviews = webhookServer(t, tokenReviewer)
	cfg := AuthConfig{
		Tokens:                 []string{"admin-token"},
		TokenFile:              writeFile(t, dir, "tokens.csv", []byte("bob-token,bob,42,\"devs,qa\"\n")),
		ClientCAFile:           writeFile(t, dir, "client-ca.crt", s.clientCA.CACertPEM),
		TokenWebhookConfigFile: kc,
		RequestHeader: RequestHeaderConfig{
			ClientCAFile:        writeFile(t, dir, "proxy-ca.crt", s.proxyCA.CACertPEM),
			AllowedNames:        []string{"front-proxy-client"},
			UsernameHeaders:     []string{"X-Remote-User"},
			UIDHeaders:          []string{"X-Remote-Uid"},
			GroupHeaders:        []string{"X-Remote-Group"},
			ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
		},
	}
	a, err := NewAuthenticator(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	az, err := NewAuthorizer(authz)
	if err != nil {
		t.Fatal(err)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := UserFrom(r.Context())
		if !ok {
			http.Error(w, "no user", 500)
			return
		}
		md, _ := metadata.FromOutgoingContext(r.Context())
		ctx := metadata.NewIncomingContext(r.Context(), md)
		eu := enduser.FromIncomingContext(ctx)
		if eu.Name != u.GetName() || !slices.Equal(eu.Groups, u.GetGroups()) {
			http.Error(w, fmt.Sprintf("metadata %+v, user %v", eu, u), 500)
			return
		}
		select {
		case s.seen <- r.Header.Clone():
		default:
		}
		extra := u.GetExtra()
		_ = json.NewEncoder(w).Encode(map[string]any{"name": u.GetName(), "uid": u.GetUID(), "groups": u.GetGroups(), "extra": extra})
	})
	edge := &Edge{Auth: a, Authz: az, MaxBody: 1 << 20, Next: next}
	s.srv = httptest.NewUnstartedServer(edge)
	s.srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

type who struct {
	Name   string              `json:"name"`
	UID    string              `json:"uid"`
	Groups []string            `json:"groups"`
	Extra  map[string][]string `json:"extra"`
}

// do sends a request with the given client certificate (nil: none),
// headers and token.
func (s *authSetup) do(t *testing.T, cert *tls.Certificate, path, token string, headers map[string]string) (int, string) {
	t.Helper()
	tr := s.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = nil
	if cert != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", s.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAuthentication: every authenticator of kube-apiserver recognises its
// users, and what it must refuse is 401 with kube-apiserver's Status: an
// expired or unknown client certificate, front proxy headers from a client
// that is not the front proxy (ignored), a token in the query string.
func TestAuthentication(t *testing.T) {
	s := newAuthSetup(t, AuthzConfig{})
	proxyHeaders := map[string]string{"X-Remote-User": "dave", "X-Remote-Uid": "d-1", "X-Remote-Group": "proxied", "X-Remote-Extra-Scopes": "read"}
	for _, tc := range []struct {
		name    string
		cert    *tls.Certificate
		path    string
		token   string
		headers map[string]string
		want    *who // nil: 401
	}{
		{name: "client certificate", cert: &s.alice, want: &who{Name: "alice", Groups: []string{"dev", "ops", "system:authenticated"}}},
		{name: "expired certificate", cert: &s.expired},
		{name: "unknown CA", cert: &s.unknown},
		{name: "unknown CA with a token", cert: &s.unknown, token: "bob-token", want: &who{Name: "bob", UID: "42", Groups: []string{"devs", "qa", "system:authenticated"}}},
		{name: "token file", token: "bob-token", want: &who{Name: "bob", UID: "42", Groups: []string{"devs", "qa", "system:authenticated"}}},
		{name: "--token", token: "admin-token", want: &who{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}},
		{name: "webhook token", token: "wh-carol", want: &who{Name: "carol", UID: "uid-carol", Groups: []string{"webhook-users", "system:authenticated"}}},
		{name: "webhook refuses", token: "nope"},
		{name: "token in the query string", path: "/apis?access_token=bob-token"},
		{name: "front proxy", cert: &s.proxy, headers: proxyHeaders,
			want: &who{Name: "dave", UID: "d-1", Groups: []string{"proxied", "system:authenticated"}, Extra: map[string][]string{"scopes": {"read"}}}},
		{name: "front proxy headers from a client", cert: &s.alice, headers: proxyHeaders, want: &who{Name: "alice", Groups: []string{"dev", "ops", "system:authenticated"}}},
		{name: "front proxy headers from a proxy CA cert not allowed", cert: &s.otherProxy, headers: proxyHeaders},
		{name: "front proxy name from another CA", cert: &s.carol, headers: proxyHeaders, want: &who{Name: "front-proxy-client", Groups: []string{"system:authenticated"}}},
		{name: "front proxy headers alone", headers: proxyHeaders},
		{name: "anonymous /readyz", path: "/readyz", want: &who{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "anonymous /apis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = "/apis"
			}
			code, body := s.do(t, tc.cert, path, tc.token, tc.headers)
			if tc.want == nil {
				if code != 401 || body != unauthorizedBody {
					t.Fatalf("%d %s, want 401", code, body)
				}
				return
			}
			if code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			var got who
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			// A certificate's user carries its fingerprint, as upstream's.
			if id := got.Extra["authentication.kubernetes.io/credential-id"]; len(id) == 1 && strings.HasPrefix(id[0], "X509SHA256=") {
				delete(got.Extra, "authentication.kubernetes.io/credential-id")
			}
			if len(got.Extra) == 0 {
				got.Extra = nil
			}
			if got.Name != tc.want.Name || got.UID != tc.want.UID || !slices.Equal(got.Groups, tc.want.Groups) || fmt.Sprint(got.Extra) != fmt.Sprint(tc.want.Extra) {
				t.Fatalf("user %+v, want %+v", got, *tc.want)
			}
			// No credential, and no front proxy header, gets past the edge.
			h := <-s.seen
			for k := range h {
				if k == "Authorization" || strings.HasPrefix(k, "X-Remote-") {
					t.Errorf("header %s passed the edge", k)
				}
			}
		})
	}
	// The webhook's answers are cached: carol's token was reviewed once.
	s.do(t, nil, "/apis", "wh-carol", nil)
	if n := s.tokenReviews.Load(); n != 2 { // carol, and "nope" (failures are cached too)
		t.Errorf("%d token reviews, want 2", n)
	}
}

// TestAuthConfigErrors: a file that cannot be read is an error.
func TestAuthConfigErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := writeFile(t, dir, "ca.crt", []byte("not a certificate"))
	for name, cfg := range map[string]AuthConfig{
		"missing token file":      {TokenFile: filepath.Join(dir, "nope.csv")},
		"short token file":        {TokenFile: writeFile(t, dir, "short.csv", []byte("tok,user\n"))},
		"client CA not PEM":       {ClientCAFile: notPEM},
		"missing requestheader":   {RequestHeader: RequestHeaderConfig{ClientCAFile: filepath.Join(dir, "nope.crt")}},
		"missing webhook config":  {TokenWebhookConfigFile: filepath.Join(dir, "nope.kubeconfig")},
		"webhook config not YAML": {TokenWebhookConfigFile: notPEM},
	} {
		if _, err := NewAuthenticator(t.Context(), cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for name, cfg := range map[string]AuthzConfig{
		"unknown mode":           {Modes: []string{"RBAC2"}},
		"webhook without config": {Modes: []string{ModeWebhook}},
		"config without webhook": {Modes: []string{ModeAlwaysAllow}, WebhookConfigFile: notPEM},
		"mode twice":             {Modes: []string{ModeAlwaysAllow, ModeAlwaysAllow}},
	} {
		if _, err := NewAuthorizer(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// sarReviewer answers SubjectAccessReviews: anyone may create the
// authorization.k8s.io reviews; otherwise bob is denied with a reason, eve
// gets no opinion, everyone else is allowed.
func sarReviewer(reviews chan<- authzv1.SubjectAccessReview) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil || sar.APIVersion != "authorization.k8s.io/v1" {
			http.Error(w, "bad review", 400)
			return
		}
		select {
		case reviews <- sar:
		default:
		}
		ra := sar.Spec.ResourceAttributes
		switch {
		case ra != nil && ra.Group == "authorization.k8s.io" && sar.Spec.User == "eve" && strings.HasSuffix(ra.Resource, "subjectaccessreviews") && !strings.HasPrefix(ra.Resource, "self"):
			// eve may not ask about others.
			sar.Status = authzv1.SubjectAccessReviewStatus{}
		case ra != nil && (ra.Group == "authorization.k8s.io" || ra.Group == "authentication.k8s.io" && ra.Resource == "selfsubjectreviews"):
			// Everyone may ask about themselves (RBAC's system:basic-user).
			sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: true}
		case sar.Spec.User == "bob":
			sar.Status = authzv1.SubjectAccessReviewStatus{Denied: true, Reason: "bob may not"}
		case sar.Spec.User == "eve":
			sar.Status = authzv1.SubjectAccessReviewStatus{}
		default:
			sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: true}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sar)
	}
}

// TestWebhookAuthorization: kube-apiserver's request attributes reach the
// SubjectAccessReview webhook; a denial is 403 with kube-apiserver's
// Forbidden Status and wording; answers are cached; system:masters never
// asks; health checks are public; decisions are counted.
func TestWebhookAuthorization(t *testing.T) {
	reviews := make(chan authzv1.SubjectAccessReview, 16)
	kc, sars := webhookServer(t, sarReviewer(reviews))
	s := newAuthSetup(t, AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: kc})
	denied := func() float64 { return counterValue(t, authzDecisions.WithLabelValues(ModeWebhook, "denied")) }
	before := denied()

	const widgets = "/apis/stable.example.com/v1/namespaces/default/widgets"
	for _, tc := range []struct {
		path, token string
		code        int
		body        string
	}{
		{widgets, "bob-token", 403, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.stable.example.com is forbidden: User \"bob\" cannot list resource \"widgets\" in API group \"stable.example.com\" in the namespace \"default\": bob may not","reason":"Forbidden","details":{"group":"stable.example.com","kind":"widgets"},"code":403}` + "\n"},
		{widgets + "/w1/status", "bob-token", 403, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.stable.example.com \"w1\" is forbidden: User \"bob\" cannot get resource \"widgets/status\" in API group \"stable.example.com\" in the namespace \"default\": bob may not","reason":"Forbidden","details":{"name":"w1","group":"stable.example.com","kind":"widgets"},"code":403}` + "\n"},
		{"/apis/stable.example.com/v1/widgets?watch=true", "bob-token", 403, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.stable.example.com is forbidden: User \"bob\" cannot watch resource \"widgets\" in API group \"stable.example.com\" at the cluster scope: bob may not","reason":"Forbidden","details":{"group":"stable.example.com","kind":"widgets"},"code":403}` + "\n"},
		{"/openapi/v2", "bob-token", 403, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"bob\" cannot get path \"/openapi/v2\": bob may not","reason":"Forbidden","details":{},"code":403}` + "\n"},
		{widgets, "wh-eve", 403, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.stable.example.com is forbidden: User \"eve\" cannot list resource \"widgets\" in API group \"stable.example.com\" in the namespace \"default\"","reason":"Forbidden","details":{"group":"stable.example.com","kind":"widgets"},"code":403}` + "\n"},
		{widgets, "wh-carol", 200, ""},
		{widgets, "admin-token", 200, ""},
		{"/readyz", "bob-token", 200, ""},
		{"/version", "", 200, ""},
	} {
		code, body := s.do(t, nil, tc.path, tc.token, nil)
		if code != tc.code || (tc.body != "" && body != tc.body) {
			t.Errorf("%s as %s: %d %s\nwant %d %s", tc.path, tc.token, code, body, tc.code, tc.body)
		}
	}
	// The review of bob's first request: kube-apiserver's attributes.
	first := <-reviews
	ra := first.Spec.ResourceAttributes
	if first.Spec.User != "bob" || first.Spec.UID != "42" || !slices.Equal(first.Spec.Groups, []string{"devs", "qa", "system:authenticated"}) ||
		ra == nil || *ra != (authzv1.ResourceAttributes{Namespace: "default", Verb: "list", Group: "stable.example.com", Version: "v1", Resource: "widgets"}) {
		t.Errorf("review %+v", first.Spec)
	}
	// Cached: bob's list again does not ask; the admin never asked.
	n := sars.Load()
	s.do(t, nil, widgets, "bob-token", nil)
	if sars.Load() != n {
		t.Errorf("a cached denial asked the webhook again")
	}
	if n != 6 { // bob's list, status and watch, bob's /openapi/v2, eve, carol
		t.Errorf("%d reviews, want 6", n)
	}
	if d := denied() - before; d != 5 {
		t.Errorf("%v denials counted, want 5", d)
	}
}

func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestSelfReviews: kubectl auth can-i's SelfSubjectAccessReview answers
// with the authorizers' decision for the requesting user, and
// SelfSubjectRulesReview with their rules (the webhook's: none,
// incomplete).
func TestSelfReviews(t *testing.T) {
	kc, _ := webhookServer(t, sarReviewer(make(chan authzv1.SubjectAccessReview, 16)))
	s := newAuthSetup(t, AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: kc})
	post := func(path, token, body string) (int, string) {
		req, _ := http.NewRequest("POST", s.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const listWidgets = `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"namespace":"default","verb":"list","group":"stable.example.com","resource":"widgets"}}}`
	for _, tc := range []struct {
		token, body string
		code        int
		status      string
	}{
		{"bob-token", listWidgets, 201, `"status":{"allowed":false,"denied":true,"reason":"bob may not"}`},
		{"wh-carol", listWidgets, 201, `"status":{"allowed":true}`},
		{"admin-token", listWidgets, 201, `"status":{"allowed":true}`},
		{"wh-eve", `{"spec":{"nonResourceAttributes":{"path":"/healthz","verb":"get"}}}`, 201, `"status":{"allowed":false}`},
		{"bob-token", `{"spec":{}}`, 422, `"message":".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"`},
	} {
		code, body := post(selfAccessReviewPath, tc.token, tc.body)
		if code != tc.code || !strings.Contains(body, tc.status) {
			t.Errorf("%s %s: %d %s", tc.token, tc.body, code, body)
		}
	}
	code, body := post(selfRulesReviewPath, "wh-carol", `{"spec":{"namespace":"default"}}`)
	if code != 201 || !strings.Contains(body, `"status":{"resourceRules":[],"nonResourceRules":[],"incomplete":true,"evaluationError":"webhook authorizer does not support user rule resolution"}`) {
		t.Errorf("rules review: %d %s", code, body)
	}
	if code, body := post(selfRulesReviewPath, "wh-carol", `{"spec":{}}`); code != 400 || !strings.Contains(body, "no namespace on request") {
		t.Errorf("rules review without a namespace: %d %s", code, body)
	}
}
