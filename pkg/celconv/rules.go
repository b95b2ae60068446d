// Package celconv is declarative conversion: per-version-pair field
// mappings written as CEL expressions, declared on a CustomResourceDefinition
// in the annotation conversion.crdplane.dev/rules, compiled once per CRD
// version pair with the validator tier's CEL environment and cost limits,
// checked for round-trip safety against the schemas of both versions, and
// run in-process (no webhook).
//
// The annotation holds a YAML (or JSON) list of rules:
//
//   - from: v1beta1
//     to: v1
//     fields:
//   - path: host
//     expression: self.hostPort.substring(0, self.hostPort.lastIndexOf(':'))
//   - path: port
//     expression: self.hostPort.substring(self.hostPort.lastIndexOf(':') + 1)
//
// Converting an object from one version to another starts from the object
// itself (apiVersion rewritten, as None conversion does); then every field
// of the pair's rule is set to its expression's value, evaluated with self
// bound to the source object (typed by the source version's schema). An
// expression that reads a field the object does not have (CEL's "no such
// key"), or that evaluates to null, leaves the target field unset. The
// API server then prunes what the target version's schema does not
// specify, as after any conversion. A version pair without a rule converts
// as None does.
package celconv

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Annotation is the CRD annotation holding the conversion rules.
const Annotation = "conversion.crdplane.dev/rules"

// Rule maps the fields of one version to another.
type Rule struct {
	// From is the version converted from.
	From string `json:"from"`
	// To is the version converted to.
	To string `json:"to"`
	// Fields are the target fields the rule computes.
	Fields []Field `json:"fields"`
}

// Field is one target field and the CEL expression computing it.
type Field struct {
	// Path is the field in the target version, dot-separated
	// ("spec.host"); every segment a property of the target schema.
	Path string `json:"path"`
	// Expression computes the value from self, the source object.
	Expression string `json:"expression"`
}

// HasRules reports whether crd declares conversion rules.
func HasRules(crd *apiextensionsv1.CustomResourceDefinition) bool {
	_, ok := crd.Annotations[Annotation]
	return ok
}

// annotationPath is the field path errors about the annotation name.
var annotationPath = field.NewPath("metadata", "annotations").Key(Annotation)

// Parse reads the rules of crd's annotation (nil when it has none).
func Parse(crd *apiextensionsv1.CustomResourceDefinition) ([]Rule, *field.Error) {
	raw, ok := crd.Annotations[Annotation]
	if !ok {
		return nil, nil
	}
	var rules []Rule
	if err := yaml.UnmarshalStrict([]byte(raw), &rules); err != nil {
		return nil, field.Invalid(annotationPath, raw, fmt.Sprintf("must be a YAML or JSON list of conversion rules (from, to, fields: path, expression): %v", err))
	}
	return rules, nil
}

// splitPath splits a dot-separated path ("" and empty segments are nil).
func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(p, ".")
	for _, s := range parts {
		if s == "" {
			return nil
		}
	}
	return parts
}
