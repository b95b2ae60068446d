package crdlimits

import (
	"bytes"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kjson "sigs.k8s.io/json"
)

// FuzzVersionSchemaDepths: the scan never panics, and on any document the
// Kubernetes decoder accepts it finds every version the decoder finds, each
// at least as deep as the decoded schema (exactly as deep when no key
// repeats): a schema the registry refuses before decoding is one validation
// would refuse after.
func FuzzVersionSchemaDepths(f *testing.F) {
	f.Add(crdJSON(`{"type":"object","properties":{"spec":{"type":"object"}}}`))
	f.Add(crdJSON(deepJSON(3), deepJSON(5)))
	f.Add(crdJSON(`{"items":[{"type":"string"},{"items":{"not":{}}}]}`))
	f.Add([]byte(`{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"prop\u0065rties":{"a":{"additionalProperties":{"allOf":[{}]}}}}}}]}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		versions, ok := VersionSchemaDepths(doc)
		for _, v := range versions {
			if v.Depth < -1 || (v.Depth >= 0) != (v.Raw != nil) {
				t.Fatalf("%+v", v)
			}
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := kjson.UnmarshalCaseSensitivePreserveInts(doc, &crd); err != nil {
			return
		}
		if !ok {
			if trimmed := bytes.TrimLeft(doc, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
				t.Fatalf("the decoder accepts what the scan does not read")
			}
			return
		}
		strictErrs, _ := kjson.UnmarshalStrict(doc, &apiextensionsv1.CustomResourceDefinition{}, kjson.DisallowDuplicateFields)
		exact := len(strictErrs) == 0
		if exact && len(versions) != len(crd.Spec.Versions) {
			t.Fatalf("%d versions scanned, %d decoded", len(versions), len(crd.Spec.Versions))
		}
		for i, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			var in apiextensions.JSONSchemaProps
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &in, nil); err != nil {
				continue
			}
			d := SchemaDepth(&in)
			if i >= len(versions) || versions[i].Depth < d || exact && versions[i].Depth != d {
				t.Fatalf("version %d: decoded depth %d, scanned %+v", i, d, versions)
			}
		}
	})
}
