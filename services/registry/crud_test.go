package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

func TestCreate(t *testing.T) {
	group := newGroup(t)
	crd := createT(t, crdJSON(group, "widgets", "Widget", func(o map[string]any) {
		o["metadata"].(map[string]any)["labels"] = map[string]any{"team": "a"}
		o["status"] = map[string]any{"storedVersions": []any{"v9"}} // ignored
	}))
	if crd.Generation != 1 || crd.UID == "" || crd.CreationTimestamp.IsZero() || crd.ResourceVersion == "" {
		t.Errorf("system metadata not set: %+v", crd.ObjectMeta)
	}
	if crd.Spec.Names.ListKind != "WidgetList" || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("defaults not applied: %+v %+v", crd.Spec.Names, crd.Spec.Conversion)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1" {
		t.Errorf("storedVersions = %v", got)
	}
	if crd.Status.AcceptedNames.Plural != "" || len(crd.Status.Conditions) != 0 {
		t.Errorf("status on create = %+v", crd.Status)
	}
	if len(crd.Finalizers) != 0 {
		t.Errorf("finalizers = %v (upstream adds the cleanup finalizer on delete)", crd.Finalizers)
	}

	_, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: crdJSON(group, "widgets", "Widget")})
	if s := status(err); s.Code != http.StatusConflict || s.Reason != metav1.StatusReasonAlreadyExists ||
		s.Message != fmt.Sprintf(`customresourcedefinitions.apiextensions.k8s.io "widgets.%s" already exists`, group) {
		t.Errorf("second create: %+v", s)
	}

	// dry run: validated, not stored
	resp, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: crdJSON(group, "gadgets", "Gadget"), Options: &registryv1.WriteOptions{DryRun: true}})
	if err != nil {
		t.Fatal(err)
	}
	if decodeT(t, resp.GetObject()).ResourceVersion != "" {
		t.Error("dry run returned a resourceVersion")
	}
	if _, err := testRegistry.Get(testCtx(t), &registryv1.GetRequest{Name: "gadgets." + group}); status(err).Code != http.StatusNotFound {
		t.Errorf("dry run stored the CRD: %v", err)
	}
	_, err = testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: crdJSON(group, "widgets", "Widget"), Options: &registryv1.WriteOptions{DryRun: true}})
	if s := status(err); s.Code != http.StatusConflict || s.Reason != metav1.StatusReasonAlreadyExists {
		t.Errorf("dry run of an existing CRD: %+v", s)
	}

	// a resourceVersion on create is refused as upstream's storage does
	_, err = testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: crdJSON(group, "gizmos", "Gizmo", func(o map[string]any) {
		o["metadata"].(map[string]any)["resourceVersion"] = "12"
	})})
	if s := status(err); s.Code != http.StatusInternalServerError || s.Message != "resourceVersion should not be set on objects to be created" {
		t.Errorf("create with resourceVersion: %+v", s)
	}
}

