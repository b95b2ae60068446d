package crdlimits

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// MaxCompiledBytes bounds the estimated memory one CRD takes in a service
// that serves it (EstimateCompiledSize's Total): its decoded form, every
// version's compiled schema and CEL programs, and its server-side apply
// type converter. Upstream has no such bound (a CRD is bounded only by the
// 3 MiB request body); without one, a 3 MiB CRD of many small properties
// or CEL rules costs 150–200 MiB in every validator and gateway.
//
// The largest CRDs in common use estimate at 9 MB or less (of 48 measured:
// kyverno's ClusterPolicy 9.3 MB, prometheus-operator's Prometheus 5.9 MB,
// Gateway API's HTTPRoute with its 218 rules 5.2 MB; BENCHMARKS.md), so
// 64 MiB leaves them a margin of seven or more; the bound refuses what
// only an attack or a generator gone wrong produces. The heap really held
// is 0.6–0.7 of the estimate (a CRD at the bound holds 41–46 MiB).
const MaxCompiledBytes = 64 << 20

// The weights of the estimate, in bytes, from measurements of the heap a
// compiled CRD keeps (services/validator, TestMeasureCompiledSize: the
// structural schema and CEL programs of compileVersion, the field managers'
// type converter, the decoded CRD), each rounded up to stay above what was
// measured for every real and synthetic CRD tried:
const (
	// nodeDecoded: one sub-schema decoded (apiextensionsv1.JSONSchemaProps,
	// its maps and slices); measured 560–660.
	nodeDecoded = 768
	// nodeCompiled: one sub-schema in the compiled schema and the CEL type
	// declarations; measured 660–770.
	nodeCompiled = 1024
	// nodeTypeConverter: one sub-schema in the server-side apply type
	// converter (built from every version's model); measured 100–170.
	nodeTypeConverter = 256
	// expression: one CEL program (rule or messageExpression) with its
	// AST, checked types and cost estimate; measured 6,700 for a short
	// rule. exprByte is added per byte of its text.
	expression = 10 << 10
	exprByte   = 32
	// pattern: one compiled regular expression (measured 1,150 for a
	// short one); patternByte per byte of its text (a regexp's program
	// grows with it).
	pattern     = 2 << 10
	patternByte = 64
	// valueByte: per byte of a default, enum value or example (kept as
	// decoded JSON, and parsed again in the compiled schema).
	valueByte = 16
	// textByte: per byte of names, descriptions and other strings the
	// decoded CRD keeps.
	textByte = 2
	// version: the fixed cost of a version: its compiled root and its
	// field managers (main, status, scale); measured 28,000.
	version = 48 << 10
	// structuralVersion: the fixed cost of a version compiled to its
	// structural schema alone (the gateway's cache entry); measured 700
	// for the root and its two properties, nodes included.
	structuralVersion = 4 << 10
)

// CompiledSize is the estimated memory of one CRD in a service that
// compiles it.
type CompiledSize struct {
	// Decoded is the CRD decoded (every service's CRD cache holds it).
	Decoded int64
	// Versions is, per version (in spec.versions order), its compiled
	// schema, CEL programs and field managers.
	Versions []int64
	// TypeConverter is the server-side apply type converter of the CRD
	// (one for all its versions).
	TypeConverter int64
}

// Total is everything a service that serves every version holds.
func (s CompiledSize) Total() int64 {
	t := s.Decoded + s.TypeConverter
	for _, v := range s.Versions {
		t += v
	}
	return t
}

// SchemaCost is what EstimateSchema counts in one schema.
type SchemaCost struct {
	Nodes, Expressions, Patterns int64
	ExprBytes, PatternBytes      int64
	ValueBytes, TextBytes        int64
}

// Compiled is the schema's share of a compiled version (without the
// version's fixed cost).
func (c SchemaCost) Compiled() int64 {
	return c.Nodes*nodeCompiled + c.Expressions*expression + c.ExprBytes*exprByte +
		c.Patterns*pattern + c.PatternBytes*patternByte + c.ValueBytes*valueByte
}

// Structural is the schema's share of a version compiled to its
// structural schema alone (pkg/structural: what the gateway compiles to
// prune and default; no CEL programs, no type converter). The weights are
// those of Compiled: a node of the structural schema alone measured
// 650–690 bytes (under nodeCompiled), a distinct pattern 1,150–2,000 with
// its 20 bytes of text; what the gateway holds is 0.61–0.69 of this
// estimate (services/gateway/cr, BenchmarkCompiledSchemaSize).
func (c SchemaCost) Structural() int64 {
	return c.Nodes*nodeCompiled + c.Patterns*pattern + c.PatternBytes*patternByte + c.ValueBytes*valueByte
}

// Decoded is the schema's share of the decoded CRD.
func (c SchemaCost) Decoded() int64 {
	return c.Nodes*nodeDecoded + c.ValueBytes + c.ExprBytes + c.PatternBytes + c.TextBytes*textByte
}

// EstimateCompiledSize estimates what crd takes once decoded and
// compiled, in one walk of its schemas.
func EstimateCompiledSize(crd *apiextensionsv1.CustomResourceDefinition) CompiledSize {
	out := CompiledSize{Versions: make([]int64, len(crd.Spec.Versions))}
	var nodes int64
	eachVersion(crd, func(i int, c SchemaCost) {
		out.Versions[i] = version + c.Compiled()
		out.Decoded += 1<<10 + c.Decoded()
		nodes += c.Nodes
	})
	out.TypeConverter = nodes * nodeTypeConverter
	return out
}

