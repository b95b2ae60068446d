package gateway

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/patch"
)

// decodePatch is upstream's strict pre-decoding of a JSON or merge patch
// under fieldValidation Warn (the default) and Strict (patch.DecodeStrict):
// a body that does not decode (malformed, or nested deeper than the
// decoder's 10000 levels) is 400 "error decoding patch: ..." before
// anything is applied; duplicate fields come back as strict errors.
func decodePatch(pt string, body []byte, directive string) ([]error, error) {
	if directive == metav1.FieldValidationIgnore {
		return nil, nil
	}
	return patch.DecodeStrict(pt, body)
}

// patchStrictErrors applies the directive to a patch's strict errors once
// the patch applied: warnings under Warn, upstream's 422 on the patched
// object under Strict.
func patchStrictErrors(ctx context.Context, directive string, strictErrs []error, patched []byte) error {
	if len(strictErrs) == 0 {
		return nil
	}
	if directive == metav1.FieldValidationStrict {
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), string(patched), runtime.NewStrictDecodingError(strictErrs).Error()),
		})
	}
	for _, e := range strictErrs {
		addWarnings(ctx, e.Error())
	}
	return nil
}
