package fielderr

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type stringer struct{}

func (stringer) String() string { return "stringer" }

// The expected texts are apimachinery v0.33's (*field.Error).Error of the
// same errors.
func TestError(t *testing.T) {
	p := field.NewPath("spec").Child("x")
	s := "s"
	var nilPtr *string
	cases := []struct {
		e    *field.Error
		want string
	}{
		{field.Duplicate(p, "a"), `spec.x: Duplicate value: "a"`},
		{field.Duplicate(p, int64(1)), `spec.x: Duplicate value: 1`},
		{field.Duplicate(p, 1.5), `spec.x: Duplicate value: 1.5`},
		{field.Duplicate(p, true), `spec.x: Duplicate value: true`},
		{field.Duplicate(p, nil), `spec.x: Duplicate value: "null"`},
		{field.Duplicate(p, map[string]any{"b": "x", "a": int64(1)}), `spec.x: Duplicate value: map[string]interface {}{"a":1, "b":"x"}`},
		{field.Duplicate(p, map[string]any{}), `spec.x: Duplicate value: map[string]interface {}{}`},
		{field.Duplicate(p, []any{"a", int64(2), map[string]any{"c": nil}}), `spec.x: Duplicate value: []interface {}{"a", 2, map[string]interface {}{"c":interface {}(nil)}}`},
		{field.Invalid(p, &s, "d"), `spec.x: Invalid value: "s": d`},
		{field.Invalid(p, nilPtr, "d"), `spec.x: Invalid value: "null": d`},
		{field.Invalid(p, stringer{}, "d"), `spec.x: Invalid value: stringer: d`},
		{field.Invalid(p, field.OmitValueType{}, "d"), `spec.x: Invalid value: d`},
		{field.Invalid(p, 3, "d"), `spec.x: Invalid value: 3: d`},
		{field.Required(p, "d"), `spec.x: Required value: d`},
		{field.Required(p, ""), `spec.x: Required value`},
		{field.Forbidden(p, "d"), `spec.x: Forbidden: d`},
		{field.InternalError(p, errString("boom")), `spec.x: Internal error: boom`},
		{field.NotSupported(p, "c", []string{"a", "b"}), `spec.x: Unsupported value: "c": supported values: "a", "b"`},
		{field.TooMany(p, 3, 2), `spec.x: Too many: 3: must have at most 2 items`},
	}
	for _, c := range cases {
		if got := Error(c.e); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestNewInvalid: the 422 as apimachinery v0.33's apierrors.NewInvalid
// renders it: causes with v0.33 bodies (a uint64 as 0x0, a []string with
// %#v), repeated errors once in the message, brackets for several.
func TestNewInvalid(t *testing.T) {
	gk := schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	p := field.NewPath("spec", "versions")
	one := NewInvalid(gk, "a", field.ErrorList{field.Invalid(p, []string(nil), "d")})
	if want := `CustomResourceDefinition.apiextensions.k8s.io "a" is invalid: spec.versions: Invalid value: []string(nil): d`; one.Error() != want {
		t.Errorf("got  %s\nwant %s", one.Error(), want)
	}
	errs := field.ErrorList{
		field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update"),
		field.Required(p, ""),
		field.Required(p, ""),
	}
	st := NewInvalid(schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "customresourcedefinitions"}, "b", errs).ErrStatus
	if want := `customresourcedefinitions.apiextensions.k8s.io "b" is invalid: [metadata.resourceVersion: Invalid value: 0x0: must be specified for an update, spec.versions: Required value]`; st.Message != want {
		t.Errorf("got  %s\nwant %s", st.Message, want)
	}
	if st.Code != 422 || st.Reason != metav1.StatusReasonInvalid || len(st.Details.Causes) != 3 || st.Details.Causes[0].Message != "Invalid value: 0x0: must be specified for an update" ||
		st.Details.Kind != "customresourcedefinitions" || st.Details.Name != "b" {
		t.Errorf("status %+v", st)
	}
	if got := NewInvalid(gk, "c", nil).Error(); got != `CustomResourceDefinition.apiextensions.k8s.io "c" is invalid` {
		t.Errorf("no errors: %s", got)
	}
}
