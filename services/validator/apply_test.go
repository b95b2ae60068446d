package validator

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

var ssaWidgetRef = &commonv1.CRDRef{Name: "widgets.ssa.example.com"}

// ssaStep is one write of TestManagedFieldsAsUpstream. Expected values
// were observed on the upstream apiextensions-apiserver v0.33.13
// (bin/apiextensions-upstream) with the same CRD
// (testdata/crds/ssa-widgets.yaml) and the same requests.
type ssaStep struct {
	name   string
	op     validatorv1.Operation
	sub    string
	target string // the object written: its name; the stored state is kept per name
	ua     string
	fm     string
	force  bool
	fv     string // fieldValidation
	// obj is the object of a create, update or patch (after the caller
	// applied a JSON or merge patch), built from the stored one (nil on
	// create).
	obj   func(old map[string]any) map[string]any
	apply string // APPLY body (YAML)

	wantCode    int32
	wantReason  metav1.StatusReason
	wantMessage string
	wantCauses  []metav1.StatusCause
	wantCreated bool
	wantSpec    string // JSON
	wantStatus  string // JSON, "" = none
	// wantManaged are the managedFields entries, as JSON, their time
	// replaced by "T" (upstream leaves some entries without a time: "none").
	wantManaged string
	// wantAnnotations, when set, are the object's annotations (JSON).
	wantAnnotations string
	wantWarnings    []string
}

func widget(name, spec string) func(map[string]any) map[string]any {
	return func(map[string]any) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(`{"apiVersion":"ssa.example.com/v1","kind":"Widget","metadata":{"name":"`+name+`","namespace":"default","uid":"u-`+name+`","creationTimestamp":"2026-11-25T17:31:03Z","generation":1},"spec":`+spec+`}`), &m); err != nil {
			panic(err)
		}
		return m
	}
}

func mutate(fn func(m map[string]any)) func(map[string]any) map[string]any {
	return func(old map[string]any) map[string]any {
		b, _ := json.Marshal(old)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		fn(m)
		return m
	}
}

const (
	bobCreated = `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:color":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}},"f:replicas":{}}},"manager":"bob","operation":"Apply","time":"T"}]`
	bobForced  = `{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:ports":{"k:{\"name\":\"https\"}":{".":{},"f:name":{},"f:port":{}}},"f:replicas":{}}},"manager":"bob","operation":"Apply","time":"T"}`
	aliceTags  = `{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:tags":{"v:\"x\"":{}}}},"manager":"alice","operation":"Apply","time":"T"}`
	ctrlStatus = `{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:phase":{}}},"manager":"ctrl","operation":"Apply","subresource":"status","time":"T"}`
	ctrlr      = `{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:replicas":{}}},"manager":"controller","operation":"Update","subresource":"status","time":"T"}`
	edit       = `{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:args":{}}},"manager":"kubectl-edit","operation":"Update","time":"T"}`
)

