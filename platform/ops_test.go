package platform_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
)

// TestOpsEndpoints: crdplane run's --ops-listen serves the metrics of the
// services in the process and readiness; --profiling adds Go's profiles,
// which are absent without it.
func TestOpsEndpoints(t *testing.T) {
	get := func(t *testing.T, url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url) //nolint:noctx // a test on loopback
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name      string
		profiling bool
	}{
		{"without profiling", false},
		{"with profiling", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := platformtest.StartConfig(t, platform.Config{OpsAddr: "127.0.0.1:0", Profiling: tt.profiling})
			if p.OpsURL == "" {
				t.Fatal("no OpsURL")
			}
			if code, body := get(t, p.OpsURL+"/readyz"); code != http.StatusOK || body != "ok" {
				t.Fatalf("/readyz: %d %q", code, body)
			}
			code, body := get(t, p.OpsURL+"/metrics")
			if code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
				t.Fatalf("/metrics: %d, %d bytes", code, len(body))
			}
			code, body = get(t, p.OpsURL+"/debug/pprof/heap?debug=1")
			switch {
			case tt.profiling && (code != http.StatusOK || !strings.Contains(body, "heap profile")):
				t.Fatalf("heap profile: %d %.80q", code, body)
			case !tt.profiling && code != http.StatusNotFound:
				t.Fatalf("heap profile without --profiling: %d", code)
			}
		})
	}
}
