package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestHeaderAndURLLimits: a request whose header block (URL included) is
// over 1 MiB is refused before any handler runs, with net/http's 431 as
// kube-apiserver answers it; one just under is served; the server keeps
// serving. (Body limits, YAML aliases and nesting depth are compared with
// upstream by the conformance oracle: conformance/cases/395-limits.yaml.)
func TestHeaderAndURLLimits(t *testing.T) {
	s := startServer(t, "")
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// HTTP/1.1, so that the server's own answer is seen: an HTTP/2 client
	// refuses to send a header list over the limit the server advertises.
	tlsConf, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
	get := func(t *testing.T, path string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.BearerToken != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %.60s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name     string
		path     string
		hdr      map[string]string
		code     int
		contains string
	}{
		{"header over 1 MiB", "/version", map[string]string{"X-Big": strings.Repeat("a", 1100000)}, http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large"},
		{"URL over 1 MiB", "/version?x=" + strings.Repeat("a", 1100000), nil, http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large"},
		{"header under 1 MiB", "/version", map[string]string{"X-Big": strings.Repeat("a", 900000)}, http.StatusOK, `"gitVersion": "v1.33.`},
		{"a 100 KB label selector", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?labelSelector=" + strings.Repeat("a", 100000), nil, http.StatusBadRequest, "unable to parse requirement"},
		{"still serving", "/readyz", nil, http.StatusOK, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, tc.path, tc.hdr)
			if code != tc.code || !strings.Contains(body, tc.contains) {
				t.Fatalf("got %d %.200q, want %d containing %q", code, body, tc.code, tc.contains)
			}
		})
	}
}
