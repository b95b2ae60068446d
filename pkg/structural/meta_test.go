package structural

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/crdplane/crdplane/pkg/jsonenc"
)

// TestCanonicalManagedFields checks the fast path against the round trip:
// metadata it accepts as canonical comes back unchanged from decoding into
// metav1.ObjectMeta and writing back, and decodes to the same ObjectMeta.
func TestCanonicalManagedFields(t *testing.T) {
	tests := []struct {
		name      string
		metadata  string
		canonical bool
	}{
		{"entries", `{"name":"w","managedFields":[{"manager":"bob","operation":"Apply","apiVersion":"a.example.com/v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:name":{}}}}}},{"manager":"kubectl","operation":"Update","subresource":"status","fieldsType":"FieldsV1","fieldsV1":{}}]}`, true},
		{"empty manager", `{"managedFields":[{"manager":"","operation":"Apply"}]}`, false},
		{"fieldsV1 leaf not an object", `{"managedFields":[{"manager":"a","fieldsV1":{"f:x":1}}]}`, false},
		{"fieldsV1 null", `{"managedFields":[{"manager":"a","fieldsV1":null}]}`, false},
		{"time not canonical", `{"managedFields":[{"manager":"a","time":"2026-01-02T03:04:05.5Z"}]}`, false},
		{"unknown entry field", `{"managedFields":[{"manager":"a","x":"y"}]}`, false},
		{"empty list", `{"managedFields":[]}`, false},
		{"entry not an object", `{"managedFields":["a"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(tt.metadata), &m); err != nil {
				t.Fatal(err)
			}
			fast, ok := canonicalObjectMeta(m, true)
			if ok != tt.canonical {
				t.Fatalf("canonical = %v, want %v", ok, tt.canonical)
			}
			if !ok {
				return
			}
			slow, _, _, err := decodeObjectMeta(m, false, "")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("fast path decodes\n%#v\nround trip\n%#v", fast, slow)
			}
			obj := map[string]any{}
			if err := setObjectMeta(obj, slow); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(obj["metadata"], m) {
				t.Errorf("round trip writes\n%v\nwant\n%v", obj["metadata"], m)
			}
		})
	}
}

// TestFieldsV1Encoding checks the fieldsV1 encoding (pkg/jsonenc) of a
// tree of objects against encoding/json.
func TestFieldsV1Encoding(t *testing.T) {
	tree := map[string]any{
		"f:spec": map[string]any{
			`k:{"name":"http","port":80}`: map[string]any{".": map[string]any{}, "f:name": map[string]any{}},
			`f:a<b>&c\d`:                  map[string]any{},
			"f:ünï\u2028\x01\x7f":         map[string]any{},
		},
		".": map[string]any{},
	}
	want, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := jsonenc.Marshal(tree); string(got) != string(want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
