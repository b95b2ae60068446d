package fielderr

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// v0.33's field.TooLong and field.TooMany texts (no singular for 1).
func TestTooLongTooMany(t *testing.T) {
	p := field.NewPath("spec", "x")
	cases := []struct {
		e    *field.Error
		want string
	}{
		{TooLong(p, 1), `spec.x: Too long: may not be more than 1 bytes`},
		{TooLong(p, 63), `spec.x: Too long: may not be more than 63 bytes`},
		{TooLong(p, -1), `spec.x: Too long: value is too long`},
		{TooMany(p, 2, 1), `spec.x: Too many: 2: must have at most 1 items`},
		{TooMany(p, 3, 2), `spec.x: Too many: 3: must have at most 2 items`},
		{TooMany(p, -1, 2), `spec.x: Too many: must have at most 2 items`},
		{TooMany(p, 3, -1), `spec.x: Too many: 3: has too many items`},
	}
	for _, c := range cases {
		if got := Error(c.e); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
