package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStatusSubresource(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	// status is dropped on create when the version has a status subresource.
	obj := cronTab("s", map[string]any{"replicas": 1})
	obj["status"] = map[string]any{"phase": "ignored"}
	c := g.expect(http.StatusCreated, "POST", crontabs, obj)
	if _, ok := c["status"]; ok {
		t.Fatalf("status kept on create: %v", c)
	}
	// PUT /status changes only status, and not the generation.
	c["status"] = map[string]any{"phase": "Running"}
	c["spec"] = map[string]any{"replicas": 5}
	st := g.expect(http.StatusOK, "PUT", crontabs+"/s/status", c)
	if st["status"].(map[string]any)["phase"] != "Running" || st["spec"].(map[string]any)["replicas"] != float64(1) || meta(st)["generation"] != float64(1) {
		t.Fatalf("status update: %v", st)
	}
	// PUT on the main resource keeps status.
	st["status"] = map[string]any{"phase": "Lost"}
	st["spec"] = map[string]any{"replicas": 2}
	main := g.expect(http.StatusOK, "PUT", crontabs+"/s", st)
	if main["status"].(map[string]any)["phase"] != "Running" || meta(main)["generation"] != float64(2) {
		t.Fatalf("main update: %v", main)
	}
	// PATCH /status.
	p := g.expect(http.StatusOK, "PATCH", crontabs+"/s/status", `{"status":{"phase":"Done"}}`, "Content-Type", "application/merge-patch+json")
	if p["status"].(map[string]any)["phase"] != "Done" {
		t.Fatalf("status patch: %v", p)
	}
	g.expect(http.StatusOK, "GET", crontabs+"/s/status", nil)
	nf := g.expect(http.StatusNotFound, "GET", crontabs+"/s/scale", nil)
	if nf["message"] != `crontabs.stable.example.com "s" not found` {
		t.Fatalf("scale: %v", nf)
	}
	// The validator saw the status write as such.
	calls := g.backends.Admits.Requests()
	var sawStatus bool
	for _, c := range calls {
		if c.GetSubresource() == "status" && len(c.GetOldObject()) > 0 {
			sawStatus = true
		}
	}
	if !sawStatus {
		t.Fatal("status update not admitted as a status write with the old object")
	}
}

func TestFinalizersDeleteFlow(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	obj := cronTab("f", map[string]any{})
	meta(obj)["finalizers"] = []any{"example.com/hold"}
	g.expect(http.StatusCreated, "POST", crontabs, obj)

	marked := g.expect(http.StatusOK, "DELETE", crontabs+"/f", nil)
	m := meta(marked)
	if str(m["deletionTimestamp"]) == "" || m["deletionGracePeriodSeconds"] != float64(0) || m["generation"] != float64(2) {
		t.Fatalf("marked: %v", m)
	}
	// Deleting again changes nothing.
	again := g.expect(http.StatusOK, "DELETE", crontabs+"/f", nil)
	if meta(again)["resourceVersion"] != m["resourceVersion"] {
		t.Fatalf("second delete changed the object")
	}
	// Removing the finalizers deletes the object.
	g.expect(http.StatusOK, "PATCH", crontabs+"/f", `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json")
	g.expect(http.StatusNotFound, "GET", crontabs+"/f", nil)

	// Preconditions.
	c := g.expect(http.StatusCreated, "POST", crontabs, cronTab("p", map[string]any{}))
	s := g.expect(http.StatusConflict, "DELETE", crontabs+"/p", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"nope"}}`)
	if want := `Operation cannot be fulfilled on CronTab.stable.example.com "p": the UID in the precondition (nope) does not match the UID in record (` + str(meta(c)["uid"]) + `). The object might have been deleted and then recreated`; s["message"] != want {
		t.Fatalf("precondition: %v", s["message"])
	}
	g.expect(http.StatusOK, "DELETE", crontabs+"/p", `{"preconditions":{"resourceVersion":"`+str(meta(c)["resourceVersion"])+`"}}`)
}

