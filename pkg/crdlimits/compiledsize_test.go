package crdlimits

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
)

func schemaOf(t testing.TB, s string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	p := &apiextensionsv1.JSONSchemaProps{}
	if err := json.Unmarshal([]byte(s), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEstimateSchema(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   SchemaCost
	}{
		{"nil", ``, SchemaCost{}},
		{"scalar", `{"type":"string"}`, SchemaCost{Nodes: 1, TextBytes: 6}},
		{"properties", `{"type":"object","properties":{"ab":{"type":"string"},"c":{"type":"integer","description":"xyz"}}}`,
			SchemaCost{Nodes: 3, TextBytes: 6 + 2 + 6 + 1 + 7 + 3}},
		{"rule and messageExpression", `{"x-kubernetes-validations":[{"rule":"self > 1","message":"m","messageExpression":"'x'","fieldPath":".a"}]}`,
			SchemaCost{Nodes: 1, Expressions: 2, ExprBytes: 8 + 3, TextBytes: 1 + 2}},
		{"pattern", `{"pattern":"^a+$"}`, SchemaCost{Nodes: 1, Patterns: 1, PatternBytes: 4}},
		{"values", `{"default":"ab","example":1,"enum":["a","b"]}`, SchemaCost{Nodes: 1, ValueBytes: 4 + 1 + 3 + 24 + 3 + 24}},
		{"items, additionalProperties, junctors, not", `{"items":{"additionalProperties":{}},"allOf":[{},{}],"anyOf":[{}],"oneOf":[{"not":{}}]}`,
			SchemaCost{Nodes: 8}},
		{"list map", `{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["k"],"required":["r"],"items":{}}`,
			SchemaCost{Nodes: 2, TextBytes: 5 + 1 + 16 + 1 + 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *apiextensionsv1.JSONSchemaProps
			if tc.schema != "" {
				s = schemaOf(t, tc.schema)
			}
			if got := EstimateSchema(s); got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func crdOf(t testing.TB, s crdgen.Shape) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(s.JSON(), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func TestEstimateCompiledSize(t *testing.T) {
	one := crdOf(t, crdgen.Shape{Strings: 100})
	size := EstimateCompiledSize(one)
	c := EstimateSchema(one.Spec.Versions[0].Schema.OpenAPIV3Schema)
	if c.Nodes != 3+100 { // root, status, spec and the strings
		t.Fatalf("nodes %d", c.Nodes)
	}
	if len(size.Versions) != 1 || size.Versions[0] != version+c.Compiled() || size.TypeConverter != c.Nodes*nodeTypeConverter ||
		size.Decoded != 1<<10+c.Decoded() || size.Total() != size.Decoded+size.Versions[0]+size.TypeConverter {
		t.Errorf("%+v", size)
	}
	// each version costs its own compiled schema and decoded copy; the
	// type converter holds them all
	three := EstimateCompiledSize(crdOf(t, crdgen.Shape{Strings: 100, Versions: 3}))
	if len(three.Versions) != 3 || three.Versions[2] != size.Versions[0] || three.TypeConverter != 3*size.TypeConverter || three.Decoded != 3*size.Decoded {
		t.Errorf("three versions: %+v", three)
	}
	// rules weigh more than plain properties
	rules := EstimateCompiledSize(crdOf(t, crdgen.Shape{Rules: 100})).Total()
	if plain := size.Total(); rules < 5*plain {
		t.Errorf("100 rules %d, 100 strings %d", rules, plain)
	}
	if got := EstimateCompiledSize(&apiextensionsv1.CustomResourceDefinition{}); got.Total() != 0 {
		t.Errorf("empty: %+v", got)
	}
}

func TestCompiledSizeAllowed(t *testing.T) {
	small := crdOf(t, crdgen.Shape{Strings: 10})
	big := crdOf(t, crdgen.Shape{Strings: 40000})
	bigger := crdOf(t, crdgen.Shape{Strings: 41000})
	for _, tc := range []struct {
		name     string
		crd, old *apiextensionsv1.CustomResourceDefinition
		ok       bool
	}{
		{"small", small, nil, true},
		{"big", big, nil, false},
		{"big, was small", big, small, false},
		{"big, unchanged", big, big, true},
		{"big, was bigger", big, bigger, true},
		{"bigger, was big", bigger, big, false},
	} {
		total, ok := CompiledSizeAllowed(tc.crd, tc.old)
		if ok != tc.ok || total != EstimateCompiledSize(tc.crd).Total() {
			t.Errorf("%s: %d %v", tc.name, total, ok)
		}
	}
}

func TestCompiledSizeMessage(t *testing.T) {
	if got, want := CompiledSizeMessage(70000000, 1), "must have at most 67108864 bytes of estimated compiled size (found 70000000 bytes in 1 version; try fewer properties, x-kubernetes-validations rules, patterns or versions)"; got != want {
		t.Errorf("got %s", got)
	}
	if got := CompiledSizeMessage(70000000, 2); got != "must have at most 67108864 bytes of estimated compiled size (found 70000000 bytes in 2 versions; try fewer properties, x-kubernetes-validations rules, patterns or versions)" {
		t.Errorf("got %s", got)
	}
}

// BenchmarkEstimateCompiledSize: the registry estimates every CRD it
// writes (a 860 KB CRD of 32,000 properties, at the bound).
func BenchmarkEstimateCompiledSize(b *testing.B) {
	crd := crdOf(b, crdgen.Shape{Strings: 32000})
	b.ReportAllocs()
	for b.Loop() {
		EstimateCompiledSize(crd)
	}
}

func TestEstimateStructuralSize(t *testing.T) {
	plain := crdOf(t, crdgen.Shape{Strings: 100, Patterns: 10, Versions: 2})
	c := EstimateSchema(plain.Spec.Versions[0].Schema.OpenAPIV3Schema)
	size := EstimateStructuralSize(plain)
	want := structuralVersion + c.Nodes*nodeCompiled + c.Patterns*pattern + c.PatternBytes*patternByte
	if len(size.Versions) != 2 || size.Versions[0] != want || size.Versions[1] != want || size.Decoded != 0 || size.TypeConverter != 0 {
		t.Errorf("%+v, want versions of %d", size, want)
	}
	// CEL rules are not compiled to a structural schema: a rule costs what
	// a plain property does
	rules := EstimateStructuralSize(crdOf(t, crdgen.Shape{Rules: 1000})).Total()
	strs := EstimateStructuralSize(crdOf(t, crdgen.Shape{Strings: 1000})).Total()
	full := EstimateCompiledSize(crdOf(t, crdgen.Shape{Rules: 1000}))
	if rules != strs || rules*11 > full.Versions[0] {
		t.Errorf("1000 rules: %d structural, %d plain, %d compiled with CEL", rules, strs, full.Versions[0])
	}
	if got := EstimateStructuralSize(&apiextensionsv1.CustomResourceDefinition{}); got.Total() != 0 {
		t.Errorf("empty: %+v", got)
	}
}
