package crdlimits

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func nested(levels int, wrap func(*apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps) *apiextensions.JSONSchemaProps {
	s := &apiextensions.JSONSchemaProps{Type: "string"}
	for i := 0; i < levels; i++ {
		w := wrap(s)
		s = &w
	}
	return s
}

func TestSchemaDepth(t *testing.T) {
	props := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		return apiextensions.JSONSchemaProps{Type: "object", Properties: map[string]apiextensions.JSONSchemaProps{"a": *c, "b": {Type: "string"}}}
	}
	items := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		return apiextensions.JSONSchemaProps{Type: "array", Items: &apiextensions.JSONSchemaPropsOrArray{Schema: c}}
	}
	additional := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		return apiextensions.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensions.JSONSchemaPropsOrBool{Allows: true, Schema: c}}
	}
	not := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		return apiextensions.JSONSchemaProps{Not: c}
	}
	allOf := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		return apiextensions.JSONSchemaProps{AllOf: []apiextensions.JSONSchemaProps{{}, *c}}
	}
	definitions := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		return apiextensions.JSONSchemaProps{Definitions: apiextensions.JSONSchemaDefinitions{"d": *c}}
	}
	alternate := func(c *apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps {
		if c.Type == "array" {
			return props(c)
		}
		return items(c)
	}
	if got := SchemaDepth(nil); got != 0 {
		t.Errorf("nil: %d", got)
	}
	for name, wrap := range map[string]func(*apiextensions.JSONSchemaProps) apiextensions.JSONSchemaProps{
		"properties": props, "items": items, "additionalProperties": additional, "not": not,
		"allOf": allOf, "definitions": definitions, "alternate": alternate,
	} {
		for _, levels := range []int{0, 1, 2, MaxSchemaDepth, MaxSchemaDepth + 1, 4900} {
			if got := SchemaDepth(nested(levels, wrap)); got != levels {
				t.Errorf("%s, %d levels: SchemaDepth = %d", name, levels, got)
			}
		}
	}
	// the deepest branch counts, wherever it is
	s := props(nested(10, items))
	s.Properties["c"] = *nested(20, not)
	if got := SchemaDepth(&s); got != 21 {
		t.Errorf("branches: %d, want 21", got)
	}
}

// crdJSON is a v1 CRD with the given schemas (raw JSON; "" for none).
func crdJSON(schemas ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"deeps.deep.example.com"},"spec":{"group":"deep.example.com","scope":"Namespaced","names":{"plural":"deeps","kind":"Deep"},"versions":[`)
	for i, s := range schemas {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"v%d","served":true,"storage":%t`, i+1, i == 0)
		if s != "" {
			b.WriteString(`,"schema":{"openAPIV3Schema":` + s + `}`)
		}
		b.WriteString("}")
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// deepJSON nests levels schemas of properties.
func deepJSON(levels int) string {
	return strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels)
}

func TestVersionSchemaDepths(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want []int
	}{
		{"no versions", `{"spec":{}}`, []int{}},
		{"none", string(crdJSON("")), []int{-1}},
		{"scalar", string(crdJSON(`{"type":"string"}`)), []int{0}},
		{"properties", string(crdJSON(deepJSON(3), deepJSON(70))), []int{3, 70}},
		{"items list", string(crdJSON(`{"items":[{"type":"string"},{"items":{"not":{}}}]}`)), []int{3}},
		{"junctors", string(crdJSON(`{"allOf":[{"anyOf":[{"oneOf":[{"not":{"additionalProperties":{"additionalItems":{}}}}]}]}]}`)), []int{6}},
		{"maps", string(crdJSON(`{"patternProperties":{"x":{"definitions":{"y":{"dependencies":{"z":{"properties":{}},"w":["a"]}}}}}}`)), []int{3}},
		{"bool and null", string(crdJSON(`{"additionalProperties":true,"items":null,"properties":null,"not":null}`)), []int{0}},
		{"opaque values", string(crdJSON(`{"default":{"properties":{"a":{"properties":{}}}},"example":[[[{}]]],"enum":[{"not":{}}],"x-kubernetes-validations":[{"rule":"{"}]}`)), []int{0}},
		{"escaped keys", `{"sp\u0065c":{"versions":[{"schema":{"openAPIV3Schema":{"prop\u0065rties":{"a":{}}}}}]}}`, []int{1}},
		{"case matters", `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"Properties":{"a":{}}}}},{"Schema":{"openAPIV3Schema":{}}}]}}`, []int{0, -1}},
		{"repeated keys: the deepest", `{"spec":{"versions":[{},{"schema":{"openAPIV3Schema":{"not":{"not":{}}}}}],"versions":[{"schema":{"openAPIV3Schema":{"not":{}}}}]}}`, []int{1, 2}},
		{"repeated schema", `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"not":{"not":{}}}},"schema":{"openAPIV3Schema":{}}}]}}`, []int{2}},
		{"white space", " {\n \"spec\" : { \"versions\" : [ { \"schema\" : { \"openAPIV3Schema\" : { \"items\" : [ { } , { \"not\" : { } } ] } } } ] } } ", []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, ok := VersionSchemaDepths([]byte(tc.doc))
			if !ok {
				t.Fatalf("not ok")
			}
			got := []int{}
			for _, v := range found {
				got = append(got, v.Depth)
				if (v.Depth < 0) != (v.Raw == nil) || v.Raw != nil && !json.Valid(v.Raw) {
					t.Errorf("depth %d, raw %q", v.Depth, v.Raw)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{`, `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"properties":{"a":}}}}]}}`,
		`{"spec" {}}`, `{"spec":{"versions":[1 2]}}`, string(crdJSON(strings.Repeat(`{"not":`, 10000) + `{}` + strings.Repeat(`}`, 10000)))} {
		if got, ok := VersionSchemaDepths([]byte(bad)); ok {
			t.Errorf("%.80s: ok, %v", bad, got)
		}
	}
}

// The scan agrees with SchemaDepth on the decoded schema.
func TestVersionSchemaDepthsAgrees(t *testing.T) {
	for _, s := range []string{deepJSON(0), deepJSON(64), deepJSON(65), `{"properties":{"a":{"items":{"properties":{"b":{}}}},"c":{"allOf":[{"not":{"not":{"not":{}}}}]}}}`} {
		var v1 apiextensionsv1.JSONSchemaProps
		if err := json.Unmarshal([]byte(s), &v1); err != nil {
			t.Fatal(err)
		}
		var in apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&v1, &in, nil); err != nil {
			t.Fatal(err)
		}
		got, ok := VersionSchemaDepths(crdJSON(s))
		if !ok || len(got) != 1 || got[0].Depth != SchemaDepth(&in) || string(got[0].Raw) != s {
			t.Errorf("%.60s: scan %v %v, SchemaDepth %d", s, got, ok, SchemaDepth(&in))
		}
	}
}

// A CRD as deep as the JSON decoder allows is read in one pass, with little
// memory.
func TestVersionSchemaDepthsCost(t *testing.T) {
	doc := crdJSON(deepJSON(4900))
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	got, ok := VersionSchemaDepths(doc)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	if !ok || len(got) != 1 || got[0].Depth != 4900 {
		t.Fatalf("got %v %v", got, ok)
	}
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("%d bytes: %v, %d bytes allocated, stack %d KiB", len(doc), elapsed, alloc, m1.StackInuse>>10)
	if alloc > 1<<20 {
		t.Errorf("allocated %d bytes", alloc)
	}
}