// eachVersion calls fn with the cost of each version's schema, in
// spec.versions order.
func eachVersion(crd *apiextensionsv1.CustomResourceDefinition, fn func(i int, c SchemaCost)) {
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		var c SchemaCost
		if v.Schema != nil {
			c = EstimateSchema(v.Schema.OpenAPIV3Schema)
		}
		fn(i, c)
	}
}

// EstimateStructuralSize estimates what crd's versions take compiled to
// their structural schemas alone (Versions, in spec.versions order; the
// other fields zero), as a service that only prunes and defaults (the
// gateway) holds them. CEL rules cost nothing there: a CRD of 1,000 rules
// estimates at 1/12 of EstimateCompiledSize's versions.
func EstimateStructuralSize(crd *apiextensionsv1.CustomResourceDefinition) CompiledSize {
	out := CompiledSize{Versions: make([]int64, len(crd.Spec.Versions))}
	eachVersion(crd, func(i int, c SchemaCost) { out.Versions[i] = structuralVersion + c.Structural() })
	return out
}

// EstimateSchema counts what a schema holds that costs memory once
// compiled. It walks the schema once, recursively (the registry bounds the
// depth; a stored deeper schema costs stack, not heap), allocating nothing
// (16 ms for 32,000 properties, BenchmarkEstimateCompiledSize).
func EstimateSchema(s *apiextensionsv1.JSONSchemaProps) SchemaCost {
	var c SchemaCost
	if s != nil {
		c.add(s)
	}
	return c
}

func (c *SchemaCost) add(n *apiextensionsv1.JSONSchemaProps) {
	c.node(n)
	c.children(n)
}

// node counts n itself.
func (c *SchemaCost) node(n *apiextensionsv1.JSONSchemaProps) {
	c.Nodes++
	for i := range n.XValidations {
		r := &n.XValidations[i]
		c.Expressions++
		c.ExprBytes += int64(len(r.Rule))
		if r.MessageExpression != "" {
			c.Expressions++
			c.ExprBytes += int64(len(r.MessageExpression))
		}
		c.TextBytes += int64(len(r.Message) + len(r.FieldPath))
	}
	if n.Pattern != "" {
		c.Patterns++
		c.PatternBytes += int64(len(n.Pattern))
	}
	if n.Default != nil {
		c.ValueBytes += int64(len(n.Default.Raw))
	}
	if n.Example != nil {
		c.ValueBytes += int64(len(n.Example.Raw))
	}
	for i := range n.Enum {
		c.ValueBytes += int64(len(n.Enum[i].Raw)) + 24
	}
	c.TextBytes += int64(len(n.Description) + len(n.Title) + len(n.Format) + len(n.Type))
	for _, r := range n.Required {
		c.TextBytes += int64(len(r)) + 16
	}
	for _, k := range n.XListMapKeys {
		c.TextBytes += int64(len(k)) + 16
	}
}

// children counts the schemas below n. Map values are walked by value
// (addValue), so that no copy of a schema escapes to the heap.
func (c *SchemaCost) children(n *apiextensionsv1.JSONSchemaProps) {
	for _, m := range [...]map[string]apiextensionsv1.JSONSchemaProps{n.Properties, n.PatternProperties, n.Definitions} {
		for k, p := range m {
			c.TextBytes += int64(len(k))
			c.addValue(p)
		}
	}
	for k, d := range n.Dependencies {
		c.TextBytes += int64(len(k))
		if d.Schema != nil {
			c.add(d.Schema)
		}
	}
	if n.Items != nil {
		if n.Items.Schema != nil {
			c.add(n.Items.Schema)
		}
		for i := range n.Items.JSONSchemas {
			c.add(&n.Items.JSONSchemas[i])
		}
	}
	if n.AdditionalProperties != nil && n.AdditionalProperties.Schema != nil {
		c.add(n.AdditionalProperties.Schema)
	}
	if n.AdditionalItems != nil && n.AdditionalItems.Schema != nil {
		c.add(n.AdditionalItems.Schema)
	}
	for _, l := range [...][]apiextensionsv1.JSONSchemaProps{n.AllOf, n.AnyOf, n.OneOf} {
		for i := range l {
			c.add(&l[i])
		}
	}
	if n.Not != nil {
		c.add(n.Not)
	}
}

func (c *SchemaCost) addValue(n apiextensionsv1.JSONSchemaProps) {
	c.node(&n)
	c.children(&n)
}

// CompiledSizeMessage is the message of a CRD over MaxCompiledBytes
// (versions: how many it has), in the style of upstream's own limits
// ("must have at most N bytes").
func CompiledSizeMessage(total int64, versions int) string {
	unit := "versions"
	if versions == 1 {
		unit = "version"
	}
	return fmt.Sprintf("must have at most %d bytes of estimated compiled size (found %d bytes in %d %s; "+
		"try fewer properties, x-kubernetes-validations rules, patterns or versions)", int64(MaxCompiledBytes), total, versions, unit)
}

// CompiledSizeAllowed reports whether crd's estimate (total) is within
// MaxCompiledBytes, or, on update (old is the stored CRD, else nil), does
// not exceed old's: a CRD stored over the bound (by an earlier release
// with other weights, or by kube-apiserver) stays writable as long as it
// does not grow.
func CompiledSizeAllowed(crd, old *apiextensionsv1.CustomResourceDefinition) (total int64, ok bool) {
	total = EstimateCompiledSize(crd).Total()
	if total <= MaxCompiledBytes {
		return total, true
	}
	return total, old != nil && total <= EstimateCompiledSize(old).Total()
}
