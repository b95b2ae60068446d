package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
)

// newLifecycleGateway is newTestGateway with NamespaceLifecycle admission
// on.
func newLifecycleGateway(t *testing.T) *testGateway {
	t.Helper()
	b := backendtest.Start(t)
	svc, err := New(context.Background(), Config{
		RegistryAddr: b.RegistryAddr, ValidatorAddr: b.ValidatorAddr, StorageAddr: b.StorageAddr, ConverterAddr: b.ConverterAddr,
		Tokens: []string{testToken}, CRDWait: 5 * time.Second, EnableNamespaceLifecycle: true,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	g := &testGateway{t: t, svc: svc, srv: srv, backends: b}
	g.waitReady()
	return g
}

// waitNamespace waits until GET /api/v1/namespaces/<name> answers code.
func (g *testGateway) waitNamespace(name string, code int) {
	g.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, body := g.do(http.MethodGet, "/api/v1/namespaces/"+name, nil)
		if resp.StatusCode == code {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("namespace %s: got %d, want %d: %s", name, resp.StatusCode, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCoreDiscovery: /api names v1, /api/v1 lists namespaces as
// kube-apiserver does, aggregated /api carries the core group, other
// versions are 404.
func TestCoreDiscovery(t *testing.T) {
	g := newTestGateway(t)
	api := g.expect(http.StatusOK, http.MethodGet, "/api", nil)
	if v, _ := api["versions"].([]any); len(v) != 1 || v[0] != "v1" {
		t.Fatalf("/api: %v", api)
	}
	_, body := g.do(http.MethodGet, "/api/v1", nil)
	want := `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["create","delete","get","list","patch","update","watch"],"shortNames":["ns"],"storageVersionHash":"Q3oi5N2YM8M="},{"name":"namespaces/finalize","singularName":"","namespaced":false,"kind":"Namespace","verbs":["update"]},{"name":"namespaces/status","singularName":"","namespaced":false,"kind":"Namespace","verbs":["get","patch","update"]}]}`
	if strings.TrimSpace(string(body)) != want {
		t.Fatalf("/api/v1:\n%s\nwant\n%s", body, want)
	}
	resp, body := g.do(http.MethodGet, "/api", nil, "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "as=APIGroupDiscoveryList") ||
		!strings.Contains(string(body), `"resource":"namespaces"`) || !strings.Contains(string(body), `"subresource":"finalize"`) {
		t.Fatalf("aggregated /api: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	g.expectPageNotFound(http.MethodGet, "/api/v2", nil)
}

// TestNamespacesCRUD: the system namespaces, create (defaults, DNS-1123
// label names), Table, protobuf, status phase selector, patch, delete with
// a custom resource inside.
func TestNamespacesCRUD(t *testing.T) {
	g := newTestGateway(t)
	g.waitNamespace("default", http.StatusOK)
	g.waitNamespace("kube-system", http.StatusOK)

	ns := g.expect(http.StatusCreated, http.MethodPost, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team"}})
	if sp, _ := ns["spec"].(map[string]any); sp == nil || len(sp["finalizers"].([]any)) != 1 || ns["status"].(map[string]any)["phase"] != "Active" {
		t.Fatalf("created: %v", ns)
	}
	if meta(ns)["managedFields"] == nil {
		t.Fatalf("no managedFields: %v", meta(ns))
	}
	bad := g.expect(http.StatusUnprocessableEntity, http.MethodPost, "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "Bad_Name"}})
	if msg := str(bad["message"]); !strings.HasPrefix(msg, `Namespace "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of`) {
		t.Fatalf("invalid name: %s", msg)
	}
	g.expect(http.StatusConflict, http.MethodPost, "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "team"}})

	// Table (kubectl get ns)
	tbl := g.expect(http.StatusOK, http.MethodGet, "/api/v1/namespaces/team", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	cols, _ := tbl["columnDefinitions"].([]any)
	if len(cols) != 3 || cols[1].(map[string]any)["name"] != "Status" {
		t.Fatalf("table: %v", tbl)
	}
	if cells := tbl["rows"].([]any)[0].(map[string]any)["cells"].([]any); cells[0] != "team" || cells[1] != "Active" {
		t.Fatalf("table row: %v", cells)
	}

	// protobuf
	resp, body := g.do(http.MethodGet, "/api/v1/namespaces/team", nil, "Accept", "application/vnd.kubernetes.protobuf")
	if resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("protobuf get: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, _, err := protobuf.NewSerializer(scheme, scheme).Decode(body, nil, nil)
	if err != nil {
		t.Fatalf("decode protobuf: %v", err)
	}
	if got, ok := obj.(*corev1.Namespace); !ok || got.Name != "team" || got.Status.Phase != corev1.NamespaceActive {
		t.Fatalf("protobuf object: %#v", obj)
	}

	list := g.expect(http.StatusOK, http.MethodGet, "/api/v1/namespaces?fieldSelector=status.phase%3DActive", nil)
	if items, _ := list["items"].([]any); len(items) < 5 || list["kind"] != "NamespaceList" {
		t.Fatalf("list: %v", list)
	}
	g.expect(http.StatusBadRequest, http.MethodGet, "/api/v1/namespaces?fieldSelector=spec.x%3D1", nil)

	patched := g.expect(http.StatusOK, http.MethodPatch, "/api/v1/namespaces/team", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/strategic-merge-patch+json")
	if l := meta(patched)["labels"].(map[string]any); l["a"] != "b" || l["kubernetes.io/metadata.name"] != "team" {
		t.Fatalf("patched labels: %v", l)
	}

	// a custom resource inside goes with the namespace
	g.createCronTabCRD()
	g.expect(http.StatusCreated, http.MethodPost, "/apis/stable.example.com/v1/namespaces/team/crontabs", cronTab("c1", map[string]any{"cronSpec": "* * * * */5"}))
	marked := g.expect(http.StatusOK, http.MethodDelete, "/api/v1/namespaces/team", nil)
	if meta(marked)["deletionTimestamp"] == nil || marked["status"].(map[string]any)["phase"] != "Terminating" {
		t.Fatalf("delete: %v", marked)
	}
	g.waitNamespace("team", http.StatusNotFound)
	g.expect(http.StatusNotFound, http.MethodGet, "/apis/stable.example.com/v1/namespaces/team/crontabs/c1", nil)
}

// TestNamespaceLifecycleAdmission: with --enable-namespace-lifecycle, a
// create in a missing namespace is 404 and the immortal namespaces cannot
// be deleted; without it (newTestGateway) creates go anywhere.
func TestNamespaceLifecycleAdmission(t *testing.T) {
	g := newLifecycleGateway(t)
	g.createCronTabCRD()
	g.waitNamespace("default", http.StatusOK)
	nf := g.expect(http.StatusNotFound, http.MethodPost, "/apis/stable.example.com/v1/namespaces/nowhere/crontabs", cronTab("c1", map[string]any{"cronSpec": "* * * * */5"}))
	if str(nf["message"]) != `namespaces "nowhere" not found` {
		t.Fatalf("missing namespace: %v", nf)
	}
	g.expect(http.StatusCreated, http.MethodPost, "/apis/stable.example.com/v1/namespaces/default/crontabs", cronTab("c1", map[string]any{"cronSpec": "* * * * */5"}))
	// a spec finalizer nobody removes keeps the namespace Terminating
	g.expect(http.StatusCreated, http.MethodPost, "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "ending"}, "spec": map[string]any{"finalizers": []any{"example.com/hold"}}})
	g.expect(http.StatusOK, http.MethodDelete, "/api/v1/namespaces/ending", nil)
	tf := g.expect(http.StatusForbidden, http.MethodPost, "/apis/stable.example.com/v1/namespaces/ending/crontabs", cronTab("c2", map[string]any{"cronSpec": "* * * * */5"}))
	if str(tf["message"]) != `crontabs.stable.example.com "c2" is forbidden: unable to create new content in namespace ending because it is being terminated` {
		t.Fatalf("terminating namespace: %v", tf)
	}
	causes, _ := tf["details"].(map[string]any)["causes"].([]any)
	if len(causes) != 1 || causes[0].(map[string]any)["reason"] != "NamespaceTerminating" || causes[0].(map[string]any)["field"] != "metadata.namespace" {
		t.Fatalf("terminating namespace causes: %v", tf["details"])
	}
	// a create by server-side apply is a create too
	af := g.expect(http.StatusForbidden, http.MethodPatch, "/apis/stable.example.com/v1/namespaces/ending/crontabs/c3?fieldManager=test",
		`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c3"},"spec":{"cronSpec":"* * * * */5"}}`,
		"Content-Type", "application/apply-patch+yaml")
	if str(af["message"]) != `crontabs.stable.example.com "c3" is forbidden: unable to create new content in namespace ending because it is being terminated` {
		t.Fatalf("apply in a terminating namespace: %v", af)
	}
	// the body is decoded first, as upstream's handler does before admission
	bad := g.expect(http.StatusBadRequest, http.MethodPost, "/apis/stable.example.com/v1/namespaces/nowhere/crontabs", `{"apiVersion":`, "Content-Type", "application/json")
	if str(bad["reason"]) != "BadRequest" {
		t.Fatalf("undecodable body in a missing namespace: %v", bad)
	}
	fb := g.expect(http.StatusForbidden, http.MethodDelete, "/api/v1/namespaces/default", nil)
	if str(fb["message"]) != `namespaces "default" is forbidden: this namespace may not be deleted` {
		t.Fatalf("delete default: %v", fb)
	}

	off := newTestGateway(t)
	off.createCronTabCRD()
	off.expect(http.StatusCreated, http.MethodPost, "/apis/stable.example.com/v1/namespaces/nowhere/crontabs", cronTab("c1", map[string]any{"cronSpec": "* * * * */5"}))
}

// TestCoreMethodsAsGoRestful: the core paths are go-restful routes in
// kube-apiserver, which serve the methods registered for them and answer
// any other, HEAD included (go-restful does not map HEAD to GET; the
// apiextensions.k8s.io paths answer it so too), with 405 MethodNotAllowed.
// The finalize subresource has only PUT (its storage neither gets nor
// patches).
func TestCoreMethodsAsGoRestful(t *testing.T) {
	g := newTestGateway(t)
	g.expect(http.StatusCreated, http.MethodPost, "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "methods"}})
	const want = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}`
	for _, c := range []struct {
		method, path string
		body         any
		header       []string
	}{
		{http.MethodHead, "/api", nil, nil},
		{http.MethodHead, "/api/v1", nil, nil},
		{http.MethodHead, "/api/v1/namespaces", nil, nil},
		{http.MethodHead, "/api/v1/namespaces/methods", nil, nil},
		{http.MethodHead, "/api/v1/namespaces/methods/status", nil, nil},
		{http.MethodHead, "/api/v1/namespaces/methods/finalize", nil, nil},
		{http.MethodHead, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", nil, nil},
		{http.MethodGet, "/api/v1/namespaces/methods/finalize", nil, nil},
		{http.MethodPatch, "/api/v1/namespaces/methods/finalize", `{"spec":{"finalizers":[]}}`, []string{"Content-Type", "application/merge-patch+json"}},
		{http.MethodPatch, "/api/v1/namespaces/methods/finalize", `[]`, []string{"Content-Type", "application/json-patch+json"}},
		{http.MethodPost, "/api/v1/namespaces/methods/finalize", map[string]any{}, nil},
		{http.MethodDelete, "/api/v1/namespaces/methods/finalize", nil, nil},
		{http.MethodDelete, "/api/v1/namespaces", nil, nil},
	} {
		resp, body := g.do(c.method, c.path, c.body, c.header...)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s %s: %d %q, want 405 application/json: %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if c.method == http.MethodHead {
			if len(body) != 0 {
				t.Fatalf("HEAD %s: a body: %s", c.path, body)
			}
			continue
		}
		if got := strings.TrimSpace(string(body)); got != want {
			t.Fatalf("%s %s:\n got %s\nwant %s", c.method, c.path, got, want)
		}
	}
	// PUT stays the finalize subresource's one verb
	ns := g.expect(http.StatusOK, http.MethodGet, "/api/v1/namespaces/methods", nil)
	g.expect(http.StatusOK, http.MethodPut, "/api/v1/namespaces/methods/finalize", ns)
	// an unknown subresource is still no route at all
	g.expectPageNotFound(http.MethodPatch, "/api/v1/namespaces/methods/frobnicate", `{}`)
}

// TestHeadAsGetOutsideGoRestful: kube-apiserver's handlers outside
// go-restful (OpenAPI documents, health checks) answer HEAD as GET without
// the body; go-restful's /version answers it 405.
func TestHeadAsGetOutsideGoRestful(t *testing.T) {
	g := newTestGateway(t)
	for _, path := range []string{"/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/apiextensions.k8s.io/v1", "/healthz", "/livez", "/readyz"} {
		get, _ := g.do(http.MethodGet, path, nil)
		head, body := g.do(http.MethodHead, path, nil)
		if head.StatusCode != get.StatusCode || head.StatusCode != http.StatusOK || len(body) != 0 {
			t.Fatalf("HEAD %s: %d with %d bytes, GET answers %d", path, head.StatusCode, len(body), get.StatusCode)
		}
		if ct := head.Header.Get("Content-Type"); ct != get.Header.Get("Content-Type") {
			t.Fatalf("HEAD %s: Content-Type %q, GET's %q", path, ct, get.Header.Get("Content-Type"))
		}
		if et := head.Header.Get("Etag"); et != get.Header.Get("Etag") {
			t.Fatalf("HEAD %s: ETag %q, GET's %q", path, et, get.Header.Get("Etag"))
		}
	}
	if resp, _ := g.do(http.MethodHead, "/version", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("HEAD /version: %d, want 405", resp.StatusCode)
	}
}
