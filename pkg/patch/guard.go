package patch

import (
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// applyJSONPatch applies decoded JSON patch operations to original, as
// ops.Apply, but for operations the library cannot take: it dereferences a
// missing value when a "test" names the whole document (path "") without
// one, and panics (upstream's apiserver turns the panic into a 500 "This
// request caused apiserver to panic"). Such a test fails, as a test of any
// other path without a value does: upstream's 422. Any other panic of the
// library is a 500 rather than the end of the process.
func applyJSONPatch(ops jsonpatch.Patch, original []byte) (out []byte, err error) {
	for _, op := range ops {
		if op.Kind() != "test" {
			continue
		}
		if path, perr := op.Path(); perr == nil && path == "" {
			if v, ok := op["value"]; !ok || v == nil {
				return nil, notApplied(fmt.Errorf("testing value %s failed: %w", path, jsonpatch.ErrTestFailed))
			}
		}
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, apierrors.NewInternalError(fmt.Errorf("applying the JSON patch failed: %v", r))
		}
	}()
	out, err = ops.Apply(original)
	if err != nil {
		return nil, notApplied(err)
	}
	return out, nil
}

// notApplied is upstream's answer to a JSON patch that does not apply: a 422
// whose message NewGenericServerResponse makes generic.
func notApplied(err error) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
}
