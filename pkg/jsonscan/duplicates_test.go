package jsonscan

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
)

// strictDuplicates is what sigs.k8s.io/json's strict decoding (upstream's
// request decoder) reports of b's duplicate fields.
func strictDuplicates(t *testing.T, b []byte) []string {
	t.Helper()
	strictErrs, err := kjson.UnmarshalStrict(b, &map[string]any{})
	if err != nil {
		t.Fatalf("UnmarshalStrict: %v", err)
	}
	var out []string
	for _, e := range strictErrs {
		q, ok := strings.CutPrefix(e.Error(), "duplicate field ")
		if !ok {
			t.Fatalf("strict error %q", e)
		}
		p, err := strconv.Unquote(q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestDuplicateFields(t *testing.T) {
	var many strings.Builder
	many.WriteString("{")
	for i := range 150 {
		fmt.Fprintf(&many, `"k%d":1,"k%d":2,`, i, i)
	}
	many.WriteString(`"z":0}`)
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"none", `{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}`, nil},
		{"empty", ` { } `, nil},
		{"top", `{"a":1,"a":2}`, []string{"a"}},
		{"thrice", `{"a":1,"a":2,"a":3}`, []string{"a"}},
		{"nested", `{"spec":{"x":1,"y":2,"x":3}}`, []string{"spec.x"}},
		{"repeat before its value's", `{"a":{"x":1,"x":2},"a":{"y":1,"y":2}}`, []string{"a.x", "a", "a.y"}},
		{"arrays", `{"l":[{"n":1,"n":2},{"n":1}],"l2":[[1,{"k":1,"k":1}]]}`, []string{"l[0].n", "l2[0][1].k"}},
		{"escaped key", `{"a\u0062":1,"ab":2}`, []string{"ab"}},
		{"case sensitive", `{"a":1,"A":2}`, nil},
		{"a path once", `{"a":{"b":1,"b":2},"a.b":1,"a.b":2}`, []string{"a.b"}},
		{"large object", `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"k":1,"l":1,"m":1,"n":1,"o":1,"p":1,"q":1,"r":1,"a":2,"r":2}`, []string{"a", "r"}},
		{"white space", " {\n \"a\" : [ {\"b\" :1 , \"b\":2 } ] ,\t\"a\":0 }", []string{"a[0].b", "a"}},
		{"at most 100", many.String(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DuplicateFields([]byte(tc.in), 0)
			if err != nil {
				t.Fatal(err)
			}
			up := strictDuplicates(t, []byte(tc.in))
			if tc.name == "at most 100" {
				if len(got) != 100 || !reflect.DeepEqual(got, up) {
					t.Fatalf("got %d %q\nupstream %d %q", len(got), got, len(up), up)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !reflect.DeepEqual(got, up) {
				t.Errorf("got %q, upstream %q", got, up)
			}
		})
	}
	for _, bad := range []string{`{"a":1,"a":}`, `{"a":[1,}`, `{"a":[1 2]}`, `{"a":{"b":1,"b"}}`, `[`, ``} {
		if _, err := DuplicateFields([]byte(bad), 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
