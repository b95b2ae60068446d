// Package metavalidation validates object metadata as Kubernetes v1.33
// does. The checks are those of the apimachinery this project builds with
// (v0.37, k8s.io/apimachinery/pkg/api/validation); their errors are
// reworded and reshaped where v1.33 reports them differently:
//   - "must be no more than 63 bytes" reads "must be no more than 63
//     characters", "a valid label key must consist of ..." reads "a
//     qualified name must consist of ..." (V133Wording);
//   - an owner reference's errors stand under metadata.ownerReferences,
//     without the reference's index, and a missing kind, name or uid is
//     `Invalid value: "": kind must not be empty`, not "Required value";
//   - an owner reference's apiVersion without a version reads "version
//     must not be empty";
//   - a managed-fields entry's operation reads "must be `Apply` or
//     `Update`", not "Unsupported value".
//
// Render the errors with pkg/fielderr.
package metavalidation

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateNameFunc validates a name (or a generateName prefix).
type ValidateNameFunc = apivalidation.ValidateNameFunc

// NameIsDNSSubdomain is the name check of most resources.
func NameIsDNSSubdomain(name string, prefix bool) []string {
	return words(apivalidation.NameIsDNSSubdomain(name, prefix))
}

// IsDNS1035Label checks a DNS-1035 label.
func IsDNS1035Label(value string) []string { return words(utilvalidation.IsDNS1035Label(value)) }

// IsQualifiedName checks a qualified name (a label key).
func IsQualifiedName(value string) []string { return words(utilvalidation.IsQualifiedName(value)) }

// ValidatePathSegmentName checks that a name can be a path segment.
func ValidatePathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// ValidateObjectMetaAccessor validates the metadata of a created object.
func ValidateObjectMetaAccessor(meta metav1.Object, requiresNamespace bool, nameFn ValidateNameFunc, fldPath *field.Path) field.ErrorList {
	return reshape(apivalidation.ValidateObjectMetaAccessor(meta, requiresNamespace, nameFn, fldPath), fldPath)
}

// ValidateObjectMetaAccessorUpdate validates the metadata of an update.
func ValidateObjectMetaAccessorUpdate(newMeta, oldMeta metav1.Object, fldPath *field.Path) field.ErrorList {
	return reshape(apivalidation.ValidateObjectMetaAccessorUpdate(newMeta, oldMeta, fldPath), fldPath)
}

func words(msgs []string) []string {
	for i := range msgs {
		msgs[i] = V133Wording(msgs[i])
	}
	return msgs
}

// reshape turns the library's errors into v1.33's (see the package comment).
func reshape(errs field.ErrorList, fldPath *field.Path) field.ErrorList {
	owners := fldPath.Child("ownerReferences").String()
	managed := fldPath.Child("managedFields").String()
	for _, e := range errs {
		e.Detail = V133Wording(e.Detail)
		if rest, ok := strings.CutPrefix(e.Field, owners+"["); ok {
			if _, after, found := strings.Cut(rest, "]"); found {
				e.Field = owners + after
				if e.Field == owners+".apiVersion" && e.Detail == "must be <group>/<version> or <version>" {
					e.Detail = "version must not be empty"
				}
				if e.Type == field.ErrorTypeRequired {
					e.Type, e.BadValue = field.ErrorTypeInvalid, ""
					e.Detail = strings.TrimPrefix(after, ".") + " must not be empty"
				}
			}
		}
		if strings.HasPrefix(e.Field, managed+"[") && strings.HasSuffix(e.Field, ".operation") && e.Type == field.ErrorTypeNotSupported {
			e.Type, e.Detail = field.ErrorTypeInvalid, "must be `Apply` or `Update`"
		}
	}
	return errs
}

// TotalAnnotationSizeLimitB is the limit on the total size of an object's
// annotations.
const TotalAnnotationSizeLimitB = apivalidation.TotalAnnotationSizeLimitB

// IsValidLabelValue checks a label value.
func IsValidLabelValue(value string) []string { return words(utilvalidation.IsValidLabelValue(value)) }

// IsDNS1123Label checks a DNS-1123 label.
func IsDNS1123Label(value string) []string { return words(utilvalidation.IsDNS1123Label(value)) }

// IsDNS1123Subdomain checks a DNS-1123 subdomain.
func IsDNS1123Subdomain(value string) []string {
	return words(utilvalidation.IsDNS1123Subdomain(value))
}
