package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"net/http"
	"strings"
	"testing"
)

// scaleCRD is a cluster-scoped resource with status and scale
// subresources and printer columns of every type.
func scaleCRD() map[string]any {
	str := map[string]any{"type": "string"}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"scope": "Cluster",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"replicas": map[string]any{"type": "integer", "maximum": 20},
							"ratio":    map[string]any{"type": "number"},
							"on":       map[string]any{"type": "boolean"},
							"when":     map[string]any{"type": "string", "format": "date-time"},
							"tags":     map[string]any{"type": "array", "items": str},
							"size":     str,
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{
							"replicas": map[string]any{"type": "integer"},
							"selector": str,
						}},
					},
				}},
				"subresources": map[string]any{
					"status": map[string]any{},
					"scale":  map[string]any{"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"},
				},
				"additionalPrinterColumns": []any{
					map[string]any{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
					map[string]any{"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "description": "how much"},
					map[string]any{"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
					map[string]any{"name": "Size", "type": "string", "jsonPath": ".spec.size", "priority": 1},
					map[string]any{"name": "Tags", "type": "string", "jsonPath": ".spec.tags"},
					map[string]any{"name": "Mismatch", "type": "integer", "jsonPath": ".spec.size"},
					map[string]any{"name": "When", "type": "date", "jsonPath": ".spec.when"},
				},
			}},
		},
	}
}

const widgets = "/apis/example.com/v1/widgets"

func widget(name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": name}, "spec": spec}
}

