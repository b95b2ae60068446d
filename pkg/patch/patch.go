// Package patch applies the PATCH bodies Kubernetes accepts for custom
// resources and CRDs: JSON merge patch (RFC 7386) and JSON patch (RFC 6902),
// with upstream's status codes for bad patches.
//
// The JSON patch library (gopkg.in/evanphx/json-patch.v4, as upstream's)
// bounds what "copy" operations may add only through a package variable,
// AccumulatedCopySizeLimit; this package sets it once, when it is
// initialised, to upstream's JSONPatchMaxCopyBytes (3 MiB), exactly as
// k8s.io/apiserver's server config does (an atomic compare-and-swap that
// never raises a lower limit set elsewhere in the process). Without it a
// 2 KiB patch of 25 copies of a document into itself asks for gigabytes
// (CVE-2019-1002100).
package patch

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"sync/atomic"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/objsize"
	"github.com/crdplane/crdplane/pkg/patch/internal/handlers"
)

// MaxCopyBytes is upstream's JSONPatchMaxCopyBytes
// (k8s.io/apiserver/pkg/server/config.go): the most the "copy" operations
// of one JSON patch may add to the document.
const MaxCopyBytes = 3 << 20

func init() { setCopyLimit(MaxCopyBytes) }

// setCopyLimit is upstream's (k8s.io/apiserver/pkg/server/config.go, New):
// the library's limit becomes limit unless a lower positive one is set.
func setCopyLimit(limit int64) {
	for limit > 0 {
		existing := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit)
		if existing > 0 && existing < limit {
			return
		}
		if atomic.CompareAndSwapInt64(&jsonpatch.AccumulatedCopySizeLimit, existing, limit) {
			return
		}
	}
}

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
// not take (strategic merge patch, CBOR apply): it lists the types custom
// resources take, JSON patch, merge patch (this package) and server-side
// apply (the validator's field manager).
func UnsupportedError(t string) error {
	// As the crdHandler's negotiation.NewUnsupportedMediaTypeError: no
	// details.
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s", JSONPatch, MergePatch, ApplyYAML),
	}}
}

// Apply applies patch (of Content-Type patchType) to the JSON document
// original and returns the patched JSON. Errors are Kubernetes Status
// errors, as upstream's applyJSPatch (k8s.io/apiserver/pkg/endpoints/
// handlers/patch.go) answers them:
//
//   - a JSON patch that does not decode: 400 with the decoder's message
//     ("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
//   - more than MaxJSONPatchOperations operations: 413;
//   - a JSON patch that does not apply (an unknown op, a missing path, a
//     failed test, a remove of a missing key, copies adding more than
//     MaxCopyBytes): 422 Invalid "the server rejected our request due to an
//     error in our request" with empty details: upstream passes the
//     library's message to NewGenericServerResponse, which drops it;
//   - a merge patch that is not a JSON object: 400 "Invalid JSON Patch";
//     an original that is not a JSON document: a 500 carrying the library's
//     "Invalid JSON Document" (upstream returns that error as it is);
//   - an unsupported type: 415.
//
// A result larger than objsize.MaxBytes is refused as objsize.TooLarge
// (what etcd would answer), before anything decodes it.
func Apply(original []byte, patchType string, patch []byte) ([]byte, error) {
	out, err := apply(original, patchType, patch)
	if err != nil {
		return nil, err
	}
	if err := objsize.Check(len(out)); err != nil {
		return nil, err
	}
	return out, nil
}

func apply(original []byte, patchType string, patch []byte) ([]byte, error) {
	switch Type(patchType) {
	case MergePatch:
		out, err := jsonpatch.MergePatch(original, patch)
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, jsonpatch.ErrBadJSONPatch):
			return nil, apierrors.NewBadRequest(err.Error())
		default:
			return nil, plainError(err)
		}
	case JSONPatch:
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > MaxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(
				fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(ops)))
		}
		return applyJSONPatch(ops, original)
	default:
		return nil, UnsupportedError(patchType)
	}
}

// plainError is how upstream's ErrorToAPIStatus renders an error that is
// not a Status: 500, no reason, the error's text.
func plainError(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}}
}

// DecodeStrict is upstream's strict pre-decoding of a JSON patch or merge
// patch body, run under fieldValidation Strict and Warn before the patch
// is applied: a body that does not decode is 400 "error decoding patch:
// <decoder message>" (naming upstream's Go types, "[]handlers.jsonPatchOp");
// duplicate fields come back as strict errors (for a JSON patch prefixed
// "json patch "). Other patch types decode nothing.
func DecodeStrict(patchType string, body []byte) ([]error, error) {
	var (
		strictErrs []error
		err        error
	)
	switch Type(patchType) {
	case JSONPatch:
		strictErrs, err = handlers.DecodeJSONPatch(body)
	case MergePatch:
		strictErrs, err = handlers.DecodeMergePatch(body)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	return strictErrs, nil
}
