package kubewire

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
)

// realisticCRD returns CRD number i as the registry stores it: the CronTab
// CRD of testdata/api-crontab-crd.yaml (status and scale subresources,
// printer columns) renamed, with a schema of 40 more described properties
// (defaults, enums, patterns, nested objects and arrays, x-kubernetes
// extensions), the server-set metadata (uid, resourceVersion, generation,
// creationTimestamp, managedFields) and an established status. About
// 14 KiB of JSON.
func realisticCRD(t testing.TB, i int) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(readJSON(t, "api-crontab-crd.yaml"), crd); err != nil {
		t.Fatal(err)
	}
	plural := fmt.Sprintf("widgets%04d", i)
	crd.Name = plural + ".bench.example.com"
	crd.Spec.Group = "bench.example.com"
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: fmt.Sprintf("widget%04d", i), Kind: fmt.Sprintf("Widget%04d", i), ListKind: fmt.Sprintf("Widget%04dList", i), Categories: []string{"all"}}
	crd.UID = types.UID(fmt.Sprintf("0b7c8e1a-%04x-4c4e-9a7d-%012x", i, i*7919))
	crd.ResourceVersion = fmt.Sprint(1000 + i)
	crd.Generation = 1
	ts := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * time.Second))
	crd.CreationTimestamp = ts
	crd.Labels = map[string]string{"app.kubernetes.io/name": "bench", "app.kubernetes.io/part-of": "kubewire"}
	crd.Annotations = map[string]string{"controller-gen.kubebuilder.io/version": "v0.17.2"}
	crd.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apiextensions.k8s.io/v1",
		Time: &ts, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:conversion":{".":{},"f:strategy":{}},"f:group":{},"f:names":{"f:kind":{},"f:listKind":{},"f:plural":{},"f:shortNames":{},"f:singular":{}},"f:scope":{},"f:versions":{}}}`),
	}, {
		Manager: "apiextensions-apiserver", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apiextensions.k8s.io/v1",
		Time: &ts, FieldsType: "FieldsV1", Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:acceptedNames":{"f:kind":{},"f:listKind":{},"f:plural":{},"f:shortNames":{},"f:singular":{}},"f:conditions":{"k:{\"type\":\"Established\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}}`),
	}}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for p := range 40 {
		prop := apiextensionsv1.JSONSchemaProps{Type: "string", Description: fmt.Sprintf("Field %d of the widget: a description as long as controller-gen copies from Go doc comments, which is often a sentence or two.", p)}
		switch p % 5 {
		case 1:
			prop = apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: ptr(float64(0)), Maximum: ptr(float64(100 + p)), Default: &apiextensionsv1.JSON{Raw: []byte("1")}}
		case 2:
			prop.Enum = []apiextensionsv1.JSON{{Raw: []byte(`"Always"`)}, {Raw: []byte(`"IfNotPresent"`)}, {Raw: []byte(`"Never"`)}}
		case 3:
			prop = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"name"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"name":  {Type: "string", Pattern: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, MaxLength: ptr(int64(63))},
				"value": {Type: "string"},
			}}}, XListType: ptr("map"), XListMapKeys: []string{"name"}}
		case 4:
			prop = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true), Description: prop.Description}
		}
		spec.Properties[fmt.Sprintf("field%02d", p)] = prop
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{
		AcceptedNames: crd.Spec.Names,
		Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: ts, Reason: "NoConflicts", Message: "no conflicts found"},
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: ts, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"},
		},
		StoredVersions: []string{"v1"},
	}
	crd.SetGroupVersionKind(crdV1)
	return crd
}

func ptr[T any](v T) *T { return &v }

// realisticCRDs returns n CRDs as typed objects and as the JSON documents
// the registry returns.
func realisticCRDs(t testing.TB, n int) ([]*apiextensionsv1.CustomResourceDefinition, [][]byte) {
	t.Helper()
	crds := make([]*apiextensionsv1.CustomResourceDefinition, n)
	docs := make([][]byte, n)
	for i := range n {
		crds[i] = realisticCRD(t, i)
		b, err := json.Marshal(crds[i])
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = b
	}
	return crds, docs
}
