// Package patch applies the PATCH bodies Kubernetes accepts for custom
// resources and CRDs: JSON merge patch (RFC 7386) and JSON patch (RFC 6902),
// with upstream's status codes for bad patches.
package patch

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Content types of the patches Kubernetes knows.
const (
	MergePatch     = "application/merge-patch+json"
	JSONPatch      = "application/json-patch+json"
	StrategicMerge = "application/strategic-merge-patch+json"
	ApplyYAML      = "application/apply-patch+yaml"
	ApplyCBOR      = "application/apply-patch+cbor"
)

// MaxJSONPatchOperations is upstream's bound on the operations of one JSON patch.
const MaxJSONPatchOperations = 10000

// Type normalises a Content-Type header to a patch type (parameters dropped).
func Type(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType
	}
	return mt
}

// Supported reports whether this package applies patches of type t.
func Supported(t string) bool { return t == MergePatch || t == JSONPatch }

// UnsupportedError is upstream's 415 for a patch type a custom resource does
// not take (strategic merge patch; server-side apply).
func UnsupportedError(t string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s", JSONPatch, MergePatch), 0, false)
}

// Apply applies patch (of Content-Type patchType) to the JSON document
// original and returns the patched JSON. Errors are Kubernetes Status errors:
// 400 for a malformed patch, 422 for a JSON patch that does not apply, 415
// for an unsupported type, 413 for too many operations.
func Apply(original []byte, patchType string, patch []byte) ([]byte, error) {
	switch Type(patchType) {
	case MergePatch:
		out, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			if errors.Is(err, jsonpatch.ErrBadJSONPatch) || errors.Is(err, jsonpatch.ErrBadJSONDoc) {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	case JSONPatch:
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > MaxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(
				fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(ops)))
		}
		out, err := ops.Apply(original)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return out, nil
	default:
		return nil, UnsupportedError(patchType)
	}
}
