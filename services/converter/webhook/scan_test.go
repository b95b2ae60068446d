package webhook

import (
	"bytes"
	"encoding/json"
	"testing"

	utiljson "sigs.k8s.io/json"
)

// FuzzScanMembers checks the top-level scanner against a case-sensitive JSON
// decoder on valid JSON objects.
func FuzzScanMembers(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"}}`,
		` { "kind" : "K" , "metadata" : { "a" : [ 1, {"}":"]"} ] } , "apiVersion" : "x\"}" } `,
		`{"spec":{"metadata":{"name":"nested"}},"metadata":null,"kind":1.5e3}`,
		`{"apiVersion":"a","apiVersion":"b"}`,
		`{"\u0061piVersion":"escaped","Kind":"case"}`,
		`{"metadata":{"labels":{"a\\":"b\\\""}},"x":[true,false,null]}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var want struct {
			APIVersion json.RawMessage `json:"apiVersion"`
			Kind       json.RawMessage `json:"kind"`
			Metadata   json.RawMessage `json:"metadata"`
		}
		trimmed := bytes.TrimSpace(obj)
		if !json.Valid(obj) || len(trimmed) == 0 || trimmed[0] != '{' || utiljson.UnmarshalCaseSensitivePreserveInts(obj, &want) != nil {
			return
		}
		var h [3]member
		if err := scanMembers(obj, headKeys, h[:]); err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		for _, c := range []struct {
			name      string
			got, want []byte
		}{{"apiVersion", h[0].raw(obj), want.APIVersion}, {"kind", h[1].raw(obj), want.Kind}, {"metadata", h[2].raw(obj), want.Metadata}} {
			if !bytes.Equal(c.got, c.want) {
				t.Fatalf("%s of %s: got %q, want %q", c.name, obj, c.got, c.want)
			}
		}
	})
}
