package structural

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/fielderr"
)

const referenceDir = "testdata/reference"

// parseYAML decodes YAML (or JSON) into a JSON value with int64/float64
// numbers, as upstream decodes request bodies.
func parseYAML(t testing.TB, src string) any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(src))
	if err != nil {
		t.Fatalf("yaml: %v", err)
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		t.Fatalf("json: %v", err)
	}
	return v
}

func parseObject(t testing.TB, src string) map[string]any {
	t.Helper()
	m, ok := parseYAML(t, src).(map[string]any)
	if !ok {
		t.Fatalf("not an object: %s", src)
	}
	return m
}

func readFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(referenceDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseProps(t testing.TB, src string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	props := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.UnmarshalStrict([]byte(src), props); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return props
}

func parseCRDSchema(t testing.TB, src string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(src), crd); err != nil {
		t.Fatalf("crd: %v", err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

func mustCompile(t testing.TB, props *apiextensionsv1.JSONSchemaProps) *Schema {
	t.Helper()
	s, err := Compile(props)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func errorStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fielderr.Error(e))
	}
	return out
}

func sortedStrings(l []string) []string {
	l = slices.Clone(l)
	slices.Sort(l)
	return l
}

func deepCopy(v map[string]any) map[string]any {
	return deepCopyJSON(v).(map[string]any)
}
