package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// nonStructuralCases are schemas of one CRD version, with the
// NonStructuralSchema condition message upstream's condition controller
// sets for them ("" when structural).
var nonStructuralCases = []struct {
	name   string
	schema string
	reason string
	want   string
}{
	{name: "structural", schema: `{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}`},
	{name: "reference's corrected example 3 (structural)", schema: `{"type":"object","description":"foo bar object","properties":{"foo":{"type":"string","pattern":"abc"},"bar":{"type":"integer"},"metadata":{"type":"object","properties":{"name":{"type":"string","pattern":"^a"}}}},"anyOf":[{"properties":{"bar":{"minimum":42}},"required":["bar"]}]}`},
	{name: "int-or-string patterns (structural)", schema: `{"type":"object","properties":{"a":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]},"b":{"x-kubernetes-int-or-string":true,"allOf":[{"anyOf":[{"type":"integer"},{"type":"string"}]},{"pattern":"^[0-9]+$"}]}}}`},
	{name: "rule 1: root type missing", schema: `{"properties":{"a":{"type":"string"}}}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the root"},
	{name: "rule 1: field and item types missing", schema: `{"type":"object","properties":{"a":{"description":"untyped"},"b":{"type":"array","items":{"minLength":1}},"c":{"type":"array"}}}`, reason: "Violations",
		want: "[spec.versions[0].schema.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields, spec.versions[0].schema.openAPIV3Schema.properties[b].items.type: Required value: must not be empty for specified array items, spec.versions[0].schema.openAPIV3Schema.properties[c].items: Required value: must be specified]"},
	{name: "rule 1: additionalProperties type missing", schema: `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"minLength":1}}}}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.properties[m].additionalProperties.type: Required value: must not be empty for specified object fields"},
	{name: "rule 1: exceptions", schema: `{"type":"object","properties":{"a":{"x-kubernetes-preserve-unknown-fields":true},"b":{"x-kubernetes-int-or-string":true}}}`},
	{name: "rule 2: reference's example 1", schema: `{"type":"object","allOf":[{"properties":{"foo":{"minLength":1}}}]}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.properties[foo]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[foo]"},
	{name: "rule 2: reference's example 2", schema: `{"type":"object","allOf":[{"items":{"properties":{"foo":{"minLength":1}}}}]}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.items: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.allOf[0].items"},
	{name: "rule 2: junctors below the root are not checked (as upstream)", schema: `{"type":"object","properties":{"list":{"type":"array","items":{"type":"string"},"allOf":[{"items":{"properties":{"foo":{"minLength":1}}}}]}}}`},
	{name: "rule 2: nested junctors", schema: `{"type":"object","properties":{"a":{"type":"object"}},"oneOf":[{"not":{"properties":{"a":{"properties":{"b":{}}}}}}]}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.properties[a].properties[b]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.oneOf[0].not.properties[a].properties[b]"},
	{name: "rule 3: forbidden in junctors", schema: `{"type":"object","properties":{"a":{"type":"string"}},"anyOf":[{"properties":{"a":{"type":"string","description":"d","title":"t","default":"x","nullable":true}}},{"additionalProperties":{"type":"string"}}]}`, reason: "Violations",
		want: "[spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[a].default: Forbidden: must be undefined to be structural, spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[a].description: Forbidden: must be empty to be structural, spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[a].nullable: Forbidden: must be false to be structural, spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[a].title: Forbidden: must be empty to be structural, spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[a].type: Forbidden: must be empty to be structural, spec.versions[0].schema.openAPIV3Schema.anyOf[1].additionalProperties: Forbidden: must be undefined to be structural]"},
	{name: "rule 3: extensions in junctors", schema: `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}},"allOf":[{"properties":{"a":{"x-kubernetes-list-type":"set","x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-embedded-resource":true,"x-kubernetes-int-or-string":true}}}]}`, reason: "Violations",
		want: "[spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[a].x-kubernetes-embedded-resource: Forbidden: must be false to be structural, spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[a].x-kubernetes-int-or-string: Forbidden: must be false to be structural, spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[a].x-kubernetes-list-type: Forbidden: must be undefined to be structural, spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[a].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural]"},
	{name: "rule 4: reference's example 3", schema: `{"properties":{"foo":{"pattern":"abc"},"metadata":{"type":"object","properties":{"name":{"type":"string","pattern":"^a"},"finalizers":{"type":"array","items":{"type":"string","pattern":"my-finalizer"}}}}},"anyOf":[{"properties":{"bar":{"type":"integer","minimum":42}},"required":["bar"],"description":"foo bar object"}]}`, reason: "Violations",
		want: "[spec.versions[0].schema.openAPIV3Schema.anyOf[0].description: Forbidden: must be empty to be structural, spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[bar].type: Forbidden: must be empty to be structural, spec.versions[0].schema.openAPIV3Schema.properties[bar]: Required value: because it is defined in spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[bar], spec.versions[0].schema.openAPIV3Schema.properties[foo].type: Required value: must not be empty for specified object fields, spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified, spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the root]"},
	{name: "rule 4: metadata name and generateName allowed", schema: `{"type":"object","properties":{"metadata":{"type":"object","properties":{"name":{"type":"string","maxLength":10},"generateName":{"type":"string","maxLength":5}}}}}`},
	{name: "metadata in a nested context", schema: `{"type":"object","properties":{"a":{"type":"object","properties":{"metadata":{"type":"object"}}}},"allOf":[{"properties":{"a":{"properties":{"metadata":{"minProperties":1}}}}}]}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.allOf[0].properties[a].properties[metadata]: Forbidden: must not be specified in a nested context"},
	{name: "embedded resource", schema: `{"type":"object","properties":{"t":{"x-kubernetes-embedded-resource":true,"properties":{"kind":{"type":"integer"}}},"u":{"type":"object","x-kubernetes-embedded-resource":true}}}`, reason: "Violations",
		want: "[spec.versions[0].schema.openAPIV3Schema.properties[t].properties[kind].type: Invalid value: \"integer\": must be string, spec.versions[0].schema.openAPIV3Schema.properties[t].type: Required value: must be object if x-kubernetes-embedded-resource is true, spec.versions[0].schema.openAPIV3Schema.properties[u].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields]"},
	{name: "root not an object", schema: `{"type":"string"}`, reason: "Violations",
		want: "spec.versions[0].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"},
	{name: "unsupported construct", schema: `{"type":"object","properties":{"a":{"type":"string","$ref":"#/definitions/x"}}}`, reason: "StructuralError",
		want: "failed to check validation schema for version v1: OpenAPIV3Schema '$ref' is not supported"},
}

