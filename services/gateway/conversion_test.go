package gateway

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdplane/crdplane/pkg/jsonscan"
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
	// The creates' answers were converted from the stored objects: a list
	// of the same objects (uid and resourceVersion) is served from the
	// cache of converted objects, without a call.
	before := g.backends.Converts.Len()
	g.expect(http.StatusOK, "GET", v1beta1, nil)
	if n := g.backends.Converts.Len() - before; n != 0 {
		t.Fatalf("%d conversion calls for objects converted before", n)
	}
	// Not cached: the list goes in one call.
	g.svc.converted.Forget(g.backends.Converts.Requests()[0].GetCrd().GetUid())
	before = g.backends.Converts.Len()
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

// TestConversionPrunesToTargetSchema: an object converted to another
// version carries only what that version's schema specifies, as upstream's
// schemaCoercingConverter prunes after every conversion: reads at a version
// other than the storage version (single objects and lists), and writes at
// another version, stored pruned to the storage version's schema. Under
// None conversion a version with the same schema keeps everything; what a
// webhook adds is pruned too.
func TestConversionPrunesToTargetSchema(t *testing.T) {
	props := func(extra ...string) map[string]any {
		p := map[string]any{
			"x":      map[string]any{"type": "string"},
			"nested": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
		}
		for _, e := range extra {
			switch e {
			case "nested.b":
				p["nested"].(map[string]any)["properties"].(map[string]any)["b"] = map[string]any{"type": "string"}
			default:
				p[e] = map[string]any{"type": "string"}
			}
		}
		return map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
			"spec": map[string]any{"type": "object", "properties": p},
		}}}
	}
	version := func(name string, storage bool, schema map[string]any) map[string]any {
		return map[string]any{"name": name, "served": true, "storage": storage, "schema": schema}
	}
	full := map[string]any{"x": "1", "only1": "o", "nested": map[string]any{"a": "a", "b": "b"}}
	// The spec read at each version: v1 (storage) and v3 share a schema.
	want := map[string]map[string]any{"v1": full, "v2": {"x": "1", "nested": map[string]any{"a": "a"}}, "v3": full}
	for _, tc := range []struct {
		name    string
		webhook bool
	}{{name: "None"}, {name: "Webhook", webhook: true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t)
			crd := map[string]any{
				"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
				"metadata": map[string]any{"name": "things.conv.example.com"},
				"spec": map[string]any{"group": "conv.example.com", "scope": "Namespaced",
					"names": map[string]any{"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
					"versions": []any{
						version("v1", true, props("only1", "nested.b")),
						version("v2", false, props("only2")),
						version("v3", false, props("only1", "nested.b")),
					}},
			}
			if tc.webhook {
				url, ca := addingConversionWebhook(t)
				crd["spec"].(map[string]any)["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
					"conversionReviewVersions": []any{"v1"},
					"clientConfig":             map[string]any{"url": url, "caBundle": ca},
				}}
			}
			g.createCRD(crd)
			at := func(v string) string { return "/apis/conv.example.com/" + v + "/namespaces/default/things" }
			thing := func(v, name string, spec map[string]any) map[string]any {
				return map[string]any{"apiVersion": "conv.example.com/" + v, "kind": "Thing", "metadata": map[string]any{"name": name}, "spec": spec}
			}
			g.expect(http.StatusCreated, "POST", at("v1"), thing("v1", "a", full))
			for v, want := range want {
				if got := g.expect(http.StatusOK, "GET", at(v)+"/a", nil)["spec"]; !reflect.DeepEqual(got, want) {
					t.Errorf("GET at %s: spec %v, want %v", v, got, want)
				}
				items := g.expect(http.StatusOK, "GET", at(v), nil)["items"].([]any)
				if got := items[0].(map[string]any)["spec"]; len(items) != 1 || !reflect.DeepEqual(got, want) {
					t.Errorf("list at %s: spec %v, want %v", v, got, want)
				}
			}
			// A write at v2 is stored pruned to v1's schema.
			g.expect(http.StatusCreated, "POST", at("v2"), thing("v2", "b", map[string]any{"x": "2", "only2": "o"}))
			for _, v := range []string{"v1", "v2"} {
				if got := g.expect(http.StatusOK, "GET", at(v)+"/b", nil)["spec"]; !reflect.DeepEqual(got, map[string]any{"x": "2"}) {
					t.Errorf("v2 write read at %s: spec %v, want only x", v, got)
				}
			}
		})
	}
}

