package gateway

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// conversionWebhook is a real ConversionReview v1 webhook over TLS: it
// rewrites apiVersion (the versions share a schema).
func conversionWebhook(t *testing.T) (url string, caBundle []byte) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, o := range review.Request.Objects {
			var obj map[string]any
			if err := json.Unmarshal(o.Raw, &obj); err != nil {
				http.Error(w, "bad object", http.StatusBadRequest)
				return
			}
			obj["apiVersion"] = review.Request.DesiredAPIVersion
			b, _ := json.Marshal(obj)
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
		}
		review.Request, review.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/convert", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestWebhookConversion checks that a CRD with the Webhook strategy
// converts through the converter service: writes at the request version
// are stored at the storage version, and reads (lists in one call) come
// back at the request version.
func TestWebhookConversion(t *testing.T) {
	g := newTestGateway(t)
	url, ca := conversionWebhook(t)
	crd := cronTabCRD()
	spec := crd["spec"].(map[string]any)
	spec["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
		"conversionReviewVersions": []any{"v1"},
		"clientConfig":             map[string]any{"url": url, "caBundle": ca},
	}}
	g.createCRD(crd)

	const v1beta1 = "/apis/stable.example.com/v1beta1/namespaces/default/crontabs"
	o := cronTab("a", map[string]any{})
	o["apiVersion"] = "stable.example.com/v1beta1"
	resp, body := g.do("POST", v1beta1, o)
	if resp.StatusCode != http.StatusCreated || objectAPIVersion(body) != "stable.example.com/v1beta1" {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	o = cronTab("b", map[string]any{})
	o["apiVersion"] = "stable.example.com/v1beta1"
	if c := g.expect(http.StatusCreated, "POST", v1beta1, o); c["apiVersion"] != "stable.example.com/v1beta1" {
		t.Fatalf("create result at %v", c["apiVersion"])
	}
	stored, err := g.backends.StorageClient.Get(t.Context(), &storagev1.GetRequest{Key: "/registry/stable.example.com/crontabs/default/a"})
	if err != nil || objectAPIVersion(stored.GetObject()) != "stable.example.com/v1" {
		t.Fatalf("stored at %q: %v", objectAPIVersion(stored.GetObject()), err)
	}
	before := g.backends.Converts.Len()
	list := g.expect(http.StatusOK, "GET", v1beta1, nil)
	reqs := g.backends.Converts.Requests()[before:]
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
	before = g.backends.Converts.Len()
	g.expect(http.StatusOK, "GET", crontabs+"/a", nil)
	if n := g.backends.Converts.Len() - before; n != 0 {
		t.Fatalf("%d conversions for a storage-version read", n)
	}
	// Admission ran at the request version.
	calls := g.backends.Admits.Requests()
	if last := calls[len(calls)-1]; last.GetVersion() != "v1beta1" || objectAPIVersion(last.GetObject()) != "stable.example.com/v1beta1" {
		t.Fatalf("admitted at %q / %q", last.GetVersion(), objectAPIVersion(last.GetObject()))
	}
}
