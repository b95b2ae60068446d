package gateway

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

const applyCT = "application/apply-patch+yaml"

// managers lists an object's managedFields as manager/operation[/subresource],
// sorted (the library orders entries of one second by manager).
func managers(t *testing.T, obj map[string]any) []string {
	t.Helper()
	mf, _ := meta(obj)["managedFields"].([]any)
	var out []string
	for _, e := range mf {
		m := e.(map[string]any)
		s := str(m["manager"]) + "/" + str(m["operation"])
		if sub := str(m["subresource"]); sub != "" {
			s += "/" + sub
		}
		if m["fieldsType"] != "FieldsV1" || m["fieldsV1"] == nil || m["apiVersion"] == "" {
			t.Errorf("entry %v: no fieldsV1 or apiVersion", m)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func wantManagers(t *testing.T, what string, obj map[string]any, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := managers(t, obj); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: managedFields %v, want %v", what, got, want)
	}
}

func TestApplyCustomResource(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	const body = `apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: a
  labels: {app: a}
spec:
  image: nginx
  replicas: 1
`
	// Create (201), generation 1, an Apply entry of the manager.
	created := g.expect(http.StatusCreated, "PATCH", crontabs+"/a?fieldManager=alice", body, "Content-Type", applyCT)
	if meta(created)["generation"] != float64(1) || str(meta(created)["uid"]) == "" || str(meta(created)["creationTimestamp"]) == "" {
		t.Fatalf("created: %v", created)
	}
	wantManagers(t, "create", created, "alice/Apply")
	// The same apply again: nothing changes (no new revision).
	same := g.expect(http.StatusOK, "PATCH", crontabs+"/a?fieldManager=alice", body, "Content-Type", applyCT)
	if meta(same)["resourceVersion"] != meta(created)["resourceVersion"] {
		t.Fatalf("idempotent apply wrote: %v -> %v", meta(created)["resourceVersion"], meta(same)["resourceVersion"])
	}
	// A change: generation 2; a field the apply no longer names is removed.
	changed := g.expect(http.StatusOK, "PATCH", crontabs+"/a?fieldManager=alice", strings.Replace(body, "  replicas: 1\n", "  replicas: 2\n  color: red\n", 1), "Content-Type", applyCT)
	if sp := changed["spec"].(map[string]any); sp["replicas"] != float64(2) || sp["color"] != "red" || meta(changed)["generation"] != float64(2) {
		t.Fatalf("changed: %v", changed)
	}
	dropped := g.expect(http.StatusOK, "PATCH", crontabs+"/a?fieldManager=alice", strings.Replace(body, "  replicas: 1\n", "", 1), "Content-Type", applyCT)
	if _, ok := dropped["spec"].(map[string]any)["replicas"]; ok {
		t.Fatalf("replicas not removed: %v", dropped["spec"])
	}
	// Another manager setting alice's field: 409 with one cause per field.
	bob := "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\nspec:\n  image: httpd\n"
	conflict := g.expect(http.StatusConflict, "PATCH", crontabs+"/a?fieldManager=bob", bob, "Content-Type", applyCT)
	if conflict["reason"] != "Conflict" || conflict["message"] != `Apply failed with 1 conflict: conflict with "alice": .spec.image` {
		t.Fatalf("conflict: %v", conflict)
	}
	causes := conflict["details"].(map[string]any)["causes"].([]any)
	if len(causes) != 1 || causes[0].(map[string]any)["reason"] != "FieldManagerConflict" || causes[0].(map[string]any)["field"] != ".spec.image" {
		t.Fatalf("conflict causes: %v", causes)
	}
	// force=true takes the field over.
	forced := g.expect(http.StatusOK, "PATCH", crontabs+"/a?fieldManager=bob&force=true", bob, "Content-Type", applyCT)
	if forced["spec"].(map[string]any)["image"] != "httpd" {
		t.Fatalf("forced: %v", forced)
	}
	wantManagers(t, "forced", forced, "alice/Apply", "bob/Apply")
	// Status apply: a status entry; the spec is untouched.
	st := g.expect(http.StatusOK, "PATCH", crontabs+"/a/status?fieldManager=ctrl", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\nstatus:\n  phase: Running\nspec:\n  image: ignored\n", "Content-Type", applyCT)
	if st["status"].(map[string]any)["phase"] != "Running" || st["spec"].(map[string]any)["image"] != "httpd" || meta(st)["generation"] != meta(forced)["generation"] {
		t.Fatalf("status apply: %v", st)
	}
	wantManagers(t, "status", st, "alice/Apply", "bob/Apply", "ctrl/Apply/status")
	// /status of a missing object stays a 404; dry run creates nothing.
	g.expect(http.StatusNotFound, "PATCH", crontabs+"/missing/status?fieldManager=ctrl", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: missing\n", "Content-Type", applyCT)
	g.expect(http.StatusCreated, "PATCH", crontabs+"/dry?fieldManager=alice&dryRun=All", strings.Replace(body, "name: a", "name: dry", 1), "Content-Type", applyCT)
	g.expect(http.StatusNotFound, "GET", crontabs+"/dry", nil)
	// Apply validates as any write: 422, nothing written.
	inv := g.expect(http.StatusUnprocessableEntity, "PATCH", crontabs+"/a?fieldManager=alice&force=true", strings.Replace(body, "replicas: 1", "replicas: 50", 1), "Content-Type", applyCT)
	if !strings.Contains(str(inv["message"]), "spec.replicas: Invalid value: 50") {
		t.Fatalf("invalid apply: %v", inv)
	}
	// Another version of the path: the entry records the request's apiVersion.
	v1b := g.expect(http.StatusOK, "PATCH", "/apis/stable.example.com/v1beta1/namespaces/default/crontabs/a?fieldManager=carol",
		"apiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: a\nspec:\n  size: big\n", "Content-Type", applyCT)
	if v1b["apiVersion"] != "stable.example.com/v1beta1" || v1b["spec"].(map[string]any)["size"] != "big" {
		t.Fatalf("v1beta1 apply: %v", v1b)
	}
	for _, e := range meta(v1b)["managedFields"].([]any) {
		if m := e.(map[string]any); m["manager"] == "carol" && m["apiVersion"] != "stable.example.com/v1beta1" {
			t.Fatalf("carol's entry: %v", m)
		}
	}
}

func TestApplyBadInput(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	for _, tc := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"no field manager", "/a", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\n", 422,
			`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"not yaml", "/a?fieldManager=m", "{{{: [", 400, "error decoding YAML: "},
		{"other kind", "/a?fieldManager=m", "apiVersion: stable.example.com/v1\nkind: Other\nmetadata:\n  name: a\n", 400, "invalid object type: "},
		{"other name", "/a?fieldManager=m", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: b\n", 400,
			"the name of the object (b) does not match the name on the URL (a)"},
		{"managedFields sent", "/a?fieldManager=m", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\n  managedFields: [{manager: x}]\n", 400,
			"metadata.managedFields must be nil"},
		{"undeclared field", "/a?fieldManager=m", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\nspec:\n  nope: 1\n", 500,
			".spec.nope: field not declared in schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := g.expect(tc.code, "PATCH", crontabs+tc.path, tc.body, "Content-Type", applyCT)
			if !strings.Contains(str(st["message"]), tc.msg) {
				t.Fatalf("message %q, want %q in it", st["message"], tc.msg)
			}
		})
	}
	// Nothing was written by any of them.
	g.expect(http.StatusNotFound, "GET", crontabs+"/a", nil)
	// A 3 MiB body: 413 before anything.
	big := "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\nspec:\n  image: " + strings.Repeat("x", 3<<20) + "\n"
	g.expect(http.StatusRequestEntityTooLarge, "PATCH", crontabs+"/a?fieldManager=m", big, "Content-Type", applyCT)
	// Strategic merge stays a 415, listing apply among the accepted types.
	smp := g.expect(http.StatusUnsupportedMediaType, "PATCH", crontabs+"/a", `{}`, "Content-Type", "application/strategic-merge-patch+json")
	if want := "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"; smp["message"] != want {
		t.Fatalf("415: %v", smp["message"])
	}
}

func TestApplyScale(t *testing.T) {
	g := newTestGateway(t)
	g.createCRD(scaleCRD())
	g.expect(http.StatusCreated, "POST", widgets+"?fieldManager=creator", widget("w", map[string]any{"replicas": 2}))
	// The creator's Update owns spec.replicas: a conflict, then force.
	c := g.expect(http.StatusConflict, "PATCH", widgets+"/w/scale?fieldManager=hpa", "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: w\nspec:\n  replicas: 4\n", "Content-Type", applyCT)
	if c["message"] != `Apply failed with 1 conflict: conflict with "creator" using autoscaling/v1: .spec.replicas` {
		t.Fatalf("scale conflict: %v", c["message"])
	}
	// Forced, upstream's scale field manager converts the Scale with the
	// custom resource's converter: a 500, nothing written.
	f := g.expect(http.StatusInternalServerError, "PATCH", widgets+"/w/scale?fieldManager=hpa&force=true", "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: w\nspec:\n  replicas: 4\n", "Content-Type", applyCT)
	if f["message"] != "failed to convert new object (/w; autoscaling/v1, Kind=Scale) to proper version: request to convert CR to an invalid group/version: autoscaling/v1" {
		t.Fatalf("forced scale apply: %v", f["message"])
	}
	obj := g.expect(http.StatusOK, "GET", widgets+"/w", nil)
	if obj["spec"].(map[string]any)["replicas"] != float64(2) || meta(obj)["generation"] != float64(1) {
		t.Fatalf("object after scale apply: %v", obj)
	}
	wantManagers(t, "scale apply", obj, "creator/Update")
	// A merge patch of the scale: an Update entry on scale.
	g.expect(http.StatusOK, "PATCH", widgets+"/w/scale?fieldManager=kubectl-scale", `{"spec":{"replicas":3}}`, "Content-Type", "application/merge-patch+json")
	obj = g.expect(http.StatusOK, "GET", widgets+"/w", nil)
	wantManagers(t, "scale patch", obj, "creator/Update", "kubectl-scale/Update/scale")
	// The scale of a missing object stays a 404.
	g.expect(http.StatusNotFound, "PATCH", widgets+"/none/scale?fieldManager=hpa", "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: none\nspec:\n  replicas: 4\n", "Content-Type", applyCT)
}

// TestManagedFieldsEveryWritePath checks the entry each write path records
// (the manager from fieldManager, else from the User-Agent).
func TestManagedFieldsEveryWritePath(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	ua := func(s string) []string { return []string{"User-Agent", s} }
	created := g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"image": "x"}), ua("kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef")...)
	wantManagers(t, "create", created, "kubectl/Update")
	obj := cronTab("a", map[string]any{"image": "y"})
	meta(obj)["resourceVersion"] = meta(created)["resourceVersion"]
	upd := g.expect(http.StatusOK, "PUT", crontabs+"/a?fieldManager=editor", obj)
	wantManagers(t, "update", upd, "kubectl/Update", "editor/Update")
	mp := g.expect(http.StatusOK, "PATCH", crontabs+"/a", `{"spec":{"color":"red"}}`, append([]string{"Content-Type", "application/merge-patch+json"}, ua("my-controller/v0.1 (linux)")...)...)
	wantManagers(t, "merge patch", mp, "kubectl/Update", "editor/Update", "my-controller/Update")
	jp := g.expect(http.StatusOK, "PATCH", crontabs+"/a?fieldManager=jp", `[{"op":"add","path":"/spec/size","value":"s"}]`, "Content-Type", "application/json-patch+json")
	wantManagers(t, "json patch", jp, "kubectl/Update", "editor/Update", "my-controller/Update", "jp/Update")
	st := g.expect(http.StatusOK, "PATCH", crontabs+"/a/status?fieldManager=st", `{"status":{"phase":"Up"}}`, "Content-Type", "application/merge-patch+json")
	wantManagers(t, "status patch", st, "kubectl/Update", "editor/Update", "my-controller/Update", "jp/Update", "st/Update/status")
	// managedFields a client sends in a corrupt shape are ignored: the
	// stored ones stay.
	bad := runtime.DeepCopyJSON(st)
	meta(bad)["managedFields"] = []any{map[string]any{"manager": "x", "operation": "Nope", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{}}}
	bad["spec"].(map[string]any)["image"] = "z"
	kept := g.expect(http.StatusOK, "PUT", crontabs+"/a?fieldManager=editor", bad)
	wantManagers(t, "corrupt managedFields", kept, "kubectl/Update", "editor/Update", "my-controller/Update", "jp/Update", "st/Update/status")
	// [{}] resets them: none are left.
	reset := runtime.DeepCopyJSON(kept)
	meta(reset)["managedFields"] = []any{map[string]any{}}
	reset["spec"].(map[string]any)["image"] = "w"
	wantManagers(t, "reset", g.expect(http.StatusOK, "PUT", crontabs+"/a?fieldManager=editor", reset))
	// CSA → SSA: kubectl's first server-side apply over an object it
	// created client-side takes its fields over without a conflict.
	csa := cronTab("c", map[string]any{"image": "x"})
	meta(csa)["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c","namespace":"default"},"spec":{"image":"x"}}` + "\n"}
	g.expect(http.StatusCreated, "POST", crontabs+"?fieldManager=kubectl-client-side-apply", csa)
	ssa := g.expect(http.StatusOK, "PATCH", crontabs+"/c?fieldManager=kubectl", "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: c\nspec:\n  image: img2\n", "Content-Type", applyCT)
	if ssa["spec"].(map[string]any)["image"] != "img2" {
		t.Fatalf("ssa after csa: %v", ssa)
	}
}

// TestApplyCRD: an apply that creates a CRD answers 201; force reaches the
// registry; the User-Agent names the manager of a write without
// fieldManager.
func TestApplyCRD(t *testing.T) {
	g := newTestGateway(t)
	const path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.apply.example.com"
	body := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.apply.example.com
  labels: {team: a}
spec:
  group: apply.example.com
  scope: Namespaced
  names: {plural: gizmos, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
	created := g.expect(http.StatusCreated, "PATCH", path+"?fieldManager=alice", body, "Content-Type", applyCT)
	wantManagers(t, "CRD apply", created, "alice/Apply")
	relabel := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gizmos.apply.example.com\n  labels: {team: b}\n"
	c := g.expect(http.StatusConflict, "PATCH", path+"?fieldManager=bob", relabel, "Content-Type", applyCT)
	if c["message"] != `Apply failed with 1 conflict: conflict with "alice": .metadata.labels.team` {
		t.Fatalf("CRD conflict: %v", c["message"])
	}
	forced := g.expect(http.StatusOK, "PATCH", path+"?fieldManager=bob&force=true", relabel, "Content-Type", applyCT)
	if meta(forced)["labels"].(map[string]any)["team"] != "b" {
		t.Fatalf("forced: %v", meta(forced)["labels"])
	}
	patched := g.expect(http.StatusOK, "PATCH", path, `{"metadata":{"annotations":{"a":"b"}}}`,
		"Content-Type", "application/merge-patch+json", "User-Agent", "my-tool/v1.0 (linux/amd64)")
	found := false
	for _, m := range managers(t, patched) {
		found = found || m == "my-tool/Update"
	}
	if !found {
		t.Fatalf("merge patch entry: %v", managers(t, patched))
	}
}