func TestCreateErrors(t *testing.T) {
	group := newGroup(t)
	tests := []struct {
		name       string
		body       string
		validation string
		code       int32
		msg        string
		warnings   []string
	}{
		{
			name: "malformed", body: `{"apiVersion":`, code: 400,
			msg: `the object provided is unrecognized (must be of type CustomResourceDefinition): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":)`,
		},
		{
			name: "unknown field strict", validation: "Strict", code: 400,
			body: strings.Replace(string(crdJSON(group, "as", "A")), `"scope"`, `"scoop":1,"scope"`, 1),
			msg:  `CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: strict decoding error: unknown field "spec.scoop"`,
		},
		{
			name: "wrong type", code: 400,
			body: strings.Replace(string(crdJSON(group, "bs", "B")), `"served":true`, `"served":"yes"`, 1),
			msg:  `CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: json: cannot unmarshal string into Go struct field CustomResourceDefinitionVersion.spec.versions.served of type bool`,
		},
		{
			name: "other version", code: 400,
			body: strings.Replace(string(crdJSON(group, "cs", "C")), `apiextensions.k8s.io/v1"`, `apiextensions.k8s.io/v1beta1"`, 1),
			msg:  `the API version in the data (apiextensions.k8s.io/v1beta1) does not match the expected API version (apiextensions.k8s.io/v1)`,
		},
		{
			name: "invalid", code: 422,
			body: strings.Replace(string(crdJSON(group, "ds", "D")), `"scope":"Namespaced"`, `"scope":"Everywhere"`, 1),
			msg:  fmt.Sprintf(`CustomResourceDefinition.apiextensions.k8s.io "ds.%s" is invalid: spec.scope: Unsupported value: "Everywhere": supported values: "Cluster", "Namespaced"`, group),
		},
		{
			name: "unknown field warns", validation: "", code: 0,
			body:     strings.Replace(string(crdJSON(group, "es", "E")), `"scope"`, `"scoop":1,"scope"`, 1),
			warnings: []string{`unknown field "spec.scoop"`},
		},
		{
			name: "unknown field ignored", validation: "Ignore", code: 0,
			body: strings.Replace(string(crdJSON(group, "fs", "F")), `"scope"`, `"scoop":1,"scope"`, 1),
		},
		{
			// v1.33 sends no warning (the "unrecognized format" warning
			// came after it).
			name: "unrecognized format does not warn", code: 0,
			body: strings.Replace(string(crdJSON(group, "hs", "H")), `"type":"object"`, `"type":"object","properties":{"a":{"type":"string","format":"colour"}}`, 1),
		},
		{
			// nor for a set of objects (later versions' "x-kubernetes-list-type:
			// set for items of type \"object\" is not supported by
			// server-side apply or CEL validation rules").
			name: "set of atomic objects does not warn", code: 0,
			body: strings.Replace(string(crdJSON(group, "is", "I")), `"type":"object"`, `"type":"object","properties":{"s":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"object","x-kubernetes-map-type":"atomic"}}}`, 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{
				Object: []byte(tt.body), Options: &registryv1.WriteOptions{FieldValidation: tt.validation},
			})
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if fmt.Sprint(resp.GetWarnings()) != fmt.Sprint(tt.warnings) {
					t.Errorf("warnings = %q, want %q", resp.GetWarnings(), tt.warnings)
				}
				return
			}
			s := status(err)
			if s.Code != tt.code || s.Message != tt.msg {
				t.Errorf("got %d %q\nwant %d %q", s.Code, s.Message, tt.code, tt.msg)
			}
			if tt.code == 422 && (s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Field != "spec.scope") {
				t.Errorf("causes: %+v", s.Details)
			}
		})
	}
}

func TestConditionsAfterCreate(t *testing.T) {
	group := newGroup(t)
	start := time.Now()
	createT(t, crdJSON(group, "things", "Thing", func(o map[string]any) {
		spec(o)["names"].(map[string]any)["shortNames"] = []any{"th"}
		spec(o)["names"].(map[string]any)["categories"] = []any{"all"}
	}))
	crd := waitEstablished(t, "things."+group)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Established after %v", d)
	}
	na := findCondition(crd, condNamesAccepted)
	if na == nil || na.Status != apiextensionsv1.ConditionTrue || na.Reason != "NoConflicts" || na.Message != "no conflicts found" {
		t.Errorf("NamesAccepted = %+v", na)
	}
	est := findCondition(crd, condEstablished)
	if est.Reason != "InitialNamesAccepted" || est.Message != "the initial names have been accepted" || est.LastTransitionTime.IsZero() {
		t.Errorf("Established = %+v", est)
	}
	if !semanticEqual(crd.Status.AcceptedNames, crd.Spec.Names) {
		t.Errorf("acceptedNames = %+v, want %+v", crd.Status.AcceptedNames, crd.Spec.Names)
	}
}