func versionWithSchema(t *testing.T, name, schemaJSON string) apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := json.Unmarshal([]byte(schemaJSON), s); err != nil {
		t.Fatalf("bad test schema: %v", err)
	}
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: name == "v1", Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s}}
}

// upstreamNonStructural computes the condition message with upstream's
// structural schema package, the way its condition controller does.
func upstreamNonStructural(t *testing.T, crd *CRD) (reason, msg string) {
	t.Helper()
	var errs field.ErrorList
	for i, v := range crd.Spec.Versions {
		in := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, in, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
		if err != nil {
			return "StructuralError", fmt.Sprintf("failed to check validation schema for version %s: %v", v.Name, err)
		}
		errs = append(errs, structuralschema.ValidateStructural(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), s)...)
	}
	if len(errs) == 0 {
		return "", ""
	}
	return "Violations", errs.ToAggregate().Error()
}

func TestNonStructuralCondition(t *testing.T) {
	for _, tc := range nonStructuralCases {
		t.Run(tc.name, func(t *testing.T) {
			crd := &CRD{}
			crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{versionWithSchema(t, "v1", tc.schema)}
			got := nonStructuralCondition(crd)
			var reason, msg string
			if got != nil {
				reason, msg = got.Reason, got.Message
				wantStatus := apiextensionsv1.ConditionTrue
				if reason == "StructuralError" {
					wantStatus = apiextensionsv1.ConditionUnknown
				}
				if got.Type != condNonStructural || got.Status != wantStatus {
					t.Errorf("condition %s=%s", got.Type, got.Status)
				}
			}
			if reason != tc.reason || msg != tc.want {
				t.Errorf("got %s:\n%s\nwant %s:\n%s", reason, msg, tc.reason, tc.want)
			}
			// the expectations are upstream's
			if ur, um := upstreamNonStructural(t, crd); ur != tc.reason || um != tc.want {
				t.Errorf("upstream says %s:\n%s", ur, um)
			}
		})
	}
}

