package aggregator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// TestProxyClientCertReload: the proxy client certificate's files are
// followed, as kube-apiserver's --proxy-client-cert-file: once they
// change, the backends are called with the new certificate.
func TestProxyClientCertReload(t *testing.T) {
	b := newBackend(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	issue := func(cn string) {
		crt, key, err := b.pki.IssueClient(cn, nil, time.Now().Add(-time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(certFile, crt, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	issue("front-proxy-a")
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles("aggregator-proxy-cert", certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	o := Overrides{}
	if err := o.Set("wardle/api:443=" + b.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
	a := New(Config{Resolver: NewResolver(o), ProxyClientCertKey: content})
	s := wardle(b.caBundle(), apiregistrationv1.ConditionTrue)
	a.replace(map[string]*apiregistrationv1.APIService{s.Name: s})
	presented := func() string {
		t.Helper()
		rec := serve(a, httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/flunders", nil), &user.DefaultInfo{Name: "alice"})
		if rec.Code != http.StatusOK {
			t.Fatalf("= %d %s", rec.Code, rec.Body.String())
		}
		r := b.last()
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return ""
		}
		return r.TLS.PeerCertificates[0].Subject.CommonName
	}
	if got := presented(); got != "front-proxy-a" {
		t.Fatalf("presented %q", got)
	}
	issue("front-proxy-b")
	if err := content.RunOnce(context.Background()); err != nil { // what Run does when the files change
		t.Fatal(err)
	}
	if got := presented(); got != "front-proxy-b" {
		t.Fatalf("after the change: presented %q", got)
	}
}
