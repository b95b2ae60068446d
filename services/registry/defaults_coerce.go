package registry

import (
	"encoding/json"
	"reflect"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// coerceDefaults rewrites the defaults of crd's schemas as upstream's CRD
// validation leaves them in the object it stores: its default validation
// (structuraldefaulting.ValidateDefaults) coerces every default that is
// not inside an embedded resource's apiVersion, kind or metadata with
// schemaobjectmeta.Coerce, in place, so the metadata of an embedded
// resource in a default is stored as a round trip through ObjectMeta makes
// it (unknown fields and empty maps dropped). Called on a CRD that passed
// validation.
func coerceDefaults(crd *CRD) {
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			coerceSchemaDefaults(s.OpenAPIV3Schema, true, false)
		}
	}
}

// coerceSchemaDefaults walks s as upstream's default validation does
// (properties and items, not additionalProperties), root being the
// schema's root (an embedded resource there) and insideMeta whether s
// describes an embedded resource's apiVersion, kind or metadata (whose
// defaults upstream checks on a copy).
func coerceSchemaDefaults(s *apiextensionsv1.JSONSchemaProps, root, insideMeta bool) {
	if s.XEmbeddedResource {
		insideMeta = false
	}
	if s.Default != nil && !insideMeta {
		coerceDefault(s, root)
	}
	if s.Items != nil && s.Items.Schema != nil {
		coerceSchemaDefaults(s.Items.Schema, false, insideMeta)
	}
	for k, p := range s.Properties {
		sub := insideMeta
		if (s.XEmbeddedResource || root) && (k == "metadata" || k == "apiVersion" || k == "kind") {
			sub = true
		}
		coerceSchemaDefaults(&p, false, sub)
		s.Properties[k] = p
	}
}

// coerceDefault coerces the default of s (as upstream: an embedded
// resource's apiVersion and kind must be strings, its metadata becomes
// what ObjectMeta keeps of it, and so on down the value), leaving it alone
// when coercion fails (validation reported that).
func coerceDefault(s *apiextensionsv1.JSONSchemaProps, root bool) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, internal, nil); err != nil {
		return
	}
	ss, err := structuralschema.NewStructural(internal)
	if err != nil {
		return
	}
	if root && !ss.XEmbeddedResource {
		clone := *ss
		clone.XEmbeddedResource = true
		ss = &clone
	}
	var value any
	if err := utiljson.Unmarshal(s.Default.Raw, &value); err != nil {
		return
	}
	coerced := runtime.DeepCopyJSONValue(value)
	if err := schemaobjectmeta.Coerce(nil, coerced, ss, ss.XEmbeddedResource, false); err != nil {
		return
	}
	if reflect.DeepEqual(coerced, value) {
		return
	}
	raw, err := json.Marshal(coerced)
	if err != nil {
		return
	}
	s.Default = &apiextensionsv1.JSON{Raw: raw}
}
