package conformance

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestProtobufRoundTrip(t *testing.T) {
	for _, doc := range []string{
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"a.b.c"},"spec":{"group":"b.c","scope":"Namespaced","names":{"plural":"a","kind":"A"}}}`,
		`{"apiVersion":"meta.k8s.io/v1","kind":"DeleteOptions","propagationPolicy":"Background"}`,
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"DeleteOptions","gracePeriodSeconds":0}`,
		`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"s"},"spec":{"replicas":4}}`,
	} {
		b, err := encodeProtobuf([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !bytes.HasPrefix(b, []byte("k8s\x00")) {
			t.Fatalf("%s: no envelope: %q", doc, b[:8])
		}
		j, ok := protobufToJSON(b)
		if !ok {
			t.Fatalf("%s: does not decode", doc)
		}
		var in, out map[string]any
		_ = json.Unmarshal([]byte(doc), &in)
		_ = json.Unmarshal(j, &out)
		if in["kind"] != out["kind"] || in["apiVersion"] != out["apiVersion"] {
			t.Errorf("%s: came back as %s", doc, j)
		}
		for _, m := range []string{mangleTruncate, mangleMagic, mangleUnknownField, mangleNoEnvelope} {
			mb, err := mangleProtobuf(b, m)
			if err != nil || bytes.Equal(mb, b) {
				t.Errorf("%s %s: %v (unchanged: %v)", doc, m, err, bytes.Equal(mb, b))
			}
		}
	}
}
