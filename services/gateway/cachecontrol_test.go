package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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

// TestOpenAPINotModified: the OpenAPI documents answer If-None-Match as
// upstream's ServeContent does: 304 without a body or Content-Type, with
// the ETag and Cache-Control, for the document's own ETag (weak or in a
// list) and for "*"; 200 with the document for another ETag.
func TestOpenAPINotModified(t *testing.T) {
	g := newTestGateway(t)
	for _, path := range []string{"/openapi/v3", "/openapi/v3/apis/apiextensions.k8s.io/v1", "/openapi/v2"} {
		resp, body := g.do(http.MethodGet, path, nil)
		etag := resp.Header.Get("Etag")
		if resp.StatusCode != http.StatusOK || etag == "" || len(body) == 0 {
			t.Fatalf("GET %s: %d, ETag %q, %d bytes", path, resp.StatusCode, etag, len(body))
		}
		for _, tc := range []struct {
			inm  string
			want int
		}{
			{etag, http.StatusNotModified},
			{"W/" + etag, http.StatusNotModified},
			{`"other", ` + etag, http.StatusNotModified},
			{"*", http.StatusNotModified},
			{`"other"`, http.StatusOK},
		} {
			resp, got := g.do(http.MethodGet, path, nil, "If-None-Match", tc.inm)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET %s, If-None-Match %s: %d, want %d", path, tc.inm, resp.StatusCode, tc.want)
			}
			if resp.Header.Get("Etag") != etag {
				t.Fatalf("GET %s, If-None-Match %s: ETag %q, want %q", path, tc.inm, resp.Header.Get("Etag"), etag)
			}
			if tc.want == http.StatusOK {
				if string(got) != string(body) {
					t.Fatalf("GET %s, If-None-Match %s: another body", path, tc.inm)
				}
				continue
			}
			if len(got) != 0 || resp.Header.Get("Content-Type") != "" || resp.Header.Get("Cache-Control") != "no-cache, private" {
				t.Fatalf("GET %s, If-None-Match %s: 304 with %d bytes, Content-Type %q, Cache-Control %q", path, tc.inm, len(got), resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
			}
		}
	}
}

// TestOpenAPIConditional: the documents carry Last-Modified and answer
// the date preconditions and If-Match as net/http's ServeContent, which
// upstream's handlers serve them with: If-Modified-Since not older than
// the document is a 304 (without Last-Modified, as there is an ETag),
// unless If-None-Match is sent; If-Match or If-Unmodified-Since that
// fails is a 412 without a body.
func TestOpenAPIConditional(t *testing.T) {
	g := newTestGateway(t)
	for _, path := range []string{"/openapi/v3", "/openapi/v3/apis/apiextensions.k8s.io/v1", "/openapi/v2"} {
		resp, body := g.do(http.MethodGet, path, nil)
		lm, err := http.ParseTime(resp.Header.Get("Last-Modified"))
		if resp.StatusCode != http.StatusOK || err != nil || time.Since(lm) > time.Hour || time.Until(lm) > time.Second {
			t.Fatalf("GET %s: %d, Last-Modified %q (%v)", path, resp.StatusCode, resp.Header.Get("Last-Modified"), err)
		}
		etag := resp.Header.Get("Etag")
		at := func(d time.Duration) string { return lm.Add(d).Format(http.TimeFormat) }
		for _, tc := range []struct {
			header []string
			want   int
		}{
			{[]string{"If-Modified-Since", at(0)}, http.StatusNotModified},
			{[]string{"If-Modified-Since", at(time.Hour)}, http.StatusNotModified},
			{[]string{"If-Modified-Since", at(-time.Second)}, http.StatusOK},
			{[]string{"If-Modified-Since", "not a date"}, http.StatusOK},
			{[]string{"If-None-Match", `"other"`, "If-Modified-Since", at(time.Hour)}, http.StatusOK},
			{[]string{"If-Match", `"other"`}, http.StatusPreconditionFailed},
			{[]string{"If-Match", etag}, http.StatusOK},
			{[]string{"If-Unmodified-Since", at(-time.Second)}, http.StatusPreconditionFailed},
			{[]string{"If-Unmodified-Since", at(0)}, http.StatusOK},
		} {
			resp, got := g.do(http.MethodGet, path, nil, tc.header...)
			if resp.StatusCode != tc.want || resp.Header.Get("Etag") != etag {
				t.Fatalf("GET %s %q: %d, ETag %q (want %d, %q)", path, tc.header, resp.StatusCode, resp.Header.Get("Etag"), tc.want, etag)
			}
			switch tc.want {
			case http.StatusOK:
				if !bytes.Equal(got, body) || resp.Header.Get("Last-Modified") == "" {
					t.Fatalf("GET %s %q: another body, or no Last-Modified", path, tc.header)
				}
			case http.StatusNotModified:
				if len(got) != 0 || resp.Header.Get("Last-Modified") != "" || resp.Header.Get("Content-Type") != "" {
					t.Fatalf("GET %s %q: 304 with %d bytes, Last-Modified %q, Content-Type %q", path, tc.header, len(got), resp.Header.Get("Last-Modified"), resp.Header.Get("Content-Type"))
				}
			case http.StatusPreconditionFailed:
				if len(got) != 0 || resp.Header.Get("Last-Modified") == "" || resp.Header.Get("Content-Type") == "" {
					t.Fatalf("GET %s %q: 412 with %d bytes, Last-Modified %q, Content-Type %q", path, tc.header, len(got), resp.Header.Get("Last-Modified"), resp.Header.Get("Content-Type"))
				}
			}
		}
	}
}

