package conformance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestRecordAPIExtensionsOpenAPI records the reference's OpenAPI v3
// document of apiextensions.k8s.io/v1 (the go-restful routes of the CRD
// API: its paths, the deprecated watch routes, the group-version's
// discovery, and v1.33's models) as it serves it, byte for byte, into
// CONFORMANCE_RECORD_OPENAPI (the registry's
// services/registry/openapi/v133_apiextensions_v1.json): crdplane serves
// that document as it is. hack/record-apiextensions-openapi.sh runs it.
func TestRecordAPIExtensionsOpenAPI(t *testing.T) {
	out := os.Getenv("CONFORMANCE_RECORD_OPENAPI")
	if out == "" {
		t.Skip("CONFORMANCE_RECORD_OPENAPI is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	up, err := StartUpstream(ctx, binary(t, "UPSTREAM_BIN", "upstream"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer up.Stop()
	resp, err := up.Do(ctx, http.MethodGet, "/openapi/v3/apis/apiextensions.k8s.io/v1", http.Header{"Accept": {"application/json"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET the document: %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
	if err := os.WriteFile(out, body, 0o644); err != nil { //nolint:gosec // a recorded document, committed
		t.Fatal(err)
	}
	fmt.Printf("recorded %d bytes into %s\n", len(body), out)
}
