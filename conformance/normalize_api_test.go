package conformance

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNormalizeMessageRVsAndTableAges(t *testing.T) {
	n := normalizer{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	cases := []struct{ name, in, want string }{
		{
			name: "a failed resourceVersion precondition",
			in:   `{"kind":"Status","message":"Operation cannot be fulfilled on Crate.x \"pre\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (13). The object might have been modified"}`,
			want: `{"kind":"Status","message":"Operation cannot be fulfilled on Crate.x \"pre\": the ResourceVersion in the precondition (<resourceVersion>) does not match the ResourceVersion in record (<resourceVersion>). The object might have been modified"}`,
		},
		{
			name: "a resourceVersion too large keeps the requested one",
			in:   `{"kind":"Status","message":"Timeout: Too large resource version: 99999999, current: 170"}`,
			want: `{"kind":"Status","message":"Timeout: Too large resource version: 99999999, current: <resourceVersion>"}`,
		},
		{
			name: "other numbers in messages are kept",
			in:   `{"kind":"Status","message":"spec.size: Invalid value: 1000: must be at most 100"}`,
			want: `{"kind":"Status","message":"spec.size: Invalid value: 1000: must be at most 100"}`,
		},
		{
			name: "recent ages in a Table's date columns; old dates and other columns kept",
			in: `{"kind":"Table","columnDefinitions":[{"name":"Name","type":"string"},{"name":"Age","type":"date"},{"name":"Launched","type":"date"},{"name":"Note","type":"string"}],` +
				`"rows":[{"cells":["a","0s","6y330d","5s"]},{"cells":["b","3m20s","20h","1s"]},{"cells":["c","2d","<invalid>",null]},{"cells":["d",null]}]}`,
			want: `{"columnDefinitions":[{"name":"Name","type":"string"},{"name":"Age","type":"date"},{"name":"Launched","type":"date"},{"name":"Note","type":"string"}],"kind":"Table",` +
				`"rows":[{"cells":["a","<age>","6y330d","5s"]},{"cells":["b","<age>","<age>","1s"]},{"cells":["c","2d","<invalid>",null]},{"cells":["d",null]}]}`,
		},
		{
			name: "a watch event's Table",
			in:   `{"type":"ADDED","object":{"kind":"Table","columnDefinitions":[{"name":"Age","type":"date"}],"rows":[{"cells":["12s"]}]}}`,
			want: `{"object":{"columnDefinitions":[{"name":"Age","type":"date"}],"kind":"Table","rows":[{"cells":["<age>"]}]},"type":"ADDED"}`,
		},
		{
			name: "not a Table",
			in:   `{"kind":"Widget","columnDefinitions":[{"name":"Age","type":"date"}],"rows":[{"cells":["12s"]}]}`,
			want: `{"columnDefinitions":[{"name":"Age","type":"date"}],"kind":"Widget","rows":[{"cells":["12s"]}]}`,
		},
	}
	for _, c := range cases {
		got, ok := n.JSON([]byte(c.in), nil, false)
		if !ok {
			t.Fatalf("%s: not JSON", c.name)
		}
		if want := canonical(t, c.want); got != want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, got, want)
		}
	}
}

// canonical renders a JSON document as normalizer.JSON does, without
// normalising it.
func canonical(t *testing.T, s string) string {
	t.Helper()
	v, ok := decodeJSON([]byte(s))
	if !ok {
		t.Fatalf("not JSON: %s", s)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(out.String(), "\n")
}