// TestOpenAPIAtHash: a v3 document asked for at its hash (the index's
// serverRelativeURL) may be cached forever; at a stale hash it is
// redirected to the current one, as upstream's handler does.
func TestOpenAPIAtHash(t *testing.T) {
	g := newTestGateway(t)
	const path = "/openapi/v3/apis/apiextensions.k8s.io/v1"
	resp, body := g.do(http.MethodGet, path, nil)
	etag := resp.Header.Get("Etag")
	if resp.StatusCode != http.StatusOK || len(etag) < 3 {
		t.Fatalf("GET %s: %d, ETag %q", path, resp.StatusCode, etag)
	}
	hash := strings.Trim(etag, `"`)
	noFollow := *g.srv.Client()
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(p string, header ...string) (*http.Response, []byte) {
		t.Helper()
		return g.doWith(&noFollow, http.MethodGet, p, nil, header...)
	}

	resp, got := get(path + "?hash=" + hash)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("at its hash: %d, %d bytes (want 200, %d)", resp.StatusCode, len(got), len(body))
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "public, immutable" {
		t.Fatalf("at its hash: Cache-Control %q", cc)
	}
	if vary := resp.Header.Get("Vary"); vary != "Accept" {
		t.Fatalf("at its hash: Vary %q", vary)
	}
	exp, err := time.Parse(time.RFC1123, resp.Header.Get("Expires"))
	if err != nil || exp.Before(time.Now().AddDate(0, 11, 0)) {
		t.Fatalf("at its hash: Expires %q (%v), want a year from now", resp.Header.Get("Expires"), err)
	}

	resp, _ = get(path+"?hash="+hash, "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("Cache-Control") != "public, immutable" || resp.Header.Get("Expires") == "" {
		t.Fatalf("at its hash, If-None-Match: %d, Cache-Control %q, Expires %q", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Expires"))
	}

	for _, stale := range []string{"0123", strings.ToLower(hash)} {
		resp, got = get(path+"?hash="+stale, "If-None-Match", etag)
		want := path + "?hash=" + hash
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want || len(got) != 0 {
			t.Fatalf("at hash %s: %d, Location %q, %d bytes (want 301 to %s, no body)", stale, resp.StatusCode, resp.Header.Get("Location"), len(got), want)
		}
		if resp.Header.Get("Etag") != etag || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("at hash %s: ETag %q, Content-Type %q", stale, resp.Header.Get("Etag"), resp.Header.Get("Content-Type"))
		}
	}

	// the index and /openapi/v2 do not look at a hash
	for _, p := range []string{"/openapi/v3?hash=0123", "/openapi/v2?hash=0123"} {
		if resp, _ := get(p); resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") == "public, immutable" {
			t.Fatalf("GET %s: %d, Cache-Control %q", p, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
	}
}
