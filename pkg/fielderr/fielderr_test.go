package fielderr

import (
	"testing"

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
