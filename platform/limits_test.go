package platform_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/gateway"
)

// TestGatewayLimits: the platform's gateway applies the limits it is given
// (crdplane run's --max-watches-per-client and the like), and serves
// /readyz once its backends are ready.
func TestGatewayLimits(t *testing.T) {
	p, _ := platformtest.StartConfig(t, platform.Config{Limits: gateway.Limits{MaxWatchesPerClient: 1}})
	client := platformtest.HTTPClient(p)
	get := func(ctx context.Context, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", p.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+p.Token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := get(context.Background(), "/readyz?verbose=true"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const watch = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true"
	if resp := get(ctx, watch); resp.StatusCode != http.StatusOK {
		t.Fatalf("first watch: %d", resp.StatusCode)
	}
	if resp := get(ctx, watch); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second watch: %d %v", resp.StatusCode, resp.Header)
	}
}
