package gateway

import (
	"net/http"
	"testing"
)

// TestWebhookConversion checks that a CRD with the Webhook strategy
// converts through the converter service: writes at the request version
// are stored at the storage version, and reads (lists in one call) come
// back at the request version.
func TestWebhookConversion(t *testing.T) {
	g := newTestGateway(t)
	crd := cronTabCRD()
	spec := crd["spec"].(map[string]any)
	spec["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
		"conversionReviewVersions": []any{"v1"},
		"clientConfig":             map[string]any{"url": "https://example.invalid/convert"},
	}}
	g.expect(http.StatusCreated, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)

	const v1beta1 = "/apis/stable.example.com/v1beta1/namespaces/default/crontabs"
	for _, n := range []string{"a", "b"} {
		o := cronTab(n, map[string]any{})
		o["apiVersion"] = "stable.example.com/v1beta1"
		c := g.expect(http.StatusCreated, "POST", v1beta1, o)
		if c["apiVersion"] != "stable.example.com/v1beta1" {
			t.Fatalf("create result at %v", c["apiVersion"])
		}
	}
	stored, _, err := g.fakes.storage.kv.get("/registry/stable.example.com/crontabs/default/a", anyGR, "a")
	if err != nil || objectAPIVersion(stored) != "stable.example.com/v1" {
		t.Fatalf("stored at %q: %v", objectAPIVersion(stored), err)
	}
	before := len(g.fakes.converter.requests())
	list := g.expect(http.StatusOK, "GET", v1beta1, nil)
	reqs := g.fakes.converter.requests()[before:]
	if len(reqs) != 1 || len(reqs[0].GetObjects()) != 2 || reqs[0].GetDesiredApiVersion() != "stable.example.com/v1beta1" {
		t.Fatalf("list conversion calls: %d", len(reqs))
	}
	if reqs[0].GetCrd().GetName() != "crontabs.stable.example.com" || reqs[0].GetCrd().GetUid() == "" {
		t.Fatalf("CRD ref: %v", reqs[0].GetCrd())
	}
	for _, it := range list["items"].([]any) {
		if it.(map[string]any)["apiVersion"] != "stable.example.com/v1beta1" {
			t.Fatalf("list item at %v", it.(map[string]any)["apiVersion"])
		}
	}
	// Reads at the storage version need no conversion.
	before = len(g.fakes.converter.requests())
	g.expect(http.StatusOK, "GET", crontabs+"/a", nil)
	if n := len(g.fakes.converter.requests()) - before; n != 0 {
		t.Fatalf("%d conversions for a storage-version read", n)
	}
	// Admission ran at the request version.
	calls := g.fakes.validator.requests()
	if last := calls[len(calls)-1]; last.GetVersion() != "v1beta1" || objectAPIVersion(last.GetObject()) != "stable.example.com/v1beta1" {
		t.Fatalf("admitted at %q / %q", last.GetVersion(), objectAPIVersion(last.GetObject()))
	}
}