func TestNonStructuralConditionPerVersion(t *testing.T) {
	crd := &CRD{}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		versionWithSchema(t, "v1", `{"type":"object"}`),
		versionWithSchema(t, "v2", `{"properties":{"a":{}}}`),
	}
	got := nonStructuralCondition(crd)
	want := "[spec.versions[1].schema.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields, spec.versions[1].schema.openAPIV3Schema.type: Required value: must not be empty at the root]"
	if got == nil || got.Message != want {
		t.Fatalf("got %+v\nwant %s", got, want)
	}
	if _, um := upstreamNonStructural(t, crd); um != want {
		t.Fatalf("upstream says %s", um)
	}
}

// TestNonStructuralSchemaCondition stores a CRD with a non-structural
// schema the way an old cluster could have (v1beta1, preserveUnknownFields
// true; v1 refuses to create one):
// the controller reports it, and takes the condition away once an update
// makes the schema structural.
func TestNonStructuralSchemaCondition(t *testing.T) {
	group := newGroup(t)
	name := "legacies." + group
	body := crdJSON(group, "legacies", "Legacy", func(o map[string]any) {
		spec(o)["preserveUnknownFields"] = true
		v := spec(o)["versions"].([]any)[0].(map[string]any)
		v["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"properties": map[string]any{"spec": map[string]any{"description": "no type"}}}}
	})
	// v1 rejects it on create
	_, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: body})
	if st := status(err); st.Code != 422 || !strings.Contains(st.Message, "spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root") {
		t.Fatalf("create of a non-structural CRD: %v", err)
	}
	// as stored by an older server
	crd, _, err := decodeCRD(body, "Strict")
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareForCreate(crd); err != nil {
		t.Fatal(err)
	}
	data, err := encodeForStorage(crd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testStorage.Create(testCtx(t), &storagev1.CreateRequest{Key: crdKey(name), Object: data}); err != nil {
		t.Fatal(err)
	}
	var got *CRD
	// reported, and still served (as upstream)
	eventually(t, 5*time.Second, "NonStructuralSchema condition and Established", func() bool {
		got = getT(t, name)
		return conditionTrue(got, condNonStructural) && conditionTrue(got, condEstablished)
	})
	c := findCondition(got, condNonStructural)
	want := "[spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields, spec.versions[0].schema.openAPIV3Schema.type: Required value: must not be empty at the root]"
	if c.Reason != "Violations" || c.Message != want {
		t.Fatalf("condition %s: %s\nwant Violations: %s", c.Reason, c.Message, want)
	}

	// updates that keep it non-structural are allowed (ratcheting) ...
	got.Labels = map[string]string{"a": "b"}
	updated := updateT(t, got)
	// ... and one that makes it structural clears the condition
	updated.Spec.Versions[0].Schema.OpenAPIV3Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
	updateT(t, updated)
	eventually(t, 5*time.Second, "NonStructuralSchema condition removed", func() bool {
		return findCondition(getT(t, name), condNonStructural) == nil
	})
}

func ptrTo[T any](v T) *T { return &v }

func updateT(t *testing.T, crd *CRD) *CRD {
	t.Helper()
	data, err := encodeCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testRegistry.Update(testCtx(t), &registryv1.UpdateRequest{Name: crd.Name, Object: data})
	if err != nil {
		t.Fatalf("update %s: %v", crd.Name, err)
	}
	return decodeT(t, resp.GetObject())
}