func TestScaleSubresource(t *testing.T) {
	g := newTestGateway(t)
	g.createCRD(scaleCRD())
	g.expect(http.StatusCreated, "POST", widgets, widget("w", map[string]any{"replicas": 2}))
	g.expect(http.StatusOK, "PATCH", widgets+"/w/status", `{"status":{"replicas":1,"selector":"app=w"}}`, "Content-Type", "application/merge-patch+json")

	s := g.expect(http.StatusOK, "GET", widgets+"/w/scale", nil)
	if s["kind"] != "Scale" || s["apiVersion"] != "autoscaling/v1" || s["spec"].(map[string]any)["replicas"] != float64(2) ||
		s["status"].(map[string]any)["replicas"] != float64(1) || s["status"].(map[string]any)["selector"] != "app=w" || str(meta(s)["uid"]) == "" {
		t.Fatalf("scale: %v", s)
	}
	// PUT: only spec.replicas reaches the object; generation follows the spec.
	s["spec"] = map[string]any{"replicas": 5}
	s["status"] = map[string]any{"replicas": 9}
	put := g.expect(http.StatusOK, "PUT", widgets+"/w/scale", s)
	if put["spec"].(map[string]any)["replicas"] != float64(5) || put["status"].(map[string]any)["replicas"] != float64(1) {
		t.Fatalf("scale put: %v", put)
	}
	obj := g.expect(http.StatusOK, "GET", widgets+"/w", nil)
	if obj["spec"].(map[string]any)["replicas"] != float64(5) || meta(obj)["generation"] != float64(2) {
		t.Fatalf("object after scale: %v", obj)
	}
	// A stale resourceVersion conflicts; none at all is fine.
	g.expect(http.StatusConflict, "PUT", widgets+"/w/scale", s)
	delete(meta(s), "resourceVersion")
	s["spec"] = map[string]any{"replicas": 6}
	g.expect(http.StatusOK, "PUT", widgets+"/w/scale", s)
	// PATCH (kubectl scale).
	p := g.expect(http.StatusOK, "PATCH", widgets+"/w/scale", `{"spec":{"replicas":7}}`, "Content-Type", "application/merge-patch+json")
	if p["spec"].(map[string]any)["replicas"] != float64(7) {
		t.Fatalf("scale patch: %v", p)
	}
	// The object's schema still applies (422), and the name must match (400).
	inv := g.expect(http.StatusUnprocessableEntity, "PATCH", widgets+"/w/scale", `{"spec":{"replicas":50}}`, "Content-Type", "application/merge-patch+json")
	if !strings.Contains(str(inv["message"]), "spec.replicas: Invalid value: 50") {
		t.Fatalf("invalid scale: %v", inv)
	}
	bad := g.expect(http.StatusBadRequest, "PUT", widgets+"/w/scale", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"x"},"spec":{"replicas":1}}`)
	if bad["message"] != "the name of the object (x) does not match the name on the URL (w)" {
		t.Fatalf("name mismatch: %v", bad)
	}
	// Dry run changes nothing.
	g.expect(http.StatusOK, "PATCH", widgets+"/w/scale?dryRun=All", `{"spec":{"replicas":3}}`, "Content-Type", "application/merge-patch+json")
	if o := g.expect(http.StatusOK, "GET", widgets+"/w", nil); o["spec"].(map[string]any)["replicas"] != float64(7) {
		t.Fatalf("dry run scaled: %v", o["spec"])
	}

	// An object without spec.replicas: GET is a 500, a patch not setting
	// replicas a 400, one setting them works.
	g.expect(http.StatusCreated, "POST", widgets, widget("empty", map[string]any{}))
	e := g.expect(http.StatusInternalServerError, "GET", widgets+"/empty/scale", nil)
	if e["message"] != `Internal error occurred: the spec replicas field ".spec.replicas" does not exist` {
		t.Fatalf("missing replicas: %v", e)
	}
	e = g.expect(http.StatusBadRequest, "PATCH", widgets+"/empty/scale", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json")
	if e["message"] != `the spec replicas field ".spec.replicas" cannot be empty` {
		t.Fatalf("empty replicas: %v", e)
	}
	g.expect(http.StatusOK, "PATCH", widgets+"/empty/scale", `{"spec":{"replicas":1}}`, "Content-Type", "application/merge-patch+json")

	// Scale as a Table: DESIRED, AVAILABLE, AGE.
	tbl := g.expect(http.StatusOK, "GET", widgets+"/w/scale", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if got := columnNames(tbl); got != "Name,Desired,Available,Age" {
		t.Fatalf("scale columns %s", got)
	}
	// No scale subresource: 404.
	g.createCronTabCRD()
	nf := g.expect(http.StatusNotFound, "GET", crontabs+"/x/scale", nil)
	if nf["message"] != `crontabs.stable.example.com "x" not found` {
		t.Fatalf("%v", nf)
	}
}

func columnNames(tbl map[string]any) string {
	var out []string
	cols, _ := tbl["columnDefinitions"].([]any)
	for _, c := range cols {
		out = append(out, str(c.(map[string]any)["name"]))
	}
	return strings.Join(out, ",")
}

func TestTableOutput(t *testing.T) {
	g := newTestGateway(t)
	g.createCRD(scaleCRD())
	g.expect(http.StatusCreated, "POST", widgets, widget("a", map[string]any{
		"replicas": 3, "ratio": 1.5, "on": true, "size": "XL", "tags": []any{"x", "y"}, "when": "2020-01-01T00:00:00Z",
	}))
	g.expect(http.StatusCreated, "POST", widgets, widget("b", map[string]any{}))
	const tableV1 = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

	list := g.expect(http.StatusOK, "GET", widgets, nil, "Accept", tableV1)
	if list["kind"] != "Table" || list["apiVersion"] != "meta.k8s.io/v1" || str(meta(list)["resourceVersion"]) == "" {
		t.Fatalf("table: %v", list)
	}
	if got := columnNames(list); got != "Name,Replicas,Ratio,On,Size,Tags,Mismatch,When" {
		t.Fatalf("columns %s", got)
	}
	cols := list["columnDefinitions"].([]any)
	if c := cols[4].(map[string]any); c["priority"] != float64(1) || c["type"] != "string" {
		t.Fatalf("size column %v", c)
	}
	if c := cols[2].(map[string]any); c["description"] != "how much" {
		t.Fatalf("ratio column %v", c)
	}
	if c := cols[1].(map[string]any); c["description"] != "Custom resource definition column (in JSONPath format): .spec.replicas" {
		t.Fatalf("replicas column %v", c)
	}
	rows := list["rows"].([]any)
	if len(rows) != 2 {
		t.Fatalf("rows %v", rows)
	}
	a := rows[0].(map[string]any)
	cells, _ := json.Marshal(a["cells"])
	if !strings.HasPrefix(string(cells), `["a",3,1.5,true,"XL","[\"x\",\"y\"]",null,"`) {
		t.Fatalf("cells %s", cells)
	}
	if obj := a["object"].(map[string]any); obj["kind"] != "PartialObjectMetadata" || obj["apiVersion"] != "meta.k8s.io/v1" || meta(obj)["name"] != "a" {
		t.Fatalf("row object %v", obj)
	}
	b, _ := json.Marshal(rows[1].(map[string]any)["cells"])
	if string(b) != `["b",null,null,null,null,null,null,null]` {
		t.Fatalf("empty cells %s", b)
	}
	// includeObject.
	full := g.expect(http.StatusOK, "GET", widgets+"?includeObject=Object", nil, "Accept", tableV1)
	if o := full["rows"].([]any)[0].(map[string]any)["object"].(map[string]any); o["kind"] != "Widget" || o["spec"] == nil {
		t.Fatalf("includeObject=Object: %v", o)
	}
	none := g.expect(http.StatusOK, "GET", widgets+"?includeObject=None", nil, "Accept", tableV1)
	if o := none["rows"].([]any)[0].(map[string]any)["object"]; o != nil {
		t.Fatalf("includeObject=None: %v", o)
	}
	bad := g.expect(http.StatusBadRequest, "GET", widgets+"?includeObject=All", nil, "Accept", tableV1)
	if bad["message"] != `Unable to convert to Table as requested: includeObject: Invalid value: "All": must be 'Metadata', 'Object', 'None', or empty` {
		t.Fatalf("bad includeObject: %v", bad)
	}
	// One object, v1beta1, and the default columns of a CRD without any.
	one := g.expect(http.StatusOK, "GET", widgets+"/a", nil, "Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
	if one["apiVersion"] != "meta.k8s.io/v1beta1" || len(one["rows"].([]any)) != 1 || str(meta(one)["resourceVersion"]) == "" {
		t.Fatalf("one: %v", one)
	}
	g.createCronTabCRD()
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("c", map[string]any{}))
	ct := g.expect(http.StatusOK, "GET", crontabs, nil, "Accept", tableV1)
	if got := columnNames(ct); got != "Name,Age" {
		t.Fatalf("default columns %s", got)
	}
	if cells := ct["rows"].([]any)[0].(map[string]any)["cells"].([]any); cells[0] != "c" || !strings.HasSuffix(str(cells[1]), "s") {
		t.Fatalf("default cells %v", cells)
	}
	// CRDs: NAME, CREATED AT.
	crds := g.expect(http.StatusOK, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", nil, "Accept", tableV1)
	if got := columnNames(crds); got != "Name,Created At" {
		t.Fatalf("crd columns %s", got)
	}
	// Metadata only, and what cannot be served.
	pm := g.expect(http.StatusOK, "GET", widgets, nil, "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if pm["kind"] != "PartialObjectMetadataList" || len(pm["items"].([]any)) != 2 {
		t.Fatalf("partial list: %v", pm)
	}
	g.expect(http.StatusNotAcceptable, "GET", widgets, nil, "Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	// a protobuf client gets its 406 in protobuf (as upstream)
	if resp, body := g.do("GET", widgets, nil, "Accept", "application/vnd.kubernetes.protobuf"); resp.StatusCode != http.StatusNotAcceptable ||
		resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(body, []byte("k8s\x00")) {
		t.Fatalf("protobuf 406: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	// A Table watch: column definitions with the first event only.
	_, next := g.openWatchAccept(widgets+"?watch=true", tableV1)
	first := g.nextEvent(next, "ADDED", "")
	second := g.nextEvent(next, "ADDED", "")
	if first.Object["kind"] != "Table" || columnNames(first.Object) == "" || second.Object["columnDefinitions"] != nil {
		t.Fatalf("table watch: %v / %v", first.Object, second.Object)
	}
}

func TestResourceVersionSemantics(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	for _, n := range []string{"a", "b", "c"} {
		g.expect(http.StatusCreated, "POST", crontabs, cronTab(n, map[string]any{}))
	}
	names := func(list map[string]any) string {
		var out []string
		for _, it := range list["items"].([]any) {
			out = append(out, str(meta(it.(map[string]any))["name"]))
		}
		return strings.Join(out, ",")
	}
	l := g.expect(http.StatusOK, "GET", crontabs, nil)
	rv := str(meta(l)["resourceVersion"])
	var rvN int64
	_ = json.Unmarshal([]byte(rv), &rvN)
	future := fmt.Sprint(rvN + 1000)

	// Not older than a revision still to come: 504 with upstream's cause.
	s := g.expect(http.StatusGatewayTimeout, "GET", crontabs+"?resourceVersion="+future, nil)
	if s["message"] != fmt.Sprintf("Timeout: Too large resource version: %s, current: %s", future, rv) || s["reason"] != "Timeout" {
		t.Fatalf("future list: %v", s)
	}
	if c := s["details"].(map[string]any)["causes"].([]any)[0].(map[string]any); c["reason"] != "ResourceVersionTooLarge" {
		t.Fatalf("cause %v", c)
	}
	g.expect(http.StatusGatewayTimeout, "GET", crontabs+"/a?resourceVersion="+future, nil)
	g.expect(http.StatusOK, "GET", crontabs+"/a?resourceVersion="+rv, nil)
	g.expect(http.StatusOK, "GET", crontabs+"?resourceVersion=0", nil)
	g.expect(http.StatusOK, "GET", crontabs+"?resourceVersion="+rv+"&resourceVersionMatch=NotOlderThan", nil)
	inv := g.expect(http.StatusUnprocessableEntity, "GET", crontabs+"?resourceVersionMatch=Exact", nil)
	if inv["reason"] != "Invalid" {
		t.Fatalf("exact without rv: %v", inv)
	}

	// A page chain reads one snapshot: d, written after the first page, is
	// not in the second; Exact reads the past.
	p1 := g.expect(http.StatusOK, "GET", crontabs+"?limit=2", nil)
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("d", map[string]any{}))
	cont := str(meta(p1)["continue"])
	p2 := g.expect(http.StatusOK, "GET", crontabs+"?limit=2&continue="+cont, nil)
	if names(p1)+"|"+names(p2) != "a,b|c" || meta(p2)["resourceVersion"] != meta(p1)["resourceVersion"] {
		t.Fatalf("pages %s|%s", names(p1), names(p2))
	}
	if got := names(g.expect(http.StatusOK, "GET", crontabs+"?resourceVersion="+rv+"&resourceVersionMatch=Exact", nil)); got != "a,b,c" {
		t.Fatalf("exact: %s", got)
	}
	g.expect(http.StatusBadRequest, "GET", crontabs+"?limit=2&continue="+cont+"&resourceVersion=5", nil)

	// Compaction: the continue token expires with upstream's 410 and a
	// token that goes on from the latest revision; an exact read is gone.
	resp, err := g.backends.Storage.Client().Put(t.Context(), "/compact-probe", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.backends.Storage.Client().Compact(t.Context(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	exp := g.expect(http.StatusGone, "GET", crontabs+"?limit=2&continue="+cont, nil)
	if exp["reason"] != "Expired" || exp["message"] != listing.InconsistentContinue || str(meta(exp)["continue"]) == "" {
		t.Fatalf("expired continue: %v", exp)
	}
	rest := g.expect(http.StatusOK, "GET", crontabs+"?limit=5&continue="+str(meta(exp)["continue"]), nil)
	if names(rest) != "c,d" {
		t.Fatalf("continue at latest: %s", names(rest))
	}
	gone := g.expect(http.StatusGone, "GET", crontabs+"?resourceVersion="+rv+"&resourceVersionMatch=Exact", nil)
	if gone["message"] != "The resourceVersion for the provided list is too old." {
		t.Fatalf("exact compacted: %v", gone)
	}
	// A watch from a compacted revision: an ERROR event with 410.
	_, next := g.openWatch(crontabs + "?watch=true&resourceVersion=" + rv)
	ev := g.nextEvent(next, "ERROR", "")
	if ev.Object["code"] != float64(410) || !strings.HasPrefix(str(ev.Object["message"]), "too old resource version: "+rv+" (") {
		t.Fatalf("watch: %v", ev.Object)
	}
}

func TestRequestLimits(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	// Bodies over 3 MiB: 413.
	big := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"big"},"spec":{"image":"` + strings.Repeat("x", 3<<20) + `"}}`
	s := g.expect(http.StatusRequestEntityTooLarge, "POST", crontabs, big)
	if s["reason"] != "RequestEntityTooLarge" {
		t.Fatalf("413: %v", s)
	}
	// Nesting deeper than upstream's 10000 levels: 400 before decoding.
	deep := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"deep"},"spec":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`
	s = g.expect(http.StatusBadRequest, "POST", crontabs, deep)
	if !strings.Contains(str(s["message"]), "exceeded max depth") {
		t.Fatalf("deep: %v", s)
	}
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("x", map[string]any{}))
	s = g.expect(http.StatusBadRequest, "PATCH", crontabs+"/x", `{"spec":`+strings.Repeat(`{"a":`, 10001)+"1"+strings.Repeat("}", 10002), "Content-Type", "application/merge-patch+json")
	if !strings.Contains(str(s["message"]), "exceeded max depth") {
		t.Fatalf("deep patch: %v", s)
	}
	// ?timeout: malformed is 400.
	s = g.expect(http.StatusBadRequest, "GET", crontabs+"?timeout=abc", nil)
	if s["message"] != `invalid timeout specified in the request URL - time: invalid duration "abc"` {
		t.Fatalf("timeout: %v", s)
	}
	g.expect(http.StatusOK, "GET", crontabs+"?timeout=10s", nil)
}