func TestNamesConflict(t *testing.T) {
	group := newGroup(t)
	createT(t, crdJSON(group, "foos", "Foo", func(o map[string]any) {
		spec(o)["names"].(map[string]any)["shortNames"] = []any{"bar"}
	}))
	waitEstablished(t, "foos."+group)
	// "bar" is foos' short name
	createT(t, crdJSON(group, "bars", "Bar"))
	var crd *CRD
	eventually(t, 5*time.Second, "NamesAccepted False", func() bool {
		crd = getT(t, "bars."+group)
		c := findCondition(crd, condNamesAccepted)
		return c != nil && c.Status == apiextensionsv1.ConditionFalse
	})
	na := findCondition(crd, condNamesAccepted)
	if na.Reason != "SingularConflict" || na.Message != `"bar" is already in use` {
		t.Errorf("NamesAccepted = %+v", na)
	}
	est := findCondition(crd, condEstablished)
	if est == nil || est.Status != apiextensionsv1.ConditionFalse || est.Reason != "NotAccepted" || est.Message != "not all names are accepted" {
		t.Errorf("Established = %+v", est)
	}
	if crd.Status.AcceptedNames.Plural != "bars" || crd.Status.AcceptedNames.Singular != "" || crd.Status.AcceptedNames.Kind != "Bar" {
		t.Errorf("acceptedNames = %+v", crd.Status.AcceptedNames)
	}

	// a kind clash (the last conflict found is the one reported: the
	// listKind FooList clashes too)
	createT(t, crdJSON(group, "bazs", "Foo", func(o map[string]any) {
		spec(o)["names"].(map[string]any)["singular"] = "baz"
	}))
	eventually(t, 5*time.Second, "ListKindConflict", func() bool {
		c := findCondition(getT(t, "bazs."+group), condNamesAccepted)
		return c != nil && c.Reason == "ListKindConflict" && c.Message == `"FooList" is already in use`
	})

	// a CRD of another group may use the same names
	other := newGroup(t)
	createT(t, crdJSON(other, "bars", "Bar"))
	waitEstablished(t, "bars."+other)

	// deleting foos frees "bar"
	if _, err := testRegistry.Delete(testCtx(t), &registryv1.DeleteRequest{Name: "foos." + group}); err != nil {
		t.Fatal(err)
	}
	crd = waitEstablished(t, "bars."+group)
	if na := findCondition(crd, condNamesAccepted); na.Status != apiextensionsv1.ConditionTrue {
		t.Errorf("NamesAccepted after delete = %+v", na)
	}
}

