package registry

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// strategicMergeCRD applies a strategic merge patch (decoded) to a CRD
// (decoded), with the list strategies of dataStruct's Go type (the v1
// CRD's), and words a failure as strategicPatchError. The library panics on some malformed
// directives (a "$setElementOrder/versions" or "$retainKeys" list holding
// objects: "hash of unhashable type"), which upstream's apiserver answers
// with a 500 once its panic handler caught it; so does this, without the
// panic.
func strategicMergeCRD(original, patch map[string]any, dataStruct any) (out map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, apierrors.NewInternalError(fmt.Errorf("the strategic merge patch could not be applied: %v", r))
		}
	}()
	out, err = strategicpatch.StrategicMergeMapPatch(original, patch, dataStruct)
	if err != nil {
		return nil, strategicPatchError(err)
	}
	return out, nil
}
