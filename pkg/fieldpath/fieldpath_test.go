package fieldpath

import (
	"errors"
	"slices"
	"testing"
)

func TestWalk(t *testing.T) {
	tests := []struct {
		path        string
		allowArrays bool
		names       []string
		err         string
	}{
		{path: "", names: nil},
		{path: ".a.b", names: []string{"a", "b"}},
		{path: ".m['a.b']", allowArrays: true, names: []string{"m", "a.b"}},
		{path: "['x']['y']", allowArrays: true, names: []string{"x", "y"}},
		{path: `.m['it\'s']`, allowArrays: true, names: []string{"m", "it's"}},
		{path: `.m['a\nb\t\\x']`, allowArrays: true, names: []string{"m", "a\nb\t\\x"}},
		// As upstream: a quote after a backslash never ends a string.
		{path: `.m['a\\']`, allowArrays: true, names: []string{"m"}, err: `expected single quoted string but got 'a\\']`},
		{path: `.m['a\a\b\f\r\v']`, allowArrays: true, names: []string{"m", "a\a\b\f\r\v"}},
		{path: `.m['tail\']`, allowArrays: true, names: []string{"m"}, err: `expected single quoted string but got 'tail\']`},
		{path: `.m['\q']`, allowArrays: true, names: []string{"m"}, err: `invalid string literal: invalid escape char \q`},
		{path: `.m['\é']`, allowArrays: true, names: []string{"m"}, err: `invalid string literal: invalid escape char \é`},
		{path: ".m['a']", allowArrays: false, names: []string{"m"}, err: "array notation is not allowed"},
		{path: ".m[a]", allowArrays: true, names: []string{"m"}, err: "expected single quoted string but got a"},
		{path: ".m['a'", allowArrays: true, names: []string{"m", "a"}, err: "unexpected end of JSON path"},
		{path: ".m['a'.", allowArrays: true, names: []string{"m", "a"}, err: "expected ] but got ."},
		{path: "a", err: "expected [ or . but got: a"},
		{path: ".a.", names: []string{"a"}, err: "unexpected end of JSON path"},
		{path: ".m[", allowArrays: true, names: []string{"m"}, err: "unexpected end of JSON path"},
	}
	for _, tt := range tests {
		var names []string
		err := Walk(tt.path, tt.allowArrays, func(name string) error {
			names = append(names, name)
			return nil
		})
		if got := errString(err); got != tt.err || !slices.Equal(names, tt.names) {
			t.Errorf("%q: names %q, error %q; want %q, %q", tt.path, names, got, tt.names, tt.err)
		}
	}
}

// TestWalkStopsAtStep: step's error ends the walk and is returned as is.
func TestWalkStopsAtStep(t *testing.T) {
	stop := errors.New("does not refer to a valid field")
	calls := 0
	err := Walk(".a.b.c", false, func(name string) error {
		calls++
		if name == "b" {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Fatalf("%v after %d steps", err, calls)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