func TestDryRunYAMLPrettyWarnings(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	dry := g.expect(http.StatusCreated, "POST", crontabs+"?dryRun=All", cronTab("d", map[string]any{}))
	if str(meta(dry)["uid"]) == "" || meta(dry)["resourceVersion"] != nil {
		t.Fatalf("dry run result: %v", dry)
	}
	g.expect(http.StatusNotFound, "GET", crontabs+"/d", nil)
	bad := g.expect(http.StatusUnprocessableEntity, "POST", crontabs+"?dryRun=Some", cronTab("d", map[string]any{}))
	if !strings.HasPrefix(str(bad["message"]), `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value:`) {
		t.Fatalf("dryRun validation: %v", bad["message"])
	}

	yml := "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: yml\nspec:\n  replicas: 2\n"
	resp, body := g.do("POST", crontabs+"?pretty=true", yml, "Content-Type", "application/yaml")
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), "\n  \"metadata\": {") {
		t.Fatalf("yaml create: %d %s", resp.StatusCode, body)
	}
	resp, body = g.do("GET", crontabs+"/yml", nil, "Accept", "application/yaml")
	if resp.Header.Get("Content-Type") != "application/yaml" || !strings.Contains(string(body), "kind: CronTab") {
		t.Fatalf("yaml get: %q %s", resp.Header.Get("Content-Type"), body)
	}

	// Reading at the deprecated version: converted objects and a Warning.
	resp, body = g.do("GET", "/apis/stable.example.com/v1beta1/namespaces/default/crontabs/yml", nil)
	if w := resp.Header.Get("Warning"); w != `299 - "stable.example.com/v1beta1 CronTab is deprecated; use stable.example.com/v1 CronTab"` {
		t.Fatalf("warning header %q", w)
	}
	var obj map[string]any
	_ = json.Unmarshal(body, &obj)
	if obj["apiVersion"] != "stable.example.com/v1beta1" {
		t.Fatalf("not converted: %s", body)
	}
	// Unknown fields: dropped with a warning by default, 400 when Strict.
	resp, _ = g.do("POST", crontabs, cronTab("u", map[string]any{"unknown": 1}))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Warning") != `299 - "unknown field \"spec.unknown\""` {
		t.Fatalf("unknown field warn: %d %q", resp.StatusCode, resp.Header.Get("Warning"))
	}
	strict := g.expect(http.StatusBadRequest, "POST", crontabs+"?fieldValidation=Strict", cronTab("u2", map[string]any{"unknown": 1}))
	if want := `CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "spec.unknown"`; strict["message"] != want {
		t.Fatalf("strict: %v", strict["message"])
	}
}

func TestListSelectorsAndPages(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	for _, n := range []string{"a", "b", "c"} {
		o := cronTab(n, map[string]any{"color": map[string]string{"a": "red", "b": "blue", "c": "red"}[n]})
		meta(o)["labels"] = map[string]any{"n": n}
		g.expect(http.StatusCreated, "POST", crontabs, o)
	}
	names := func(list map[string]any) string {
		var out []string
		for _, it := range list["items"].([]any) {
			out = append(out, str(meta(it.(map[string]any))["name"]))
		}
		return strings.Join(out, ",")
	}
	if got := names(g.expect(http.StatusOK, "GET", crontabs+"?labelSelector=n+in+(a,c)", nil)); got != "a,c" {
		t.Errorf("label selector: %s", got)
	}
	if got := names(g.expect(http.StatusOK, "GET", crontabs+"?fieldSelector=spec.color%3Dred", nil)); got != "a,c" {
		t.Errorf("selectable field: %s", got)
	}
	if got := names(g.expect(http.StatusOK, "GET", crontabs+"?fieldSelector=metadata.name%3Db", nil)); got != "b" {
		t.Errorf("name field: %s", got)
	}
	s := g.expect(http.StatusBadRequest, "GET", crontabs+"?labelSelector=%3D%3D", nil)
	if s["reason"] != "BadRequest" {
		t.Errorf("bad selector: %v", s)
	}
	p1 := g.expect(http.StatusOK, "GET", crontabs+"?limit=2", nil)
	cont := str(meta(p1)["continue"])
	if names(p1) != "a,b" || cont == "" {
		t.Fatalf("page 1: %s %q", names(p1), cont)
	}
	p2 := g.expect(http.StatusOK, "GET", crontabs+"?limit=2&continue="+cont, nil)
	if names(p2) != "c" {
		t.Fatalf("page 2: %s", names(p2))
	}
	empty := g.expect(http.StatusOK, "GET", "/apis/stable.example.com/v1/namespaces/other/crontabs", nil)
	if items, ok := empty["items"].([]any); !ok || len(items) != 0 {
		t.Fatalf("empty list: %v", empty)
	}

	dc := g.expect(http.StatusOK, "DELETE", crontabs+"?labelSelector=n%3Da", nil)
	if names(dc) != "a" {
		t.Fatalf("delete collection: %v", dc)
	}
	if got := names(g.expect(http.StatusOK, "GET", crontabs, nil)); got != "b,c" {
		t.Fatalf("after delete collection: %s", got)
	}
}

func TestCRDsThroughRegistry(t *testing.T) {
	g := newTestGateway(t)
	_, next := g.openWatch("/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true")
	g.createCronTabCRD()
	ev := g.nextEvent(next, "ADDED", "crontabs.stable.example.com")
	if ev.Object["kind"] != "CustomResourceDefinition" {
		t.Fatalf("crd event: %v", ev.Object)
	}
	list := g.expect(http.StatusOK, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", nil)
	if list["kind"] != "CustomResourceDefinitionList" || list["apiVersion"] != "apiextensions.k8s.io/v1" || len(list["items"].([]any)) != 1 {
		t.Fatalf("crd list: %v", list)
	}
	g.expect(http.StatusOK, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", nil)
	g.expectPageNotFound("GET", "/apis/apiextensions.k8s.io/v1/namespaces/x/customresourcedefinitions", nil)
	g.expect(http.StatusOK, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", nil)
	// The registry's finalizer updates the CRD (deletionTimestamp,
	// Terminating) before it goes.
	for {
		ev, ok := next()
		if !ok {
			t.Fatal("watch ended before the CRD was deleted")
		}
		if ev.Type == "DELETED" {
			break
		}
		if ev.Type != "MODIFIED" || str(meta(ev.Object)["name"]) != "crontabs.stable.example.com" {
			t.Fatalf("unexpected event %s %v", ev.Type, meta(ev.Object)["name"])
		}
	}
}

func TestVersionDiscoveryHealth(t *testing.T) {
	g := newTestGateway(t)
	resp, body := g.do("GET", "/version", nil, "Authorization", "")
	var v map[string]string
	if err := json.Unmarshal(body, &v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("version: %d %s", resp.StatusCode, body)
	}
	if v["major"] != "1" || v["minor"] != "33" || !strings.HasPrefix(v["gitVersion"], "v1.33.") || v["goVersion"] == "" || v["platform"] == "" {
		t.Fatalf("version: %v", v)
	}
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		resp, body := g.do("GET", p, nil, "Authorization", "")
		if resp.StatusCode != 200 || string(body) != "ok" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("%s: %d %q %q", p, resp.StatusCode, body, resp.Header.Get("Content-Type"))
		}
	}
	api := g.expect(http.StatusOK, "GET", "/api", nil)
	if api["kind"] != "APIVersions" || fmt.Sprint(api["versions"]) != "[v1]" || len(api["serverAddressByClientCIDRs"].([]any)) != 1 {
		t.Fatalf("/api: %v", api)
	}
	apis := g.expect(http.StatusOK, "GET", "/apis", nil)
	if apis["kind"] != "APIGroupList" {
		t.Fatalf("/apis: %v", apis)
	}
	g.svc.draining.Store(true)
	resp, body = g.do("GET", "/readyz", nil)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "readyz check failed") {
		t.Fatalf("readyz after close: %d %s", resp.StatusCode, body)
	}
}

func TestCreateWhileCRDTerminating(t *testing.T) {
	g := newTestGateway(t)
	// A finalizer of its own holds the CRD in Terminating once deleted.
	crd := cronTabCRD()
	meta(crd)["finalizers"] = []any{"example.com/hold"}
	g.createCRD(crd)
	const path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com"
	g.expect(http.StatusOK, "DELETE", path, nil)
	// The gateway's cache follows the registry's watch.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _ := g.svc.crds.Get("crontabs.stable.example.com")
		if c != nil && c.DeletionTimestamp != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache never saw the CRD terminating")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// upstream's CRD handler answers before reading the body: 405 naming
	// the group and the resource
	s := g.expect(http.StatusMethodNotAllowed, "POST", crontabs, cronTab("t", map[string]any{}))
	if want := `create not allowed while custom resource definition is terminating`; s["message"] != want || s["reason"] != "MethodNotAllowed" ||
		fmt.Sprint(s["details"]) != "map[group:stable.example.com kind:crontabs]" {
		t.Fatalf("%v", s)
	}
	g.expect(http.StatusOK, "GET", crontabs, nil)
	// Release the CRD.
	g.expect(http.StatusOK, "PATCH", path, `{"metadata":{"finalizers":null}}`, "Content-Type", "application/merge-patch+json")
}

// TestGenerationAfterPruneAndDefault: generation compares the object as
// admission left it (pruned, defaulted) with the old one as read back
// (defaulted with the current schema), as upstream, whose decoder prunes and
// defaults before the strategy compares; status writes never bump it. Reads
// default stored objects too.
func TestGenerationAfterPruneAndDefault(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	c := g.expect(http.StatusCreated, "POST", crontabs, cronTab("g", map[string]any{"replicas": 1}))
	gen := func(o map[string]any) float64 { f, _ := meta(o)["generation"].(float64); return f }

	// An unknown field is pruned: nothing changed, no bump.
	u := g.expect(http.StatusOK, "PATCH", crontabs+"/g", `{"spec":{"bogus":1}}`, "Content-Type", "application/merge-patch+json")
	if gen(u) != 1 || meta(u)["resourceVersion"] != meta(c)["resourceVersion"] {
		t.Fatalf("pruned-only patch: generation %v rv %v (was %v)", gen(u), meta(u)["resourceVersion"], meta(c)["resourceVersion"])
	}

	// The CRD gains a default: the stored object lacks it, a metadata-only
	// write defaults it in, and that is no spec change.
	crd := cronTabCRD()
	for _, v := range crd["spec"].(map[string]any)["versions"].([]any) {
		sch := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		spec := sch["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
		spec["image"] = map[string]any{"type": "string", "default": "busybox"}
	}
	g.expect(http.StatusOK, "PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com",
		map[string]any{"spec": map[string]any{"versions": crd["spec"].(map[string]any)["versions"]}}, "Content-Type", "application/merge-patch+json")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, _ := g.svc.crds.Get("crontabs.stable.example.com"); c != nil && c.Generation == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway never saw the CRD's second generation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Reads default the stored object (upstream's storage decoder does).
	if got := g.expect(http.StatusOK, "GET", crontabs+"/g", nil); got["spec"].(map[string]any)["image"] != "busybox" {
		t.Fatalf("read without the default: %v", got["spec"])
	}
	if l := g.expect(http.StatusOK, "GET", crontabs, nil); l["items"].([]any)[0].(map[string]any)["spec"].(map[string]any)["image"] != "busybox" {
		t.Fatalf("list without the default: %v", l["items"])
	}
	l := g.expect(http.StatusOK, "PATCH", crontabs+"/g", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json")
	if gen(l) != 1 || l["spec"].(map[string]any)["image"] != "busybox" {
		t.Fatalf("defaulting write: generation %v spec %v", gen(l), l["spec"])
	}
	// A real spec change bumps it; a status write does not.
	s := g.expect(http.StatusOK, "PATCH", crontabs+"/g", `{"spec":{"replicas":2}}`, "Content-Type", "application/merge-patch+json")
	if gen(s) != 2 {
		t.Fatalf("spec change: generation %v", gen(s))
	}
	st := g.expect(http.StatusOK, "PATCH", crontabs+"/g/status", `{"status":{"phase":"Running"},"spec":{"replicas":3}}`, "Content-Type", "application/merge-patch+json")
	if gen(st) != 2 || st["spec"].(map[string]any)["replicas"] != float64(2) {
		t.Fatalf("status write: generation %v spec %v", gen(st), st["spec"])
	}
}

// warningTexts are a response's Warning headers' texts.
func warningTexts(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	for _, h := range resp.Header.Values("Warning") {
		q, ok := strings.CutPrefix(h, "299 - ")
		if !ok {
			t.Fatalf("warning header %q", h)
		}
		s, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("warning header %q: %v", h, err)
		}
		out = append(out, s)
	}
	return out
}

// TestStrictDecoding: a create or update body's duplicate fields and the
// unknown fields of the whole request (also the .status a main-resource
// write drops, and what a status write drops), under each fieldValidation
// directive, as upstream's strict decoder reports them: duplicates first,
// in one 400 under Strict, as warnings under Warn (the default), nothing
// under Ignore.
func TestStrictDecoding(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	const cannot = `CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: `
	body := func(name string) string {
		return `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"` + name +
			`"},"spec":{"image":"a","image":"b","bogus":1},"status":{"phase":"x","bogus":2}}`
	}
	yml := func(name string) string {
		return "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: " + name + "\nspec:\n  image: a\n  image: b\n  bogus: 1\n"
	}
	all := []string{`duplicate field "spec.image"`, `unknown field "spec.bogus"`, `unknown field "status.bogus"`}
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("old", map[string]any{"image": "a"}))
	for _, tc := range []struct {
		name, method, path, body string
		yaml                     bool
		code                     int
		message                  string
		warnings                 []string
	}{
		{name: "create strict", method: "POST", path: crontabs + "?fieldValidation=Strict", body: body("s"),
			code: http.StatusBadRequest, message: cannot + strings.Join(all, ", ")},
		{name: "create warn", method: "POST", path: crontabs + "?fieldValidation=Warn", body: body("w"),
			code: http.StatusCreated, warnings: all},
		{name: "create default", method: "POST", path: crontabs, body: body("d"), code: http.StatusCreated, warnings: all},
		{name: "create ignore", method: "POST", path: crontabs + "?fieldValidation=Ignore", body: body("i"), code: http.StatusCreated},
		{name: "yaml create strict", method: "POST", path: crontabs + "?fieldValidation=Strict", body: yml("ys"), yaml: true,
			code:    http.StatusBadRequest,
			message: cannot + "yaml: unmarshal errors:\n  line 7: key \"image\" already set in map, unknown field \"spec.bogus\""},
		{name: "yaml create warn", method: "POST", path: crontabs, body: yml("yw"), yaml: true,
			code: http.StatusCreated, warnings: []string{`line 7: key "image" already set in map`, `unknown field "spec.bogus"`}},
		{name: "update strict", method: "PUT", path: crontabs + "/old?fieldValidation=Strict",
			body: `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"old","resourceVersion":"RV"},"spec":{"image":"a","image":"b"},"status":{"bogus":2}}`,
			code: http.StatusBadRequest, message: cannot + `duplicate field "spec.image", unknown field "status.bogus"`},
		{name: "update drops status", method: "PUT", path: crontabs + "/old",
			body: `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"old","resourceVersion":"RV"},"spec":{"image":"a"},"status":{"bogus":2}}`,
			code: http.StatusOK, warnings: []string{`unknown field "status.bogus"`}},
		{name: "status update drops spec", method: "PUT", path: crontabs + "/old/status",
			body: `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"old","resourceVersion":"RV"},"spec":{"image":"a","bogus":1},"status":{"phase":"p","bogus":2}}`,
			code: http.StatusOK, warnings: []string{`unknown field "spec.bogus"`, `unknown field "status.bogus"`}},
		{name: "status patch drops spec", method: "PATCH", path: crontabs + "/old/status",
			body: `{"spec":{"bogus":1}}`, code: http.StatusOK, warnings: []string{`unknown field "spec.bogus"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.body
			if strings.Contains(b, `"RV"`) {
				rv := str(meta(g.expect(http.StatusOK, "GET", crontabs+"/old", nil))["resourceVersion"])
				b = strings.Replace(b, `"RV"`, strconv.Quote(rv), 1)
			}
			ct := "application/json"
			switch {
			case tc.yaml:
				ct = "application/yaml"
			case tc.method == "PATCH":
				ct = "application/merge-patch+json"
			}
			resp, data := g.do(tc.method, tc.path, b, "Content-Type", ct)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.code, data)
			}
			if tc.message != "" {
				var st map[string]any
				_ = json.Unmarshal(data, &st)
				if st["message"] != tc.message {
					t.Errorf("message %q\nwant    %q", st["message"], tc.message)
				}
			}
			if got := warningTexts(t, resp); !reflect.DeepEqual(got, tc.warnings) {
				t.Errorf("warnings %q\nwant     %q", got, tc.warnings)
			}
		})
	}
}
