package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Upstream's wording (k8s.io/apiserver).
const (
	msgObjectModified  = "the object has been modified; please apply your changes to the latest version and try again"
	msgContinueExpired = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter."
	// msgListExpired answers a list at a compacted revision (etcd3's store;
	// watches say "too old resource version").
	msgListExpired = "The resourceVersion for the provided list is too old."
)

func errNotFound(k objectKey) error { return apierrors.NewNotFound(k.resource, k.name) }

func errAlreadyExists(k objectKey) error { return apierrors.NewAlreadyExists(k.resource, k.name) }

func errConflict(k objectKey) error {
	return apierrors.NewConflict(k.resource, k.name, errors.New(msgObjectModified))
}

// errPrecondition is upstream's rest.BeforeDelete conflict: it names the
// object by group and kind.
func errPrecondition(k objectKey, kind string, msg string) error {
	if kind == "" {
		kind = k.resource.Resource
	}
	return apierrors.NewConflict(schema.GroupResource{Group: k.resource.Group, Resource: kind}, k.name, errors.New(msg))
}

// errTooOld is the 410 for a revision etcd has compacted away.
func errTooOld(asked, oldest int64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", asked, oldest))
}

// errTooLarge is upstream's answer to a revision the store has not reached
// (k8s.io/apiserver/pkg/storage NewTooLargeResourceVersionError, with its
// watch cache's retry after 1s).
func errTooLarge(asked uint64, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", asked, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

func errBadObject(err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("the object is not a valid JSON object: %v", err))
}

// etcdErr turns an etcd client error into an error for the caller: the
// context's own end, 503 while etcd has no leader or cannot be reached, 500
// otherwise.
func etcdErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	switch {
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrLeaderChanged),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost), errors.Is(err, rpctypes.ErrTooManyRequests):
		return apierrors.NewServiceUnavailable(err.Error())
	}
	if status.Code(err) == codes.Unavailable {
		return apierrors.NewServiceUnavailable(err.Error())
	}
	if isTooLarge(err) {
		// Upstream returns these as they are (its handlers retry without
		// managedFields, then give up).
		return plainStatus(err)
	}
	return apierrors.NewInternalError(fmt.Errorf("etcd: %w", err))
}

// plainStatus is how upstream's ErrorToAPIStatus renders an error that is
// not a Status (an etcd error its storage returns as it is): a 500 without
// a reason carrying the error's text.
func plainStatus(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}}
}

// isTooLarge is upstream's isTooLargeError (k8s.io/apiserver/pkg/endpoints/
// handlers/rest.go): etcd refused the request as larger than its
// --max-request-bytes ("etcdserver: request is too large", 1.5 MiB by
// default), or the client would not send it (the etcd client's 2 MiB:
// "rpc error: code = ResourceExhausted desc = trying to send message larger
// than max (N vs. 2097152)").
func isTooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "trying to send message larger than max")
}

// storedObjectErr reports a stored value that is not a JSON object.
func storedObjectErr(key []byte, err error) error {
	return apierrors.NewInternalError(fmt.Errorf("stored object %s: %w", key, err))
}
