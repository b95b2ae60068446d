package httpx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkEdgeAudit is the edge's cost per request with auditing off and
// on: policies of level None, Metadata (the log file, blocking as
// kube-apiserver's default, and batch) and RequestResponse, for a GET and a
// create of a small object. The handler behind the edge answers a small
// JSON object.
func BenchmarkEdgeAudit(b *testing.B) {
	dir := b.TempDir()
	authn, err := NewAuthenticator(b.Context(), AuthConfig{Tokens: []string{"admin-token"}})
	if err != nil {
		b.Fatal(err)
	}
	authz, err := NewAuthorizer(AuthzConfig{})
	if err != nil {
		b.Fatal(err)
	}
	const obj = `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default"},"spec":{"size":3,"color":"blue"}}`
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, obj)
	})
	policy := func(level string) string {
		return writeFile(b, dir, level+".yaml", []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: "+level+"\n"))
	}
	for _, c := range []struct {
		name string
		cfg  *AuditConfig
	}{
		{"off", nil},
		{"None", &AuditConfig{PolicyFile: policy("None"), LogPath: filepath.Join(dir, "none.log")}},
		{"Metadata", &AuditConfig{PolicyFile: policy("Metadata"), LogPath: filepath.Join(dir, "metadata.log")}},
		{"Metadata-batch", &AuditConfig{PolicyFile: policy("Metadata"), LogPath: filepath.Join(dir, "batch.log"), LogMode: AuditModeBatch}},
		{"RequestResponse", &AuditConfig{PolicyFile: policy("RequestResponse"), LogPath: filepath.Join(dir, "rr.log")}},
	} {
		var auditor *Auditor
		if c.cfg != nil {
			if auditor, err = NewAuditor(*c.cfg); err != nil {
				b.Fatal(err)
			}
			if err := auditor.Run(); err != nil {
				b.Fatal(err)
			}
		}
		edge := &Edge{Auth: authn, Authz: authz, Audit: auditor, MaxBody: 1 << 20, Next: next}
		for _, req := range []struct{ name, method, body string }{{"get", "GET", ""}, {"create", "POST", obj}} {
			b.Run(c.name+"/"+req.name, func(b *testing.B) {
				path := "/apis/stable.example.com/v1/namespaces/default/widgets"
				if req.method == "GET" {
					path += "/w1"
				}
				for b.Loop() {
					r := httptest.NewRequest(req.method, path, strings.NewReader(req.body))
					r.Header.Set("Authorization", "Bearer admin-token")
					r.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					edge.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				}
			})
		}
		auditor.Shutdown()
	}
}
