package aggregator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

const localV2 = `{"swagger":"2.0","info":{"title":"Kubernetes","version":"v1.33.0"},"paths":{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions":{"get":{"operationId":"listApiextensionsV1CustomResourceDefinition","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.apiextensions.List"}}}}}},"definitions":{"io.k8s.apiextensions.List":{"type":"object"},"shared":{"type":"string"},"io.k8s.apimachinery.pkg.apis.meta.v1.Status":{"type":"object"}}}`

func wardleV2(desc string) string {
	return `{"swagger":"2.0","info":{"title":"wardle","version":"v0"},"paths":{` +
		`"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders":{"get":{"operationId":"listWardleV1alpha1NamespacedFlunder","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.sample.Flunder"}},"401":{"description":"Unauthorized","schema":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}}}}},` +
		`"/apis/other.example.com/v1/things":{"get":{"operationId":"listOther","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/other.Thing"}}}}}},` +
		`"definitions":{"io.k8s.sample.Flunder":{"type":"object","description":"` + desc + `"},"io.k8s.apimachinery.pkg.apis.meta.v1.Status":{"type":"object","x-kubernetes-group-version-kind":[{"group":"","kind":"Status","version":"v1"}]},"other.Thing":{"type":"object"},"shared":{"type":"integer"}}}`
}

// localOpenAPIv2 serves localV2 with an ETag, answering If-None-Match,
// and counts its full answers.
func localOpenAPIv2(full *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi/v2" {
			http.Error(w, "local", http.StatusTeapot)
			return
		}
		w.Header().Set("Etag", `"local-1"`)
		if r.Header.Get("If-None-Match") == `"local-1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		*full++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(localV2))
	})
}

// TestOpenAPIv2Merge: /openapi/v2 is the local document alone until an
// available APIService's backend document is downloaded, then both
// merged as kube-aggregator does: the backend's paths kept to its group
// version, a conflicting definition renamed, JSON and protobuf with an
// ETag that answers 304, rebuilt when the backend's document changes.
func TestOpenAPIv2Merge(t *testing.T) {
	b := newBackend(t)
	s := wardle(b.caBundle(), apiregistrationv1.ConditionTrue)
	a := newTestAggregator(t, b, nil, s)
	full := 0
	local := localOpenAPIv2(&full)
	get := func(accept, ifNoneMatch string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
		r.Header.Set("Accept", accept)
		if ifNoneMatch != "" {
			r.Header.Set("If-None-Match", ifNoneMatch)
		}
		r = r.WithContext(request.WithUser(r.Context(), &user.DefaultInfo{Name: "alice"}))
		rec := httptest.NewRecorder()
		a.Handler(local).ServeHTTP(rec, r)
		return rec
	}
	doc := func(rec *httptest.ResponseRecorder) (paths, defs []string) {
		var d struct {
			Paths       map[string]json.RawMessage `json:"paths"`
			Definitions map[string]json.RawMessage `json:"definitions"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			t.Fatalf("%v: %s", err, rec.Body.String())
		}
		for p := range d.Paths {
			paths = append(paths, p)
		}
		for n := range d.Definitions {
			defs = append(defs, n)
		}
		slices.Sort(paths)
		slices.Sort(defs)
		return paths, defs
	}

	// nothing downloaded yet (the backend has no document): the local one
	a.refreshOpenAPIv2(s)
	if rec := get("application/json", ""); rec.Body.String() != localV2 {
		t.Fatalf("before: %d %s", rec.Code, rec.Body.String())
	}
	full = 0

	b.mu.Lock()
	b.openAPIv2 = wardleV2("v1")
	b.mu.Unlock()
	a.refreshOpenAPIv2(s)
	got := b.last()
	if got.URL.Path != "/openapi/v2" || got.Header.Get("X-Remote-User") != "system:aggregator" {
		t.Errorf("downloaded %s as %q", got.URL.Path, got.Header.Get("X-Remote-User"))
	}
	rec := get("application/json", "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Etag") == "" {
		t.Fatalf("merged: %d %v", rec.Code, rec.Header())
	}
	if vary := rec.Header().Values("Vary"); strings.Join(vary, ",") != "Accept-Encoding,Accept" {
		t.Errorf("Vary %v", vary)
	}
	paths, defs := doc(rec)
	if want := []string{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"}; !slices.Equal(paths, want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
	// the backend's "shared" differs from the local one: renamed, as
	// kube-openapi's merge does; other.Thing went with its path
	if want := []string{"io.k8s.apiextensions.List", "io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.sample.Flunder", "shared", "shared_v2"}; !slices.Equal(defs, want) {
		t.Errorf("definitions %v, want %v", defs, want)
	}
	// a definition both have, the local one without GVKs: the backend's
	// GVKs merged in (kube-openapi's merge needs the extensions to exist)
	if !strings.Contains(rec.Body.String(), `"io.k8s.apimachinery.pkg.apis.meta.v1.Status":{"type":"object","x-kubernetes-group-version-kind":[{"group":"","kind":"Status","version":"v1"}]}`) {
		t.Errorf("Status: %s", rec.Body.String())
	}
	if !strings.Contains(rec.Body.String(), `"io.k8s.apiextensions.List":{"type":"object"}`) {
		t.Errorf("a definition without extensions gained some: %s", rec.Body.String())
	}
	etag := rec.Header().Get("Etag")
	if rec := get("application/json", etag); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", rec.Code)
	}
	rec = get("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" || rec.Body.Len() == 0 {
		t.Errorf("protobuf: %d %v", rec.Code, rec.Header())
	}
	// the local document was read in full once for the merge: later
	// requests were 304s
	if full != 1 {
		t.Errorf("local document read in full %d times", full)
	}

	// the backend's document changes: merged again
	b.mu.Lock()
	b.openAPIv2 = wardleV2("v2")
	b.mu.Unlock()
	a.refreshOpenAPIv2(s)
	rec = get("application/json", etag)
	if rec.Code != http.StatusOK || rec.Header().Get("Etag") == etag || !strings.Contains(rec.Body.String(), `"description":"v2"`) {
		t.Fatalf("after the change: %d %s", rec.Code, rec.Header().Get("Etag"))
	}

	// the APIService unavailable: the local document alone
	down := wardle(b.caBundle(), apiregistrationv1.ConditionFalse)
	a.replace(map[string]*apiregistrationv1.APIService{down.Name: down})
	if rec := get("application/json", ""); rec.Body.String() != localV2 {
		t.Fatalf("unavailable: %d %s", rec.Code, rec.Body.String())
	}
}
