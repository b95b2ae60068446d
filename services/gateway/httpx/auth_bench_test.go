package httpx

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
)

// BenchmarkEdgeAuth is the edge's cost per request with each way to
// authenticate, under AlwaysAllow and under a Webhook authorizer whose
// answer is cached (the common case: upstream's cache holds allowed
// answers 5m). The handler behind the edge does nothing.
func BenchmarkEdgeAuth(b *testing.B) {
	ca := pki(b)
	dir := b.TempDir()
	cert := clientCert(b, ca, "alice", []string{"dev"}, time.Now().Add(-time.Minute), time.Hour)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		b.Fatal(err)
	}
	tokenKC, _ := webhookServer(b, tokenReviewer)
	sarKC, _ := webhookServer(b, sarReviewer(make(chan authzv1.SubjectAccessReview, 1)))
	authn, err := NewAuthenticator(b.Context(), AuthConfig{
		Tokens:                 []string{"admin-token"},
		TokenFile:              writeFile(b, dir, "tokens.csv", []byte("dan-token,dan,42,devs\n")),
		ClientCAFile:           writeFile(b, dir, "ca.crt", ca.CACertPEM),
		TokenWebhookConfigFile: tokenKC,
	})
	if err != nil {
		b.Fatal(err)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, mode := range []struct {
		name string
		cfg  AuthzConfig
	}{
		{"AlwaysAllow", AuthzConfig{}},
		{"Webhook", AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: sarKC}},
	} {
		authz, err := NewAuthorizer(mode.cfg)
		if err != nil {
			b.Fatal(err)
		}
		edge := &Edge{Auth: authn, Authz: authz, MaxBody: 1 << 20, Next: next}
		for _, c := range []struct {
			name  string
			token string
			cert  bool
		}{
			{"token-file", "dan-token", false},
			{"client-cert", "", true},
			{"webhook-token", "wh-carol", false},
		} {
			b.Run(mode.name+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					r := httptest.NewRequest("GET", "/apis/stable.example.com/v1/namespaces/default/widgets", nil)
					if c.token != "" {
						r.Header.Set("Authorization", "Bearer "+c.token)
					}
					if c.cert {
						r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
					}
					w := httptest.NewRecorder()
					edge.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				}
			})
		}
	}
	// The edge without authentication work: the --token set alone.
	b.Run("baseline/token", func(b *testing.B) {
		edge := &Edge{Tokens: NewTokenSet([]string{"admin-token"}), MaxBody: 1 << 20, Next: next}
		for b.Loop() {
			r := httptest.NewRequest("GET", "/apis/stable.example.com/v1/namespaces/default/widgets", nil)
			r.Header.Set("Authorization", "Bearer admin-token")
			w := httptest.NewRecorder()
			edge.ServeHTTP(w, r)
		}
	})
}
