package gateway

import (
	"net/http"
	"strings"
	"testing"
)

const crontabs = "/apis/stable.example.com/v1/namespaces/default/crontabs"

func TestCustomResourceLifecycle(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()

	// Create right after the CRD: no sleep, the gateway catches up.
	created := g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"cronSpec": "* * * * */5", "replicas": 1}))
	m := meta(created)
	if str(m["uid"]) == "" || str(m["creationTimestamp"]) == "" || str(m["resourceVersion"]) == "" || str(m["namespace"]) != "default" {
		t.Fatalf("create: system fields missing: %v", m)
	}
	if m["generation"] != float64(1) {
		t.Fatalf("create: generation = %v, want 1", m["generation"])
	}

	got := g.expect(http.StatusOK, "GET", crontabs+"/a", nil)
	if str(meta(got)["resourceVersion"]) != str(m["resourceVersion"]) {
		t.Fatalf("get: rv %v, want %v", meta(got)["resourceVersion"], m["resourceVersion"])
	}

	list := g.expect(http.StatusOK, "GET", crontabs, nil)
	if list["kind"] != "CronTabList" || list["apiVersion"] != "stable.example.com/v1" {
		t.Fatalf("list type: %v %v", list["kind"], list["apiVersion"])
	}
	if items, _ := list["items"].([]any); len(items) != 1 {
		t.Fatalf("list items: %v", list["items"])
	}

	// Update: spec change bumps generation; stale rv conflicts; no rv is 422.
	upd := cronTab("a", map[string]any{"cronSpec": "* * * * */10", "replicas": 2})
	meta(upd)["resourceVersion"] = m["resourceVersion"]
	updated := g.expect(http.StatusOK, "PUT", crontabs+"/a", upd)
	if meta(updated)["generation"] != float64(2) {
		t.Fatalf("update: generation = %v, want 2", meta(updated)["generation"])
	}
	conflict := g.expect(http.StatusConflict, "PUT", crontabs+"/a", upd)
	if want := `Operation cannot be fulfilled on crontabs.stable.example.com "a": the object has been modified; please apply your changes to the latest version and try again`; conflict["message"] != want {
		t.Fatalf("conflict message: %v", conflict["message"])
	}
	noRV := g.expect(http.StatusUnprocessableEntity, "PUT", crontabs+"/a", cronTab("a", map[string]any{}))
	// v1.33 renders the store's uint64 resourceVersion with %#v.
	if want := `crontabs.stable.example.com "a" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update`; noRV["message"] != want {
		t.Fatalf("no-rv message: %v", noRV["message"])
	}
	mismatch := cronTab("b", map[string]any{})
	meta(mismatch)["resourceVersion"] = meta(updated)["resourceVersion"]
	bad := g.expect(http.StatusBadRequest, "PUT", crontabs+"/a", mismatch)
	if want := "the name of the object (b) does not match the name on the URL (a)"; bad["message"] != want {
		t.Fatalf("name mismatch: %v", bad["message"])
	}
	g.expect(http.StatusNotFound, "PUT", crontabs+"/missing", func() map[string]any {
		o := cronTab("missing", map[string]any{})
		meta(o)["resourceVersion"] = "5"
		return o
	}())

	// Metadata-only change keeps the generation.
	lbl := g.expect(http.StatusOK, "PATCH", crontabs+"/a", `{"metadata":{"labels":{"team":"x"}}}`, "Content-Type", "application/merge-patch+json")
	if meta(lbl)["generation"] != float64(2) {
		t.Fatalf("label patch bumped generation: %v", meta(lbl)["generation"])
	}
	jp := g.expect(http.StatusOK, "PATCH", crontabs+"/a", `[{"op":"replace","path":"/spec/replicas","value":3}]`, "Content-Type", "application/json-patch+json")
	if jp["spec"].(map[string]any)["replicas"] != float64(3) || meta(jp)["generation"] != float64(3) {
		t.Fatalf("json patch: %v", jp)
	}
	smp := g.expect(http.StatusUnsupportedMediaType, "PATCH", crontabs+"/a", `{}`, "Content-Type", "application/strategic-merge-patch+json")
	if smp["reason"] != "UnsupportedMediaType" {
		t.Fatalf("smp: %v", smp)
	}
	g.expect(http.StatusConflict, "PATCH", crontabs+"/a", `{"metadata":{"resourceVersion":"1"}}`, "Content-Type", "application/merge-patch+json")

	// 422 from the validator, one error and several.
	one := g.expect(http.StatusUnprocessableEntity, "POST", crontabs, cronTab("x", map[string]any{"replicas": 15}))
	if want := `CronTab.stable.example.com "x" is invalid: spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10`; one["message"] != want {
		t.Fatalf("422 message: %v", one["message"])
	}
	two := g.expect(http.StatusUnprocessableEntity, "POST", crontabs, cronTab("x", map[string]any{"replicas": 15, "size": 5}))
	if msg := str(two["message"]); !strings.HasPrefix(msg, `CronTab.stable.example.com "x" is invalid: [spec.replicas: Invalid value: 15: `) || !strings.HasSuffix(msg, "]") {
		t.Fatalf("422 message: %v", msg)
	}
	if causes := two["details"].(map[string]any)["causes"].([]any); len(causes) != 2 {
		t.Fatalf("causes: %v", causes)
	}
	noName := g.expect(http.StatusUnprocessableEntity, "POST", crontabs, cronTab("", map[string]any{}))
	if want := `CronTab.stable.example.com "" is invalid: metadata.name: Required value: name or generateName is required`; noName["message"] != want {
		t.Fatalf("no name: %v", noName["message"])
	}
	gen := cronTab("", map[string]any{})
	meta(gen)["generateName"] = "gen-"
	genObj := g.expect(http.StatusCreated, "POST", crontabs, gen)
	if name := str(meta(genObj)["name"]); !strings.HasPrefix(name, "gen-") || len(name) != len("gen-")+5 {
		t.Fatalf("generateName: %q", name)
	}
	g.expect(http.StatusConflict, "POST", crontabs, cronTab("a", map[string]any{}))

	// Delete: 200 with a Success Status; then 404.
	del := g.expect(http.StatusOK, "DELETE", crontabs+"/a", nil)
	if del["kind"] != "Status" || del["status"] != "Success" {
		t.Fatalf("delete: %v", del)
	}
	nf := g.expect(http.StatusNotFound, "GET", crontabs+"/a", nil)
	if want := `crontabs.stable.example.com "a" not found`; nf["message"] != want {
		t.Fatalf("not found: %v", nf["message"])
	}
}

func TestUnknownResources(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	for _, tc := range []struct{ method, path string }{
		{"GET", "/apis/stable.example.com/v1/namespaces/default/nothings"},
		{"GET", "/apis/stable.example.com/v9/namespaces/default/crontabs"},
		{"GET", "/apis/other.example.com/v1/crontabs"},
		{"POST", "/apis/stable.example.com/v1/crontabs"}, // namespaced resource without a namespace
		{"GET", "/api/v2"},
		{"GET", "/api/v1/pods"},
		{"GET", "/nothing/here"},
	} {
		g.expectPageNotFound(tc.method, tc.path, map[string]any{})
	}
	s := g.expect(http.StatusMethodNotAllowed, "POST", "/version", "{}")
	if s["reason"] != "MethodNotAllowed" {
		t.Errorf("405: %v", s)
	}
	// Cluster-wide list of a namespaced resource is fine.
	g.expect(http.StatusOK, "GET", "/apis/stable.example.com/v1/crontabs", nil)
}