func createdByManager(m string) string {
	b, _ := json.Marshal(m)
	return `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:color":{},"f:replicas":{}}},"manager":` + string(b) + `,"operation":"Update","time":"T"}]`
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

const applyA1 = "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: a1\n"

var ssaSteps = []ssaStep{
	{name: "create, manager from a kubectl User-Agent", op: validatorv1.Operation_OPERATION_CREATE, target: "c1", ua: "kubectl/v1.33.0 (linux/amd64) kubernetes/abc",
		obj: widget("c1", `{"replicas":1}`), wantSpec: `{"color":"blue","replicas":1}`, wantManaged: createdByManager("kubectl")},
	{name: "create with fieldManager", op: validatorv1.Operation_OPERATION_CREATE, target: "c2", ua: "probe/1.0", fm: "mgr-a",
		obj: widget("c2", `{"replicas":1}`), wantSpec: `{"color":"blue","replicas":1}`, wantManaged: createdByManager("mgr-a")},
	{name: "create, User-Agent without a slash", op: validatorv1.Operation_OPERATION_CREATE, target: "c4", ua: "Mozilla",
		obj: widget("c4", `{"replicas":1}`), wantSpec: `{"color":"blue","replicas":1}`, wantManaged: createdByManager("Mozilla")},
	{name: "update by the same manager: one entry (time bucket)", op: validatorv1.Operation_OPERATION_UPDATE, target: "c2", ua: "probe/1.0", fm: "mgr-a",
		obj: mutate(func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = 2 }), wantSpec: `{"color":"blue","replicas":2}`, wantManaged: createdByManager("mgr-a")},
	{name: "apply creates", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "bob", wantCreated: true,
		apply:    applyA1 + "spec:\n  replicas: 3\n  color: red\n  ports:\n  - name: http\n    port: 81\n",
		wantSpec: `{"color":"red","ports":[{"name":"http","port":81}],"replicas":3}`, wantManaged: bobCreated},
	{name: "forced apply: removed field defaulted again", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "bob", force: true,
		apply:    applyA1 + "spec:\n  replicas: 3\n  ports:\n  - name: https\n    port: 443\n",
		wantSpec: `{"color":"blue","ports":[{"name":"https","port":443}],"replicas":3}`, wantManaged: "[" + bobForced + "]"},
	{name: "apply by a second manager: a set", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "alice",
		apply:    applyA1 + "spec:\n  tags: [x]\n",
		wantSpec: `{"color":"blue","ports":[{"name":"https","port":443}],"replicas":3,"tags":["x"]}`, wantManaged: "[" + aliceTags + "," + bobForced + "]"},
	{name: "merge patch: Update of the User-Agent's manager", op: validatorv1.Operation_OPERATION_PATCH, target: "a1", ua: "kubectl-edit/v1.33.0",
		obj:      mutate(func(m map[string]any) { m["spec"].(map[string]any)["args"] = []any{"q"} }),
		wantSpec: `{"args":["q"],"color":"blue","ports":[{"name":"https","port":443}],"replicas":3,"tags":["x"]}`, wantManaged: "[" + aliceTags + "," + bobForced + "," + edit + "]"},
	{name: "status apply", op: validatorv1.Operation_OPERATION_APPLY, sub: "status", target: "a1", fm: "ctrl",
		apply:    applyA1 + "status:\n  phase: Ready\n",
		wantSpec: `{"args":["q"],"color":"blue","ports":[{"name":"https","port":443}],"replicas":3,"tags":["x"]}`, wantStatus: `{"phase":"Ready"}`,
		wantManaged: "[" + aliceTags + "," + bobForced + "," + ctrlStatus + "," + edit + "]"},
	{name: "status merge patch", op: validatorv1.Operation_OPERATION_PATCH, sub: "status", target: "a1", ua: "controller/1",
		obj:      mutate(func(m map[string]any) { m["status"].(map[string]any)["replicas"] = 3 }),
		wantSpec: `{"args":["q"],"color":"blue","ports":[{"name":"https","port":443}],"replicas":3,"tags":["x"]}`, wantStatus: `{"phase":"Ready","replicas":3}`,
		wantManaged: "[" + aliceTags + "," + bobForced + "," + ctrlStatus + "," + ctrlr + "," + edit + "]"},

	// The scale subresource: its managedFields entries are the Scale's,
	// moved to the custom resource's replicas path (without a time, as
	// upstream's ScaleHandler leaves them).
	{name: "apply creates s1", op: validatorv1.Operation_OPERATION_APPLY, target: "s1", fm: "bob", wantCreated: true,
		apply:    "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: s1\nspec:\n  replicas: 3\n",
		wantSpec: `{"color":"blue","replicas":3}`, wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"bob","operation":"Apply","time":"T"}]`},
	{name: "scale apply conflict", op: validatorv1.Operation_OPERATION_APPLY, sub: "scale", target: "s1", fm: "scaler",
		apply:    "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: s1\nspec:\n  replicas: 5\n",
		wantCode: 409, wantReason: metav1.StatusReasonConflict, wantMessage: `Apply failed with 1 conflict: conflict with "bob": .spec.replicas`,
		wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "bob"`, Field: ".spec.replicas"}}},
	{name: "scale merge patch", op: validatorv1.Operation_OPERATION_PATCH, sub: "scale", target: "s1", ua: "hpa/1.0",
		obj:      mutate(func(m map[string]any) { m["spec"].(map[string]any)["replicas"] = 6 }),
		wantSpec: `{"color":"blue","replicas":6}`, wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"hpa","operation":"Update","subresource":"scale","time":"none"}]`},
	{name: "forced scale apply: upstream's converter refuses the applied Scale", op: validatorv1.Operation_OPERATION_APPLY, sub: "scale", target: "s1", fm: "scaler", force: true,
		apply:    "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: s1\nspec:\n  replicas: 7\n",
		wantCode: 500, wantMessage: "failed to convert new object (/s1; autoscaling/v1, Kind=Scale) to proper version: request to convert CR to an invalid group/version: autoscaling/v1"},
	{name: "scale apply of the custom resource's kind", op: validatorv1.Operation_OPERATION_APPLY, sub: "scale", target: "s1", fm: "scaler",
		apply:    "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: s1\nspec:\n  replicas: 7\n",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "invalid object type: ssa.example.com/v1, Kind=Widget"},

	// Granularity as the schema says: an atomic map, a preserve-unknown
	// object (its fields owned one by one), a granular map, int-or-string.
	{name: "apply of atomic, preserved, granular and int-or-string fields", op: validatorv1.Operation_OPERATION_APPLY, target: "t1", fm: "x", wantCreated: true,
		apply:       "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: t1\nspec:\n  free: {anything: [1, 2]}\n  size: 10%\n  atomicMap: {a: \"1\"}\n  labels: {k: v}\n",
		wantSpec:    `{"atomicMap":{"a":"1"},"color":"blue","free":{"anything":[1,2]},"labels":{"k":"v"},"size":"10%"}`,
		wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:atomicMap":{},"f:free":{"f:anything":{}},"f:labels":{"f:k":{}},"f:size":{}}},"manager":"x","operation":"Apply","time":"T"}]`},
	{name: "apply with a duplicate key under Strict", op: validatorv1.Operation_OPERATION_APPLY, target: "t2", fm: "x", fv: "Strict",
		apply:    "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: t2\nspec:\n  color: a\n  color: b\n",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"color\" already set in map"},
	{name: "apply with a duplicate key under Warn", op: validatorv1.Operation_OPERATION_APPLY, target: "t3", fm: "x", wantCreated: true,
		apply:        "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: t3\nspec:\n  color: a\n  color: b\n",
		wantWarnings: []string{`line 7: key "color" already set in map`},
		wantSpec:     `{"color":"b"}`,
		wantManaged:  `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:color":{}}},"manager":"x","operation":"Apply","time":"T"}]`},

	// managedFields sent by the client: a shape the field manager cannot
	// decode keeps the stored ones, [{}] resets them, valid ones replace them.
	{name: "update carrying managedFields with an unknown operation", op: validatorv1.Operation_OPERATION_UPDATE, target: "c2", ua: "probe/1.0",
		obj: mutate(func(m map[string]any) {
			m["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "bad", "operation": "Bogus"}}
			m["spec"].(map[string]any)["replicas"] = 5
		}),
		wantSpec:    `{"color":"blue","replicas":5}`,
		wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:color":{}}},"manager":"mgr-a","operation":"Update","time":"T"},{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"probe","operation":"Update","time":"T"}]`},
	{name: "update carrying managedFields with undecodable fieldsV1", op: validatorv1.Operation_OPERATION_UPDATE, target: "c2", ua: "probe/1.0",
		obj: mutate(func(m map[string]any) {
			m["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "bad", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:nope": "x"}}}
			m["spec"].(map[string]any)["replicas"] = 6
		}),
		wantSpec:    `{"color":"blue","replicas":6}`,
		wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:color":{}}},"manager":"mgr-a","operation":"Update","time":"T"},{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"probe","operation":"Update","time":"T"}]`},
	{name: "update resetting managedFields with [{}]", op: validatorv1.Operation_OPERATION_UPDATE, target: "c2", ua: "probe/1.0",
		obj: mutate(func(m map[string]any) {
			m["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{}}
			m["spec"].(map[string]any)["replicas"] = 7
		}),
		wantSpec: `{"color":"blue","replicas":7}`, wantManaged: ``},
	{name: "update carrying valid managedFields", op: validatorv1.Operation_OPERATION_UPDATE, target: "c2", ua: "probe/1.0",
		obj: mutate(func(m map[string]any) {
			m["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "m1", "operation": "Update", "apiVersion": "ssa.example.com/v1", "time": "2020-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}}}
			m["spec"].(map[string]any)["replicas"] = 8
		}),
		wantSpec:    `{"color":"blue","replicas":8}`,
		wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"probe","operation":"Update","time":"T"}]`},

	// kubectl's migration from client-side apply: the first server-side
	// apply of an object created by client-side apply.
	{name: "client-side apply create", op: validatorv1.Operation_OPERATION_CREATE, target: "m1", fm: "csa", ua: "kubectl-client-side-apply/v1.33.0",
		obj: func(map[string]any) map[string]any {
			w := widget("m1", `{"replicas":1,"color":"green"}`)(nil)
			w["metadata"].(map[string]any)["annotations"] = map[string]any{lastApplied: "{\"apiVersion\":\"ssa.example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"annotations\":{},\"name\":\"m1\",\"namespace\":\"default\"},\"spec\":{\"replicas\":1,\"color\":\"green\"}}\n"}
			return w
		},
		wantSpec:    `{"color":"green","replicas":1}`,
		wantManaged: `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{".":{},"f:color":{},"f:replicas":{}}},"manager":"csa","operation":"Update","time":"T"}]`},
	{name: "first server-side apply over client-side apply", op: validatorv1.Operation_OPERATION_APPLY, target: "m1", fm: "kubectl", ua: "kubectl/v1.33.0",
		apply:           "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: m1\n  namespace: default\nspec:\n  replicas: 1\n",
		wantSpec:        `{"color":"green","replicas":1}`,
		wantAnnotations: `{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"ssa.example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"m1\",\"namespace\":\"default\"},\"spec\":{\"replicas\":1}}\n"}`,
		wantManaged:     `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"kubectl","operation":"Apply","time":"none"},{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{".":{},"f:color":{},"f:replicas":{}}},"manager":"csa","operation":"Update","time":"T"}]`},
	{name: "second server-side apply", op: validatorv1.Operation_OPERATION_APPLY, target: "m1", fm: "kubectl", ua: "kubectl/v1.33.0",
		apply:           "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: m1\nspec:\n  replicas: 2\n  color: green\n",
		wantSpec:        `{"color":"green","replicas":2}`,
		wantAnnotations: `{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"ssa.example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"m1\"},\"spec\":{\"color\":\"green\",\"replicas\":2}}\n"}`,
		wantManaged:     `[{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:color":{},"f:replicas":{}}},"manager":"kubectl","operation":"Apply","time":"T"},{"apiVersion":"ssa.example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{".":{},"f:color":{}}},"manager":"csa","operation":"Update","time":"T"}]`},

	// Bad input, each answered as upstream, nothing written.
	{name: "apply body not YAML", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: "{{{ not yaml",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "error decoding YAML: error converting YAML to JSON: yaml: line 1: did not find expected ',' or '}'"},
	{name: "apply body a list", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: "[1,2]",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"},
	{name: "apply at another apiVersion", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: "apiVersion: ssa.example.com/v2\nkind: Widget\nmetadata:\n  name: a1\n",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "invalid object type: ssa.example.com/v2, Kind=Widget"},
	{name: "apply of another kind", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: "apiVersion: ssa.example.com/v1\nkind: Gadget\nmetadata:\n  name: a1\n",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "invalid object type: ssa.example.com/v1, Kind=Gadget"},
	{name: "apply with duplicate list-map keys", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x",
		apply:    applyA1 + "spec:\n  ports:\n  - name: dup\n    port: 1\n  - name: dup\n    port: 2\n",
		wantCode: 500, wantMessage: `failed to create typed patch object (/a1; ssa.example.com/v1, Kind=Widget): .spec.ports: duplicate entries for key [name="dup"]`},
	{name: "apply carrying managedFields", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x",
		apply:    applyA1 + "  managedFields:\n  - manager: foo\nspec:\n  replicas: 9\n",
		wantCode: 400, wantReason: metav1.StatusReasonBadRequest, wantMessage: "metadata.managedFields must be nil"},
	{name: "apply of an undeclared field", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: applyA1 + "spec:\n  unknownField: 1\n",
		wantCode: 500, wantMessage: "failed to create typed patch object (/a1; ssa.example.com/v1, Kind=Widget): .spec.unknownField: field not declared in schema"},
	{name: "apply of a wrongly typed value", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: applyA1 + "spec:\n  replicas: \"notint\"\n",
		wantCode: 500, wantMessage: "failed to create typed patch object (/a1; ssa.example.com/v1, Kind=Widget): .spec.replicas: expected numeric (int or float), got string"},
	{name: "apply of YAML 1.1 booleans into a set of strings", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: applyA1 + "spec:\n  tags: [x, y]\n",
		wantCode: 500, wantMessage: "failed to create typed patch object (/a1; ssa.example.com/v1, Kind=Widget): .spec.tags[=true]: expected string, got &value.valueUnstructured{Value:true}"},
	{name: "apply body over 3 MiB", op: validatorv1.Operation_OPERATION_APPLY, target: "big", fm: "x",
		apply:    "apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: big\nspec:\n  free:\n    blob: \"" + strings.Repeat("a", 3<<20) + "\"\n",
		wantCode: 413, wantReason: metav1.StatusReasonRequestEntityTooLarge, wantMessage: "Request entity too large: limit is 3145728"},
	{name: "apply conflict", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: applyA1 + "spec:\n  replicas: 9\n",
		wantCode: 409, wantReason: metav1.StatusReasonConflict, wantMessage: `Apply failed with 1 conflict: conflict with "bob": .spec.replicas`,
		wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "bob"`, Field: ".spec.replicas"}}},
	{name: "apply without a name takes the path's: conflict", op: validatorv1.Operation_OPERATION_APPLY, target: "a1", fm: "x", apply: "apiVersion: ssa.example.com/v1\nkind: Widget\nspec:\n  replicas: 1\n",
		wantCode: 409, wantReason: metav1.StatusReasonConflict, wantMessage: `Apply failed with 1 conflict: conflict with "bob": .spec.replicas`,
		wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "bob"`, Field: ".spec.replicas"}}},
}

func TestManagedFieldsAsUpstream(t *testing.T) {
	client := serve(t, newDirService(t))
	ctx := context.Background()
	stored := map[string]map[string]any{}
	rv := 10
	for _, st := range ssaSteps {
		t.Run(st.name, func(t *testing.T) {
			old := stored[st.target]
			req := &validatorv1.AdmitRequest{
				Crd: ssaWidgetRef, Version: "v1", Operation: st.op, Subresource: st.sub, ManagedFields: true,
				FieldManager: st.fm, UserAgent: st.ua, Force: st.force, ApplyPatch: []byte(st.apply),
				Namespace: "default", Name: st.target, FieldValidation: st.fv,
			}
			if old != nil {
				req.OldObject, _ = json.Marshal(old)
			}
			if st.obj != nil {
				req.Object, _ = json.Marshal(st.obj(old))
			}
			start := time.Now().Truncate(time.Second)
			resp, err := client.Admit(ctx, req)
			if st.wantCode != 0 {
				if err == nil {
					t.Fatalf("want %d, got an object %s", st.wantCode, resp.GetObject())
				}
				s := kstatus.FromError(err)
				if s.Code != st.wantCode || s.Reason != st.wantReason || s.Message != st.wantMessage {
					t.Fatalf("got %d %s %q, want %d %s %q", s.Code, s.Reason, s.Message, st.wantCode, st.wantReason, st.wantMessage)
				}
				var causes []metav1.StatusCause
				if s.Details != nil {
					causes = s.Details.Causes
				}
				if !reflect.DeepEqual(causes, st.wantCauses) {
					t.Fatalf("causes %+v, want %+v", causes, st.wantCauses)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetCauses()) > 0 {
				t.Fatalf("causes: %v", resp.GetCauses())
			}
			if !reflect.DeepEqual(resp.GetWarnings(), st.wantWarnings) {
				t.Errorf("warnings %q, want %q", resp.GetWarnings(), st.wantWarnings)
			}
			if resp.GetCreated() != st.wantCreated {
				t.Errorf("created %v, want %v", resp.GetCreated(), st.wantCreated)
			}
			obj := fromJSON(t, resp.GetObject())
			jsonEqual(t, "spec", obj["spec"], st.wantSpec)
			if st.wantStatus != "" || obj["status"] != nil {
				jsonEqual(t, "status", obj["status"], st.wantStatus)
			}
			meta := obj["metadata"].(map[string]any)
			var entries []any
			mf, _ := meta["managedFields"].([]any)
			for _, e := range mf {
				e := maps.Clone(e.(map[string]any))
				entries = append(entries, e)
				if _, ok := e["time"]; !ok {
					e["time"] = "none"
					continue
				}
				ts, err := time.Parse(time.RFC3339, e["time"].(string))
				if err != nil || ts.Before(start.Add(-time.Hour)) {
					t.Errorf("entry time %v: %v", e["time"], err)
				}
				e["time"] = "T"
			}
			if st.wantAnnotations != "" {
				jsonEqual(t, "annotations", meta["annotations"], st.wantAnnotations)
			}
			jsonEqual(t, "managedFields", entries, st.wantManaged)
			rv++
			meta["resourceVersion"] = strconv.Itoa(rv)
			stored[st.target] = obj
		})
	}
}

func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if want != "" {
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatalf("%s: bad expectation: %v", what, err)
		}
	}
	gb, _ := json.Marshal(got)
	var g any
	_ = json.Unmarshal(gb, &g)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, gb, want)
	}
}

// TestFieldManagerFollowsCRD: the type converter is cached with the
// compiled CRD version and rebuilt from the new schema when the CRD
// changes (a field the first generation does not declare is refused as
// upstream refuses it, and accepted once the next generation declares it).
func TestFieldManagerFollowsCRD(t *testing.T) {
	base := loadCRD(t, "testdata/crds/ssa-widgets.yaml")
	base.UID, base.Generation = "uid-ssa", 1
	gen2 := base.DeepCopy()
	gen2.Generation = 2
	spec := gen2.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["extra"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	gen2.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	reg := &fakeRegistry{initial: []*CRD{base}, events: make(chan *registryv1.WatchResponse, 4)}
	addr := "inproc://validator-test-registry-ssa"
	lis, err := grpcx.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcx.NewServer()
	registryv1.RegisterRegistryServiceServer(srv, reg)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	svc, err := New(context.Background(), Config{RegistryAddr: addr, CRDWaitTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	for deadline := time.Now().Add(5 * time.Second); svc.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("never ready:", svc.Ready())
		}
	}
	client := serve(t, svc)
	apply := func(gen int64) (*validatorv1.AdmitResponse, error) {
		return client.Admit(context.Background(), &validatorv1.AdmitRequest{
			Crd: &commonv1.CRDRef{Name: base.Name, Uid: "uid-ssa", Generation: gen}, Version: "v1",
			Operation: validatorv1.Operation_OPERATION_APPLY, ManagedFields: true, FieldManager: "x", Namespace: "default", Name: "e",
			ApplyPatch: []byte("apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: e\nspec:\n  extra: yes-please\n"),
		})
	}
	_, err = apply(1)
	if s := kstatus.FromError(err); s.Code != 500 || s.Message != "failed to create typed patch object (/e; ssa.example.com/v1, Kind=Widget): .spec.extra: field not declared in schema" {
		t.Fatalf("generation 1: %d %q", s.Code, s.Message)
	}
	reg.events <- crdEvent(commonv1.EventType_EVENT_TYPE_MODIFIED, gen2)
	resp, err := apply(2)
	if err != nil || len(resp.GetCauses()) > 0 {
		t.Fatalf("generation 2: %v %v", err, resp.GetCauses())
	}
	obj := fromJSON(t, resp.GetObject())
	jsonEqual(t, "spec", obj["spec"], `{"color":"blue","extra":"yes-please"}`)
	mf := obj["metadata"].(map[string]any)["managedFields"].([]any)
	jsonEqual(t, "fieldsV1", mf[0].(map[string]any)["fieldsV1"], `{"f:spec":{"f:extra":{}}}`)
}
