package objmeta

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type schemaGroupKind = schema.GroupKind

func runtimeDeepCopy(obj Object) Object { return runtime.DeepCopyJSON(obj) }

func fieldErrorList(path string, value any, detail string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, detail)}
}
