package metavalidation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateCommonUpdate is rest.BeforeUpdate's common-field validation of
// an update of an unstructured object (v1.33's validateCommonFields:
// ValidateObjectMetaAccessor with path-segment names, then
// ValidateObjectMetaAccessorUpdate), obj the prepared object and old the
// stored one. It comes before the strategy's validation, which validates
// the metadata again (ValidateObjectMetaAccessorUpdate), so upstream lists
// a metadata error two or three times.
//
// Metadata that does not decode (into an ObjectMeta) is not validated
// here: the decoder answers it first. managedFields are left out too:
// upstream's field manager, which runs before, replaces what does not
// decode, and the strategy validates them.
func ValidateCommonUpdate(obj, old map[string]any, namespaced bool) field.ErrorList {
	om, ok := objectMeta(obj)
	if !ok {
		return nil
	}
	oom, ok := objectMeta(old)
	if !ok {
		return nil
	}
	om.ManagedFields, oom.ManagedFields = nil, nil
	path := field.NewPath("metadata")
	errs := ValidateObjectMetaAccessor(om, namespaced, ValidatePathSegmentName, path)
	return append(errs, ValidateObjectMetaAccessorUpdate(om, oom, path)...)
}

// objectMeta reads obj's metadata into its typed form; ok is false when
// it does not decode.
func objectMeta(obj map[string]any) (*metav1.ObjectMeta, bool) {
	m, _ := obj["metadata"].(map[string]any)
	om := &metav1.ObjectMeta{}
	if m == nil {
		return om, true
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, om); err != nil {
		return nil, false
	}
	return om, true
}
