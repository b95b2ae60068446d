package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCacheControl: every answer carries kube-apiserver's one
// Cache-Control value: `no-cache, private` by default (errors and
// unauthenticated requests included), `public` on aggregated discovery
// (its 304 too) and `public, immutable` on an OpenAPI v3 document fetched
// by its hash.
func TestCacheControl(t *testing.T) {
	g := newTestGateway(t)
	one := func(resp *http.Response, want, what string) {
		t.Helper()
		if got := resp.Header.Values("Cache-Control"); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: Cache-Control %q, want one %q", what, got, want)
		}
	}
	for _, path := range []string{"/apis", "/api/v1/namespaces", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "/version", "/healthz", "/openapi/v2", "/openapi/v3", "/apis/nothing.example.com/v1/things"} {
		resp, _ := g.do(http.MethodGet, path, nil)
		one(resp, "no-cache, private", "GET "+path)
	}
	req, err := http.NewRequest(http.MethodGet, g.srv.URL+"/apis", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := g.srv.Client().Do(req) // no token: 401
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %d", resp.StatusCode)
	}
	one(resp, "no-cache, private", "401")

	const aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	resp, _ = g.do(http.MethodGet, "/apis", nil, "Accept", aggregated)
	one(resp, "public", "aggregated discovery")
	etag := resp.Header.Get("Etag")
	resp, _ = g.do(http.MethodGet, "/apis", nil, "Accept", aggregated, "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("aggregated discovery with its ETag: %d, want 304", resp.StatusCode)
	}
	one(resp, "public", "aggregated discovery 304")

	_, body := g.do(http.MethodGet, "/openapi/v3", nil)
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}
	url := index.Paths["apis/apiextensions.k8s.io/v1"].ServerRelativeURL
	if !strings.Contains(url, "?hash=") {
		t.Fatalf("no hashed URL in the OpenAPI v3 index: %s", body)
	}
	resp, _ = g.do(http.MethodGet, url, nil)
	one(resp, "public, immutable", "GET "+url)
	resp, _ = g.do(http.MethodGet, "/openapi/v3/apis/apiextensions.k8s.io/v1", nil)
	one(resp, "no-cache, private", "OpenAPI v3 without a hash")
}