// addingConversionWebhook is conversionWebhook that also adds
// spec.fromWebhook, which no schema specifies.
func addingConversionWebhook(t *testing.T) (url string, caBundle []byte) {
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
			if spec, ok := obj["spec"].(map[string]any); ok {
				spec["fromWebhook"] = true
			}
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

// objectAPIVersion reads an object's apiVersion ("" when it has none that
// is a string), as the gateway's conversion does.
func objectAPIVersion(obj []byte) string {
	raw, _, _ := jsonscan.Lookup(obj, "apiVersion")
	v, _ := jsonscan.String(raw)
	return v
}

// labellingWebhook is conversionWebhook that also labels every object it
// converts by=<by> (a webhook may change labels).
func labellingWebhook(t *testing.T, by string) (url string, caBundle []byte) {
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
			_ = json.Unmarshal(o.Raw, &obj)
			obj["apiVersion"] = review.Request.DesiredAPIVersion
			obj["metadata"].(map[string]any)["labels"] = map[string]any{"by": by}
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

// TestConvertedObjectsCache: a read at another version is converted once
// per object resourceVersion; a new resourceVersion, and a CRD update that
// points the webhook elsewhere (new generation), convert again, never
// serving the previous webhook's answer.
func TestConvertedObjectsCache(t *testing.T) {
	g := newTestGateway(t)
	urlA, caA := labellingWebhook(t, "a")
	urlB, caB := labellingWebhook(t, "b")
	crd := cronTabCRD()
	crd["spec"].(map[string]any)["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
		"conversionReviewVersions": []any{"v1"},
		"clientConfig":             map[string]any{"url": urlA, "caBundle": caA},
	}}
	g.createCRD(crd)
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{}))
	const at = "/apis/stable.example.com/v1beta1/namespaces/default/crontabs/a"
	read := func(wantBy string, wantCalls int) map[string]any {
		t.Helper()
		before := g.backends.Converts.Len()
		o := g.expect(http.StatusOK, "GET", at, nil)
		if by := meta(o)["labels"].(map[string]any)["by"]; by != wantBy || g.backends.Converts.Len()-before != wantCalls {
			t.Fatalf("by=%v after %d conversion calls; want by=%s after %d", by, g.backends.Converts.Len()-before, wantBy, wantCalls)
		}
		return o
	}
	read("a", 1)
	o := read("a", 0) // cached
	// A new resourceVersion (written at the storage version).
	delete(meta(o), "labels")
	meta(o)["annotations"] = map[string]any{"changed": "yes"}
	o["apiVersion"] = "stable.example.com/v1"
	g.expect(http.StatusOK, "PUT", crontabs+"/a", o)
	read("a", 1)
	read("a", 0)
	// The webhook moves (a new CRD generation): never the old answer.
	cur := g.expect(http.StatusOK, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", nil)
	cur["spec"].(map[string]any)["conversion"].(map[string]any)["webhook"].(map[string]any)["clientConfig"] = map[string]any{"url": urlB, "caBundle": caB}
	g.expect(http.StatusOK, "PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", cur)
	deadline := time.Now().Add(10 * time.Second)
	for {
		o := g.expect(http.StatusOK, "GET", at, nil)
		if meta(o)["labels"].(map[string]any)["by"] == "b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("reads still converted by the previous webhook")
		}
		time.Sleep(20 * time.Millisecond)
	}
	read("b", 0)
}
