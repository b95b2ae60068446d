package httpx

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
)

// CausesFromFieldErrors turns field errors into Status causes, as
// apierrors.NewInvalid does, the bodies worded as upstream v1.33 (fielderr:
// compound values with %#v), as the validator words its causes that join
// them.
func CausesFromFieldErrors(errs field.ErrorList) []metav1.StatusCause {
	out := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		out = append(out, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: fielderr.Body(e), Field: e.Field})
	}
	return out
}

// CausesFromProto converts the validator's field errors.
func CausesFromProto(cs []*commonv1.StatusCause) []metav1.StatusCause {
	out := make([]metav1.StatusCause, 0, len(cs))
	for _, c := range cs {
		out = append(out, metav1.StatusCause{Type: metav1.CauseType(c.GetReason()), Message: c.GetMessage(), Field: c.GetField()})
	}
	return out
}

// NewInvalid assembles the 422 kube-apiserver answers for field errors,
// worded exactly as apierrors.NewInvalid renders it:
//
//	CronTab.stable.example.com "x" is invalid: spec.replicas: Invalid value: 15: ...
//	CronTab.stable.example.com "x" is invalid: [spec.a: ..., spec.b: ...]
//
// from causes that already carry each error's field and body. Repeated
// errors appear once.
func NewInvalid(gk schema.GroupKind, name string, causes []metav1.StatusCause) *apierrors.StatusError {
	var uniq []metav1.StatusCause
	seenCause := map[metav1.StatusCause]bool{}
	for _, c := range causes {
		if !seenCause[c] {
			seenCause[c] = true
			uniq = append(uniq, c)
		}
	}
	return NewInvalidAll(gk, name, uniq)
}

// NewInvalidAll is NewInvalid keeping repeated causes, as
// apierrors.NewInvalid does (its message, ErrorList.ToAggregate, still
// names each error once): an update's metadata errors, which upstream
// validates twice (rest.BeforeUpdate's common fields, then the custom
// resource validator's ValidateObjectMetaAccessorUpdate).
func NewInvalidAll(gk schema.GroupKind, name string, causes []metav1.StatusCause) *apierrors.StatusError {
	var msgs []string
	seenMsg := map[string]bool{}
	for _, c := range causes {
		m := fmt.Sprintf("%s: %s", c.Field, c.Message)
		if !seenMsg[m] {
			seenMsg[m] = true
			msgs = append(msgs, m)
		}
	}
	var msg string
	switch len(msgs) {
	case 0:
		msg = fmt.Sprintf("%s %q is invalid", gk.String(), name)
	case 1:
		msg = fmt.Sprintf("%s %q is invalid: %s", gk.String(), name, msgs[0])
	default:
		msg = fmt.Sprintf("%s %q is invalid: [%s]", gk.String(), name, strings.Join(msgs, ", "))
	}
	if causes == nil {
		causes = []metav1.StatusCause{}
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: msg,
		Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name, Causes: causes},
	}}
}