func TestList(t *testing.T) {
	group := newGroup(t)
	for i, p := range []string{"alphas", "betas", "gammas"} {
		kind := strings.ToUpper(p[:1]) + p[1:len(p)-1]
		createT(t, crdJSON(group, p, kind, func(o map[string]any) {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"test": group, "n": fmt.Sprint(i)}
		}))
	}
	list := func(opts *commonv1.ListOptions) *registryv1.ListResponse {
		t.Helper()
		resp, err := testRegistry.List(testCtx(t), &registryv1.ListRequest{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	names := func(resp *registryv1.ListResponse) []string {
		var out []string
		for _, o := range resp.GetObjects() {
			out = append(out, decodeT(t, o).Name)
		}
		return out
	}
	all := list(&commonv1.ListOptions{LabelSelector: "test=" + group})
	if got := names(all); len(got) != 3 || all.GetResourceVersion() == 0 {
		t.Fatalf("list = %v rv %d", got, all.GetResourceVersion())
	}
	if got := names(list(&commonv1.ListOptions{LabelSelector: "test=" + group + ",n!=1"})); fmt.Sprint(got) != fmt.Sprintf("[alphas.%[1]s gammas.%[1]s]", group) {
		t.Errorf("label selector: %v", got)
	}
	if got := names(list(&commonv1.ListOptions{FieldSelector: "metadata.name=betas." + group})); fmt.Sprint(got) != "[betas."+group+"]" {
		t.Errorf("field selector: %v", got)
	}
	page := list(&commonv1.ListOptions{LabelSelector: "test=" + group, Limit: 2})
	if len(page.GetObjects()) != 2 || page.GetContinueToken() == "" {
		t.Fatalf("first page: %d objects, continue %q", len(page.GetObjects()), page.GetContinueToken())
	}
	rest := list(&commonv1.ListOptions{LabelSelector: "test=" + group, Limit: 2, ContinueToken: page.GetContinueToken()})
	if len(rest.GetObjects()) != 1 || rest.GetContinueToken() != "" {
		t.Errorf("second page: %d objects, continue %q", len(rest.GetObjects()), rest.GetContinueToken())
	}
}

func TestUpdate(t *testing.T) {
	group := newGroup(t)
	name := "parts." + group
	createT(t, crdJSON(group, "parts", "Part"))
	cur := waitEstablished(t, name)

	update := func(crd *CRD, sub string) (*CRD, error) {
		body, _ := json.Marshal(crd)
		resp, err := testRegistry.Update(testCtx(t), &registryv1.UpdateRequest{Name: name, Subresource: sub, Object: body})
		if err != nil {
			return nil, err
		}
		return decodeT(t, resp.GetObject()), nil
	}

	// metadata only: same generation; status changes ignored
	edit := cur.DeepCopy()
	edit.Labels = map[string]string{"x": "y"}
	edit.Status.StoredVersions = []string{"v1", "v0"}
	edit.Status.Conditions = nil
	out, err := update(edit, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Generation != 1 || out.Labels["x"] != "y" || len(out.Status.StoredVersions) != 1 || !conditionTrue(out, condEstablished) {
		t.Errorf("metadata update: generation %d labels %v status %+v", out.Generation, out.Labels, out.Status)
	}

	// spec change bumps the generation
	edit = out.DeepCopy()
	edit.Spec.Names.ShortNames = []string{"pt"}
	out, err = update(edit, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Generation != 2 {
		t.Errorf("generation after spec change = %d", out.Generation)
	}
	eventually(t, 5*time.Second, "short name accepted", func() bool {
		return fmt.Sprint(getT(t, name).Status.AcceptedNames.ShortNames) == "[pt]"
	})

	// stale resourceVersion
	_, err = update(edit, "")
	if s := status(err); s.Code != http.StatusConflict || s.Message != fmt.Sprintf(`Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io "%s": the object has been modified; please apply your changes to the latest version and try again`, name) {
		t.Errorf("stale update: %+v", s)
	}
	// no resourceVersion: upstream's generic store names the resource as
	// the kind and renders the value (a uint64) as 0x0
	edit = getT(t, name)
	edit.ResourceVersion = ""
	_, err = update(edit, "")
	if s := status(err); s.Code != 422 || s.Details.Kind != "customresourcedefinitions" || s.Message != fmt.Sprintf(`customresourcedefinitions.apiextensions.k8s.io "%s" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update`, name) {
		t.Errorf("update without resourceVersion: %+v", s)
	}
	// name mismatch
	edit = getT(t, name)
	edit.Name = "other." + group
	_, err = update(edit, "")
	if s := status(err); s.Code != 400 || s.Message != fmt.Sprintf(`the name of the object (other.%s) does not match the name on the URL (%s)`, group, name) {
		t.Errorf("name mismatch: %+v", s)
	}
	// immutable group
	edit = getT(t, name)
	edit.Spec.Group = "elsewhere.example.com"
	_, err = update(edit, "")
	if s := status(err); s.Code != 422 || !strings.Contains(s.Message, `spec.group: Invalid value: "elsewhere.example.com": field is immutable`) {
		t.Errorf("group change: %+v", s)
	}

	// status subresource: only status changes
	edit = getT(t, name)
	gen := edit.Generation
	edit.Spec.Names.ShortNames = []string{"ignored"}
	edit.Status.StoredVersions = []string{"v1"}
	setCondition(edit, condition{Type: "Custom", Status: apiextensionsv1.ConditionTrue, Reason: "Test"})
	out, err = update(edit, "status")
	if err != nil {
		t.Fatal(err)
	}
	if out.Generation != gen || fmt.Sprint(out.Spec.Names.ShortNames) != "[pt]" || findCondition(out, "Custom") == nil {
		t.Errorf("status update: generation %d shortNames %v conditions %+v", out.Generation, out.Spec.Names.ShortNames, out.Status.Conditions)
	}

	// unknown subresource
	_, err = update(getT(t, name), "scale")
	if s := status(err); s.Code != 404 || s.Message != "the server could not find the requested resource" {
		t.Errorf("scale: %+v", s)
	}
}

func TestPatch(t *testing.T) {
	group := newGroup(t)
	name := "bolts." + group
	createT(t, crdJSON(group, "bolts", "Bolt"))
	waitEstablished(t, name)

	p := func(typ, body, sub string) (*CRD, error) {
		resp, err := testRegistry.Patch(testCtx(t), &registryv1.PatchRequest{Name: name, Subresource: sub, PatchType: typ, Patch: []byte(body)})
		if err != nil {
			return nil, err
		}
		return decodeT(t, resp.GetObject()), nil
	}
	out, err := p("application/merge-patch+json", `{"metadata":{"annotations":{"a":"b"}},"spec":{"names":{"shortNames":["bt"]}}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Annotations["a"] != "b" || fmt.Sprint(out.Spec.Names.ShortNames) != "[bt]" || out.Generation != 2 {
		t.Errorf("merge patch: %+v %+v", out.ObjectMeta, out.Spec.Names)
	}
	out, err = p("application/json-patch+json", `[{"op":"add","path":"/spec/names/categories","value":["all"]}]`, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out.Spec.Names.Categories) != "[all]" {
		t.Errorf("json patch: %+v", out.Spec.Names)
	}
	// status patch leaves the spec alone
	out, err = p("application/merge-patch+json", `{"spec":{"scope":"Cluster"},"status":{"storedVersions":["v1"]}}`, "status")
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("status patch changed the spec: %v", out.Spec.Scope)
	}
	// invalid result
	_, err = p("application/merge-patch+json", `{"spec":{"scope":"Nowhere"}}`, "")
	if s := status(err); s.Code != 422 || !strings.Contains(s.Message, `spec.scope: Unsupported value: "Nowhere"`) {
		t.Errorf("invalid patch: %+v", s)
	}
	// JSON patch that does not apply
	_, err = p("application/json-patch+json", `[{"op":"test","path":"/spec/scope","value":"Cluster"}]`, "")
	if s := status(err); s.Code != 422 {
		t.Errorf("failed test op: %+v", s)
	}
	// stale resourceVersion in the patch
	_, err = p("application/merge-patch+json", `{"metadata":{"resourceVersion":"1"}}`, "")
	if s := status(err); s.Code != 409 {
		t.Errorf("stale patch: %+v", s)
	}
	// strategic merge patch (CRDs are a built-in type)
	out, err = p("application/strategic-merge-patch+json", `{"metadata":{"labels":{"smp":"yes"}}}`, "")
	if err != nil || out.Labels["smp"] != "yes" {
		t.Errorf("strategic merge patch: %v %v", err, out)
	}
	// an apply without apiVersion and kind: upstream's field manager's 400
	_, err = p("application/apply-patch+yaml", `{}`, "")
	if s := status(err); s.Code != 400 || s.Message != "invalid object type: /, Kind=" {
		t.Errorf("apply patch: %+v", s)
	}

	// concurrent patches without resourceVersion all land
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := p("application/merge-patch+json", fmt.Sprintf(`{"metadata":{"labels":{"l%d":"v"}}}`, i), "")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent patch: %v", err)
		}
	}
	if got := len(getT(t, name).Labels); got != 9 {
		t.Errorf("labels after concurrent patches: %d", got)
	}
}

func TestAPIApprovalCondition(t *testing.T) {
	group := fmt.Sprintf("g%d.k8s.io", groupSeq.Add(1))
	name := "tools." + group
	_, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: crdJSON(group, "tools", "Tool")})
	if s := status(err); s.Code != 422 || !strings.Contains(s.Message, `metadata.annotations[api-approved.kubernetes.io]: Required value`) {
		t.Fatalf("create without approval: %+v", s)
	}
	createT(t, crdJSON(group, "tools", "Tool", func(o map[string]any) {
		o["metadata"].(map[string]any)["annotations"] = map[string]any{"api-approved.kubernetes.io": "unapproved, testing only"}
	}))
	waitEstablished(t, name)
	cond := func() *condition {
		return findCondition(getT(t, name), apiextensionsv1.KubernetesAPIApprovalPolicyConformant)
	}
	eventually(t, 5*time.Second, "approval condition", func() bool { c := cond(); return c != nil })
	if c := cond(); c.Status != apiextensionsv1.ConditionFalse || c.Reason != "UnapprovedAnnotation" || c.Message != `not approved: "unapproved, testing only"` {
		t.Errorf("condition = %+v", c)
	}
	if _, err := testRegistry.Patch(testCtx(t), &registryv1.PatchRequest{Name: name, PatchType: "application/merge-patch+json",
		Patch: []byte(`{"metadata":{"annotations":{"api-approved.kubernetes.io":"https://github.com/kubernetes/kubernetes/pull/1"}}}`)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "approved", func() bool {
		c := cond()
		return c.Status == apiextensionsv1.ConditionTrue && c.Reason == "ApprovedAnnotation"
	})
}
