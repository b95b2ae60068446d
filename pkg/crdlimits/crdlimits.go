// Package crdlimits holds the bounds crdplane puts on CustomResourceDefinitions
// on top of upstream's. Upstream (Kubernetes v1.33) bounds a CRD only
// indirectly: the request body (3 MiB), the JSON nesting depth of the
// decoder (10000), etcd's value size and the CEL cost estimates. A schema
// that nests thousands of levels passes all of those and then costs
// hundreds of MiB in every component that compiles it; MaxSchemaDepth
// rejects it at CRD write time (services/registry/README.md). A wide
// schema is the same problem in another shape: 3 MiB of small properties
// or CEL rules hold 50–60 times their size once compiled;
// EstimateCompiledSize estimates that memory from the schema, and
// MaxCompiledBytes bounds it per CRD (compiledsize.go).
package crdlimits

import "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"

// MaxSchemaDepth is how many levels of sub-schemas (properties, items,
// additionalProperties, allOf, anyOf, oneOf, not, and the keywords CRDs
// forbid: patternProperties, definitions, dependencies, additionalItems) an
// openAPIV3Schema may nest below its root. The deepest CRDs in common use
// nest 18 levels (cert-manager's ClusterIssuer), Prometheus 14 or so.
const MaxSchemaDepth = 64

// SchemaDepth returns how many levels of sub-schemas nest below s: 0 for a
// schema without any, 1 for an object with scalar properties, and so on.
// It walks the whole schema once, iteratively (its cost is linear in the
// schema's size; its memory is one copy of a node per pending sibling).
func SchemaDepth(s *apiextensions.JSONSchemaProps) int {
	if s == nil {
		return 0
	}
	type frame struct {
		depth int
		s     apiextensions.JSONSchemaProps
	}
	stack := make([]frame, 1, 16)
	stack[0] = frame{0, *s}
	max := 0
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f.depth > max {
			max = f.depth
		}
		d := f.depth + 1
		push := func(c *apiextensions.JSONSchemaProps) {
			if c != nil {
				stack = append(stack, frame{d, *c})
			}
		}
		n := &f.s
		for _, p := range n.Properties {
			stack = append(stack, frame{d, p})
		}
		for _, p := range n.PatternProperties {
			stack = append(stack, frame{d, p})
		}
		for _, p := range n.Definitions {
			stack = append(stack, frame{d, p})
		}
		for _, p := range n.Dependencies {
			push(p.Schema)
		}
		if n.Items != nil {
			push(n.Items.Schema)
			for i := range n.Items.JSONSchemas {
				push(&n.Items.JSONSchemas[i])
			}
		}
		if n.AdditionalProperties != nil {
			push(n.AdditionalProperties.Schema)
		}
		if n.AdditionalItems != nil {
			push(n.AdditionalItems.Schema)
		}
		for i := range n.AllOf {
			push(&n.AllOf[i])
		}
		for i := range n.AnyOf {
			push(&n.AnyOf[i])
		}
		for i := range n.OneOf {
			push(&n.OneOf[i])
		}
		push(n.Not)
	}
	return max
}
