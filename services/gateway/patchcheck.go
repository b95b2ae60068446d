package gateway

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/crdplane/crdplane/pkg/patch"
)

// jsonPatchOp is one operation of a JSON patch, as upstream decodes it to
// find duplicate fields.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// decodePatch is upstream's strict pre-decoding of a JSON or merge patch
// under fieldValidation Warn (the default) and Strict: a body that does not
// decode (malformed, or nested deeper than the decoder's 10000 levels) is
// 400 "error decoding patch: ..." before anything is applied; duplicate
// fields come back as strict errors.
func decodePatch(pt string, body []byte, directive string) ([]error, error) {
	if directive == metav1.FieldValidationIgnore {
		return nil, nil
	}
	var (
		strictErrs []error
		err        error
	)
	switch pt {
	case patch.JSONPatch:
		var ops []jsonPatchOp
		strictErrs, err = kjson.UnmarshalStrict(body, &ops)
		for i, e := range strictErrs {
			strictErrs[i] = fmt.Errorf("json patch %v", e)
		}
	case patch.MergePatch:
		m := map[string]any{}
		strictErrs, err = kjson.UnmarshalStrict(body, &m)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	return strictErrs, nil
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
