// Package kstatus carries Kubernetes Status errors across gRPC.
//
// Inside crdplane, services return gRPC errors. When an error is one a
// Kubernetes client must see as a specific Status (404 NotFound, 409 Conflict,
// 422 Invalid with field causes, ...), the service builds it with the
// apimachinery constructors (so messages are worded as upstream's) and wraps it
// with ToGRPC; the Status travels as a commonv1.KubeStatus detail. At the edge,
// FromError turns any error back into a *metav1.Status.
package kstatus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
)

// ToGRPC converts err to a gRPC status error. An *apierrors.StatusError (or any
// error wrapping an APIStatus) keeps its full Status as a detail; other errors
// pass through unchanged (nil stays nil). A NewPageNotFound error also
// carries its marker, as a google.rpc.ErrorInfo detail.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		// Already a gRPC status error (possibly carrying a KubeStatus).
		var as apierrors.APIStatus
		if !errors.As(err, &as) {
			return err
		}
	}
	var as apierrors.APIStatus
	if !errors.As(err, &as) {
		return err
	}
	s := as.Status()
	st := status.New(CodeForHTTP(int(s.Code)), s.Message)
	details := []protoadapt.MessageV1{ToProto(&s)}
	if IsPageNotFound(err) {
		details = append(details, pageNotFoundInfo())
	}
	if withDetail, derr := st.WithDetails(details...); derr == nil {
		st = withDetail
	}
	return st.Err()
}

// ToProto converts a metav1.Status to its proto form.
func ToProto(s *metav1.Status) *commonv1.KubeStatus {
	ks := &commonv1.KubeStatus{Code: s.Code, Reason: string(s.Reason), Message: s.Message}
	if d := s.Details; d != nil {
		ks.Details = &commonv1.StatusDetails{
			Name:              d.Name,
			Group:             d.Group,
			Kind:              d.Kind,
			Uid:               string(d.UID),
			RetryAfterSeconds: d.RetryAfterSeconds,
		}
		for _, c := range d.Causes {
			ks.Details.Causes = append(ks.Details.Causes, &commonv1.StatusCause{
				Reason: string(c.Type), Message: c.Message, Field: c.Field,
			})
		}
	}
	return ks
}

// FromProto converts a KubeStatus to a metav1.Status (status Failure).
func FromProto(ks *commonv1.KubeStatus) *metav1.Status {
	s := &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Code:     ks.GetCode(),
		Reason:   metav1.StatusReason(ks.GetReason()),
		Message:  ks.GetMessage(),
	}
	if d := ks.GetDetails(); d != nil {
		s.Details = &metav1.StatusDetails{
			Name:              d.GetName(),
			Group:             d.GetGroup(),
			Kind:              d.GetKind(),
			RetryAfterSeconds: d.GetRetryAfterSeconds(),
		}
		s.Details.UID = typesUID(d.GetUid())
		for _, c := range d.GetCauses() {
			s.Details.Causes = append(s.Details.Causes, metav1.StatusCause{
				Type: metav1.CauseType(c.GetReason()), Message: c.GetMessage(), Field: c.GetField(),
			})
		}
	}
	return s
}

// FromError returns the Kubernetes Status an error stands for: the one it
// carries (as an apimachinery StatusError or a KubeStatus gRPC detail), or one
// derived from its gRPC code. A nil error has no Status (nil).
func FromError(err error) *metav1.Status {
	if err == nil {
		return nil
	}
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		s := as.Status()
		s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		return &s
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return FromError(apierrors.NewTimeoutError(err.Error(), 0))
	}
	st, ok := status.FromError(err)
	if !ok {
		return FromError(apierrors.NewInternalError(err))
	}
	for _, d := range st.Details() {
		if ks, ok := d.(*commonv1.KubeStatus); ok {
			return FromProto(ks)
		}
	}
	msg := st.Message()
	var se *apierrors.StatusError
	switch st.Code() {
	case codes.NotFound:
		se = &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: msg}}
	case codes.AlreadyExists:
		se = &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonAlreadyExists, Message: msg}}
	case codes.Aborted:
		se = &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusConflict, Reason: metav1.StatusReasonConflict, Message: msg}}
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition:
		se = apierrors.NewBadRequest(msg)
	case codes.Unauthenticated:
		se = apierrors.NewUnauthorized(msg)
	case codes.PermissionDenied:
		se = apierrors.NewForbidden(schemaGR(), "", errors.New(msg))
	case codes.ResourceExhausted:
		if strings.Contains(msg, "message larger than max") {
			// gRPC's message size limit (pkg/grpcx): retrying will not help.
			se = apierrors.NewInternalError(fmt.Errorf("%s", msg))
			break
		}
		se = apierrors.NewTooManyRequests(msg, 1)
	case codes.DeadlineExceeded:
		se = apierrors.NewTimeoutError(msg, 0)
	case codes.Unavailable:
		se = apierrors.NewServiceUnavailable(msg)
	case codes.Canceled:
		se = apierrors.NewTimeoutError(msg, 0)
	case codes.Unimplemented:
		se = &apierrors.StatusError{ErrStatus: metav1.Status{Code: http.StatusNotImplemented, Reason: metav1.StatusReasonMethodNotAllowed, Message: msg}}
	default:
		se = apierrors.NewInternalError(fmt.Errorf("%s", msg))
	}
	return FromError(se)
}

// CodeForHTTP picks the gRPC code that best stands for an HTTP status code.
func CodeForHTTP(code int) codes.Code {
	switch code {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusConflict:
		return codes.Aborted
	case http.StatusGone:
		return codes.OutOfRange
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	if code >= 500 {
		return codes.Internal
	}
	return codes.Unknown
}
