// Package objsize bounds the size of the objects crdplane decodes, admits
// and stores, and words the refusal as upstream Kubernetes does.
//
// Upstream v1.33 has no size check of its own between the request body
// limit and etcd: a request body is at most 3 MiB (MaxRequestBodyBytes),
// a JSON patch's copies may add at most 3 MiB more (JSONPatchMaxCopyBytes),
// and what etcd refuses (its request limit is 1.5 MiB) comes back as a
// plain 500 carrying etcd's message, "etcdserver: request is too large"
// (k8s.io/apiserver/pkg/endpoints/handlers/rest.go isTooLargeError knows it
// as the error of an object too large to store).
//
// crdplane refuses an object larger than MaxBytes before admission (the
// validator would otherwise evaluate schemas and CEL rules over an object
// that can never be stored) with that same Status. The bound is upstream's
// own bound on a decoded body (twice etcd's limit, so that pruning can
// still bring an object under it); etcd's limit itself is left to etcd.
package objsize

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxBytes is the largest object (JSON) crdplane admits: upstream's
// MaxRequestBodyBytes, 3 MiB.
const MaxBytes = 3 << 20

// EtcdTooLargeMessage is etcd's error for a request above its limit
// (rpctypes.ErrRequestTooLarge), as upstream answers it.
const EtcdTooLargeMessage = "etcdserver: request is too large"

// Check refuses a JSON object of n bytes when it exceeds MaxBytes.
func Check(n int) error {
	if n > MaxBytes {
		return TooLarge()
	}
	return nil
}

// TooLarge is upstream's answer for an object etcd cannot store: a 500
// Status without a reason carrying etcd's message (upstream's
// ErrorToAPIStatus renders a non-Status error so).
func TooLarge() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: EtcdTooLargeMessage,
	}}
}
