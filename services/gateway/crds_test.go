package gateway

import (
	"net/http"
	"testing"
)

// TestOpenAPIV3WithoutDocument: a group-version without an OpenAPI v3
// document is answered as upstream's handler does: 200, no body, no
// Content-Type (and no ETag); a published one is JSON.
func TestOpenAPIV3WithoutDocument(t *testing.T) {
	g := newTestGateway(t)
	resp, body := g.do("GET", "/openapi/v3/apis/nothing.example.com/v1", nil)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != "" || resp.Header.Get("ETag") != "" {
		t.Fatalf("no document: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = g.do("GET", "/openapi/v3/apis/apiextensions.k8s.io/v1", nil)
	if resp.StatusCode != 200 || len(body) == 0 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("apiextensions.k8s.io/v1: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestCreateOptionsAsV133: invalid CreateOptions are v1.33's 422, the value
// rendered with %#v.
func TestCreateOptionsAsV133(t *testing.T) {
	g := newTestGateway(t)
	s := g.expect(http.StatusUnprocessableEntity, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=Some", cronTabCRD())
	if want := `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Some"}: supported values: "All"`; s["message"] != want {
		t.Fatalf("%v", s["message"])
	}
}
