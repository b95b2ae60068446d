package registry

import (
	"encoding/json"
	"testing"
)

// TestCoerceDefaults: the defaults of embedded resources are stored as
// upstream's CRD validation leaves them: their metadata as ObjectMeta keeps
// it (unknown fields and empty maps dropped), at any depth of the value;
// defaults inside an embedded resource's metadata, and anything that is
// not an embedded resource, stay as sent.
func TestCoerceDefaults(t *testing.T) {
	const schema = `{"type":"object","properties":{
		"e":{"type":"object","x-kubernetes-embedded-resource":true,
			"properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object","properties":{"name":{"type":"string","default":"x"}}}},
			"default":{"apiVersion":"v1","kind":"Foo","metadata":{"name":"a","bogus":1,"labels":{}}}},
		"wrap":{"type":"object","properties":{"inner":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true}},
			"default":{"inner":{"apiVersion":"v1","kind":"Foo","metadata":{"name":"b","bogus":2}}}},
		"plain":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"default":{"metadata":{"bogus":3}}}}}`
	crd := &CRD{}
	if err := json.Unmarshal([]byte(`{"spec":{"versions":[{"name":"v1","schema":{"openAPIV3Schema":`+schema+`}}]}}`), crd); err != nil {
		t.Fatal(err)
	}
	coerceDefaults(crd)
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	for _, c := range []struct{ prop, got, want string }{
		{"e", string(props["e"].Default.Raw), `{"apiVersion":"v1","kind":"Foo","metadata":{"name":"a"}}`},
		{"e.metadata.name", string(props["e"].Properties["metadata"].Properties["name"].Default.Raw), `"x"`},
		{"wrap", string(props["wrap"].Default.Raw), `{"inner":{"apiVersion":"v1","kind":"Foo","metadata":{"name":"b"}}}`},
		{"plain", string(props["plain"].Default.Raw), `{"metadata":{"bogus":3}}`},
	} {
		if c.got != c.want {
			t.Errorf("%s: default %s, want %s", c.prop, c.got, c.want)
		}
	}
}
