package conformance

import (
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"
)

func TestNormalizeJSON(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	n := normalizer{host: "127.0.0.1:4443", now: now}
	cases := []struct {
		name, in, want string
		ignore         []string
		unordered      bool
	}{
		{
			name: "server-set metadata",
			in:   `{"metadata":{"uid":"0d0c8a52-3c6e-4d1f-9a6b-2f0e5b8a9c11","resourceVersion":"42","creationTimestamp":"2026-11-25T11:59:00Z","managedFields":[{"manager":"m","time":"2026-11-25T11:59:00Z"},{"manager":"apiextensions-upstream","operation":"Update"}]}}`,
			want: `{"metadata":{"creationTimestamp":"<time>","managedFields":[{"manager":"m","time":"<time>"},{"manager":"kube-apiserver","operation":"Update"}],"resourceVersion":"<resourceVersion>","uid":"<uid>"}}`,
		},
		{
			name: "a case's own dates are kept",
			in:   `{"spec":{"at":"2024-01-02T03:04:05Z"}}`,
			want: `{"spec":{"at":"2024-01-02T03:04:05Z"}}`,
		},
		{
			name: "a uid that is not a UUID is kept",
			in:   `{"uid":"abc"}`,
			want: `{"uid":"abc"}`,
		},
		{
			name: "list metadata and continue",
			in:   `{"metadata":{"resourceVersion":"7","continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ","remainingItemCount":3},"items":[]}`,
			want: `{"items":[],"metadata":{"continue":"<continue>","remainingItemCount":3,"resourceVersion":"<resourceVersion>"}}`,
		},
		{
			name: "generated names",
			in:   `{"metadata":{"generateName":"a-","name":"a-x7k2p"}}`,
			want: `{"metadata":{"generateName":"a-","name":"a-<generated>"}}`,
		},
		{
			name: "server address in a message",
			in:   `{"message":"see https://127.0.0.1:4443/apis"}`,
			want: `{"message":"see https://<server>/apis"}`,
		},
		{
			name: "large integers keep their text",
			in:   `{"n":9007199254740993}`,
			want: `{"n":9007199254740993}`,
		},
		{
			name:   "ignored paths",
			in:     `{"status":{"a":1},"spec":{"l":[{"x":1,"y":2},{"x":3}]}}`,
			ignore: []string{"status", "spec.l.*.x"},
			want:   `{"spec":{"l":[{"y":2},{}]}}`,
		},
		{
			name: "CRD conditions by type",
			in:   `{"kind":"CustomResourceDefinition","status":{"conditions":[{"type":"NamesAccepted"},{"type":"Established"}]}}`,
			want: `{"kind":"CustomResourceDefinition","status":{"conditions":[{"type":"Established"},{"type":"NamesAccepted"}]}}`,
		},
		{
			name:      "causes and the message's list in one order",
			unordered: true,
			in:        `{"kind":"Status","message":"X \"a\" is invalid: [spec.b: Invalid value: 2: bad, spec.a: Required value]","details":{"causes":[{"field":"spec.b","message":"Invalid value: 2: bad"},{"field":"spec.a","message":"Required value"}]}}`,
			want:      `{"details":{"causes":[{"field":"spec.a","message":"Required value"},{"field":"spec.b","message":"Invalid value: 2: bad"}]},"kind":"Status","message":"X \"a\" is invalid: [spec.a: Required value, spec.b: Invalid value: 2: bad]"}`,
		},
		{
			name: "causes keep their order unless asked",
			in:   `{"kind":"Status","details":{"causes":[{"field":"b"},{"field":"a"}]}}`,
			want: `{"details":{"causes":[{"field":"b"},{"field":"a"}]},"kind":"Status"}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := n.JSON([]byte(c.in), c.ignore, c.unordered)
			if !ok {
				t.Fatal("not JSON")
			}
			want, _ := n.JSON([]byte(c.want), nil, false)
			if got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
	if _, ok := n.JSON([]byte(`{"a":1} {"b":2}`), nil, false); ok {
		t.Error("two documents read as one JSON value")
	}
}

func TestLookup(t *testing.T) {
	v, _ := decodeJSON([]byte(`{"items":[{"metadata":{"name":"a","n":12345678901234567890}}],"b":true}`))
	for path, want := range map[string]string{
		"items[0].metadata.name": "a",
		"items[0].metadata.n":    "12345678901234567890",
		"items[1].metadata.name": "",
		"b":                      "true",
		"missing.x":              "",
	} {
		if got := lookup(v, path); got != want {
			t.Errorf("lookup(%s) = %q, want %q", path, got, want)
		}
	}
}

func TestSummarise(t *testing.T) {
	results := []Result{
		{ID: "a#0", Identical: true},
		{ID: "a#1", Identical: false},
		{ID: "a#2", Identical: false},
		{ID: "a#3", Identical: true},
		{ID: "a#4", Identical: false},
	}
	allow := map[string]Listed{"a#1": {ID: "a#1", Reason: "r"}}
	pending := map[string]Listed{"a#2": {ID: "a#2", Reason: "r"}, "a#3": {ID: "a#3", Reason: "fixed"}, "gone#9": {ID: "gone#9", Reason: "r"}}
	s := Summarise(results, allow, pending)
	if s.Requests != 5 || s.Identical != 2 || len(s.Allowed) != 1 || len(s.Pending) != 1 || len(s.Unexpected) != 1 || s.Unexpected[0].ID != "a#4" {
		t.Errorf("summary %+v", s)
	}
	if strings.Join(s.Stale, ",") != "a#3,gone#9" {
		t.Errorf("stale %v, want a#3 (now identical) and gone#9 (no such step)", s.Stale)
	}
	if got := s.Line(); got != "5 requests, 2 identical (1 allowed, 1 pending, 1 unexpected differences)" {
		t.Errorf("line %q", got)
	}
}

func TestLoadFileRejectsBrokenCases(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"nothing.yaml":   "steps:\n- name: x\n",
		"nomethod.yaml":  "steps:\n- path: /x\n",
		"twobodies.yaml": "steps:\n- {method: POST, path: /x, body: {}, rawBody: '{}'}\n",
		"unknown.yaml":   "steps:\n- {method: GET, path: /x, stauts: 200}\n",
	} {
		p := dir + "/" + name
		if err := writeFile(p, body); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(p); err == nil {
			t.Errorf("%s: loaded, want an error", name)
		}
	}
}

func TestMutationsBreakTheObject(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "required": []any{"mode"}, "properties": map[string]any{
			"mode":     map[string]any{"type": "string", "enum": []any{"A", "B"}},
			"replicas": map[string]any{"type": "integer", "maximum": float64(5)},
		}},
	}}
	obj := map[string]any{"apiVersion": "x/v1", "kind": "K", "metadata": map[string]any{"name": "n"},
		"spec": map[string]any{"mode": "A", "replicas": float64(2)}}
	seen := map[string]bool{}
	for seed := int64(0); seed < 50; seed++ {
		m := mutate(obj, schema, newRand(seed))
		if m == nil {
			t.Fatal("no mutation")
		}
		kind := strings.Fields(m.what)[0]
		seen[kind] = true
		if m.obj["metadata"].(map[string]any)["name"] != "n" {
			t.Error("metadata changed")
		}
	}
	for _, k := range []string{"wrong", "without", "value", "unknown", "update"} {
		if !seen[k] {
			t.Errorf("no %q mutation in 50 seeds: %v", k, seen)
		}
	}
	if obj["spec"].(map[string]any)["mode"] != "A" {
		t.Error("mutate changed the original")
	}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }

func newRand(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }
