// Package fielderr renders field errors (k8s.io/apimachinery's
// field.Error) as upstream Kubernetes v1.33 does: the text of
// k8s.io/apimachinery v0.33's (*field.Error).ErrorBody and Error.
//
// The apimachinery this project builds with (v0.37) renders an error's
// value differently: compound values as JSON ({"a":1}) where v0.33 prints
// them with %#v (map[string]interface {}{"a":1}), a nil value as null
// where v0.33 prints "null", a fmt.Stringer after trying JSON. Messages
// that reach clients are rendered here instead.
package fielderr

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Error is e's text as v0.33's (*field.Error).Error: "<field>: <body>".
func Error(e *field.Error) string {
	return fmt.Sprintf("%s: %s", e.Field, Body(e))
}

// Body is e's text without the field, as v0.33's ErrorBody: the type's
// words, then (except for Required, Forbidden, Too long, Internal error
// and omitted values) the value, then the detail.
func Body(e *field.Error) string {
	var s string
	switch {
	case e.Type == field.ErrorTypeRequired, e.Type == field.ErrorTypeForbidden,
		e.Type == field.ErrorTypeTooLong, e.Type == field.ErrorTypeInternal:
		s = e.Type.String()
	case e.BadValue == field.OmitValueType{}:
		s = e.Type.String()
	default:
		value := e.BadValue
		valueType := reflect.TypeOf(value)
		if value == nil || valueType == nil {
			value = "null"
		} else if valueType.Kind() == reflect.Pointer {
			if rv := reflect.ValueOf(value); rv.IsNil() {
				value = "null"
			} else {
				value = rv.Elem().Interface()
			}
		}
		switch t := value.(type) {
		case int64, int32, float64, float32, bool:
			s = fmt.Sprintf("%s: %v", e.Type, value)
		case string:
			s = fmt.Sprintf("%s: %q", e.Type, t)
		case fmt.Stringer:
			s = fmt.Sprintf("%s: %s", e.Type, t.String())
		default:
			s = fmt.Sprintf("%s: %#v", e.Type, value)
		}
	}
	if len(e.Detail) != 0 {
		s += fmt.Sprintf(": %s", e.Detail)
	}
	return s
}

// Aggregate is v0.33's errs.ToAggregate().Error(): each distinct error
// once, in brackets when there are several ("" for none).
func Aggregate(errs field.ErrorList) string {
	var msgs []string
	seen := map[string]bool{}
	for _, e := range errs {
		if m := Error(e); !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	if len(msgs) == 0 {
		return ""
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// NewInvalid is v0.33's apierrors.NewInvalid: the 422 for errs, every
// cause's message rendered by Body, the message listing each distinct
// error once ("<kind> \"<name>\" is invalid: [<a>, <b>]", without the
// brackets for a single error).
func NewInvalid(qualifiedKind schema.GroupKind, name string, errs field.ErrorList) *apierrors.StatusError {
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: Body(e), Field: e.Field})
	}
	msg := fmt.Sprintf("%s %q is invalid", qualifiedKind.String(), name)
	if len(errs) > 0 {
		msg += ": " + Aggregate(errs)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: msg,
		Details: &metav1.StatusDetails{Group: qualifiedKind.Group, Kind: qualifiedKind.Kind, Name: name, Causes: causes},
	}}
}
