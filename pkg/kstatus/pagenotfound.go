package kstatus

import (
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of crdplane's own markers.
const ErrorDomain = "crdplane.dev"

// ReasonPageNotFound is the google.rpc.ErrorInfo reason that marks a 404
// for a path no handler serves. kube-apiserver answers those with
// net/http's text/plain "404 page not found", not with a Status, so the
// edge must tell them from a NotFound Status that names an object; the
// marker says so whatever the Status's message.
const ReasonPageNotFound = "PAGE_NOT_FOUND"

// pageNotFound is a 404 Status marked as a path no handler serves.
type pageNotFound struct{ *apierrors.StatusError }

func (e pageNotFound) Unwrap() error { return e.StatusError }

// NewPageNotFound returns the error for a path the service does not serve:
// a 404 NotFound Status with message, marked (IsPageNotFound). Within a
// process it is an apierrors.APIStatus; ToGRPC carries the marker across
// gRPC as an ErrorInfo detail beside the Status.
func NewPageNotFound(message string) error {
	return pageNotFound{&apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: message,
	}}}
}

// IsPageNotFound reports whether err is marked as a path no handler
// serves: built by NewPageNotFound, or a gRPC error carrying its marker.
func IsPageNotFound(err error) bool {
	if err == nil {
		return false
	}
	var p pageNotFound
	if errors.As(err, &p) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain && info.GetReason() == ReasonPageNotFound {
			return true
		}
	}
	return false
}

func pageNotFoundInfo() *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Domain: ErrorDomain, Reason: ReasonPageNotFound}
}
