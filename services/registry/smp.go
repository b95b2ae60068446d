package registry

import (
	"encoding/json"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/patch"
)

// applyPatch applies a patch to a CRD's JSON. CRDs are a built-in type, so
// besides merge and JSON patches they take strategic merge patches (whose
// list strategies come from the v1 Go types, as upstream's).
func applyPatch(original []byte, patchType string, body []byte) ([]byte, error) {
	if patch.Type(patchType) != patch.StrategicMerge {
		return patch.Apply(original, patchType, body)
	}
	var patchMap map[string]any
	if err := json.Unmarshal(body, &patchMap); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var originalMap map[string]any
	if err := json.Unmarshal(original, &originalMap); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := strategicMergeCRD(originalMap, patchMap, &apiextensionsv1.CustomResourceDefinition{})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// strategicPatchError gives a strategic merge patch failure upstream's
// status code.
func strategicPatchError(err error) error {
	switch err {
	case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys,
		mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
		return apierrors.NewBadRequest(err.Error())
	case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return apierrors.NewBadRequest(err.Error())
}

// decodePatch is upstream's strict pre-decoding of a JSON or merge patch
// under fieldValidation Warn (the default) and Strict: a body that does
// not decode is 400 "error decoding patch: ..." (once the CRD was read,
// before anything is applied); duplicate fields come back as strict
// errors.
func decodePatch(patchType string, body []byte, directive string) ([]error, error) {
	if directive == metav1.FieldValidationIgnore {
		return nil, nil
	}
	return patch.DecodeStrict(patchType, body)
}

// patchStrictErrors applies the directive to a patch's strict errors once
// it applied: warnings under Warn, upstream's 422 on the patched object
// under Strict.
func patchStrictErrors(directive string, strictErrs []error, patched []byte) ([]string, error) {
	if len(strictErrs) == 0 {
		return nil, nil
	}
	if directive == metav1.FieldValidationStrict {
		return nil, fielderr.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
			field.Invalid(field.NewPath("patch"), string(patched), runtime.NewStrictDecodingError(strictErrs).Error()),
		})
	}
	out := make([]string, 0, len(strictErrs))
	for _, e := range strictErrs {
		out = append(out, e.Error())
	}
	return out, nil
}
