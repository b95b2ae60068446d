package celrules

import (
	"bytes"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	apimachineryvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/cel/common"
)

// node is one node of a CRD version's structural schema as the CEL
// libraries see it (k8s.io/apiserver/pkg/cel/common.Schema): the type
// mapping (common.SchemaDeclType), the conversion of values
// (common.UnstructuredToVal, with list-type set/map equality and
// concatenation) and map-list correlation (common.MakeMapList) read it. It
// is built once per compile with its property map and its
// type-and-object-meta variant precomputed, so reading it allocates nothing
// (upstream's adapter builds a new property map on every field access). It
// keeps only what those read: value validations other than maxLength,
// maxItems, maxProperties, required and enum read as unset.
type node struct {
	typ        string
	format     string
	items      *node
	properties map[string]common.Schema // of *node
	additional *schemaOrBool
	def        any
	enum       []any
	required   []string

	maxItems, maxLength, maxProps *int64

	nullable        bool
	intOrString     bool
	embedded        bool
	preserveUnknown bool
	listType        string
	mapType         string
	listMapKeys     []string
	xValidations    apiextensionsv1.ValidationRules

	// withMeta is the node with apiVersion, kind, metadata.name and
	// metadata.generateName declared (root and embedded resources).
	withMeta *node
}

var _ common.Schema = (*node)(nil)

// newNode builds the schema tree of props (nil for nil props).
func newNode(p *apiextensionsv1.JSONSchemaProps) *node {
	if p == nil {
		return nil
	}
	n := &node{
		typ:             p.Type,
		format:          p.Format,
		maxItems:        p.MaxItems,
		maxLength:       p.MaxLength,
		maxProps:        p.MaxProperties,
		required:        p.Required,
		nullable:        p.Nullable,
		intOrString:     p.XIntOrString,
		embedded:        p.XEmbeddedResource,
		preserveUnknown: p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields,
		listMapKeys:     p.XListMapKeys,
		xValidations:    p.XValidations,
	}
	if p.XListType != nil {
		n.listType = *p.XListType
	}
	if p.XMapType != nil {
		n.mapType = *p.XMapType
	}
	if p.Default != nil {
		n.def = decode(p.Default.Raw)
	}
	if len(p.Enum) > 0 {
		n.enum = make([]any, len(p.Enum))
		for i := range p.Enum {
			n.enum[i] = decode(p.Enum[i].Raw)
		}
	}
	if p.Items != nil && p.Items.Schema != nil {
		n.items = newNode(p.Items.Schema)
	}
	if len(p.Properties) > 0 {
		n.properties = make(map[string]common.Schema, len(p.Properties))
		for name := range p.Properties {
			prop := p.Properties[name]
			n.properties[name] = newNode(&prop)
		}
	}
	if ap := p.AdditionalProperties; ap != nil {
		// As upstream's structural schema: a schema means allowed.
		n.additional = &schemaOrBool{allows: ap.Allows || ap.Schema != nil, schema: newNode(ap.Schema)}
	}
	if n.embedded {
		n.withMeta = n.typeAndObjectMeta()
	}
	return n
}

// prop is the node of property name, or nil.
func (n *node) prop(name string) *node {
	if n == nil {
		return nil
	}
	p, _ := n.properties[name].(*node)
	return p
}

func decode(raw []byte) any {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}

const nameMaxLength = int64(apimachineryvalidation.DNS1123SubdomainMaxLength)

// typeAndObjectMeta returns n with apiVersion and kind (strings) and
// metadata with name and generateName (strings of at most 253 and 252
// characters, or the schema's smaller maxLength) declared, the only
// metadata a rule may access (as upstream's WithTypeAndObjectMeta). A node
// that declares all of them as strings is returned as is.
func (n *node) typeAndObjectMeta() *node {
	md := n.prop("metadata")
	if n.prop("kind").Type() == "string" && n.prop("apiVersion").Type() == "string" &&
		md.Type() == "object" && md.properties != nil &&
		md.prop("name").Type() == "string" && md.prop("generateName").Type() == "string" {
		return n
	}
	out := *n
	out.items = nil
	out.withMeta = nil
	out.properties = make(map[string]common.Schema, len(n.properties)+3)
	for k, v := range n.properties {
		out.properties[k] = v
	}
	meta := &node{typ: "object", properties: map[string]common.Schema{
		"name":         cappedString(md.prop("name"), nameMaxLength),
		"generateName": cappedString(md.prop("generateName"), nameMaxLength-1), // the generated suffix is at least 1 byte
	}}
	out.properties["kind"] = &node{typ: "string"}
	out.properties["apiVersion"] = &node{typ: "string"}
	out.properties["metadata"] = meta
	return &out
}

func cappedString(existing *node, maxLength int64) *node {
	if existing != nil && existing.maxLength != nil && *existing.maxLength < maxLength {
		maxLength = *existing.maxLength
	}
	return &node{typ: "string", maxLength: &maxLength}
}

// Type implements common.Schema (nil-safe: "").
func (n *node) Type() string {
	if n == nil {
		return ""
	}
	return n.typ
}

func (n *node) Format() string { return n.format }

func (n *node) Items() common.Schema {
	if n.items == nil {
		return nil
	}
	return n.items
}

func (n *node) Properties() map[string]common.Schema { return n.properties }

func (n *node) AdditionalProperties() common.SchemaOrBool {
	if n.additional == nil {
		return nil
	}
	return n.additional
}

func (n *node) Default() any                   { return n.def }
func (n *node) Pattern() string                { return "" }
func (n *node) Minimum() *float64              { return nil }
func (n *node) IsExclusiveMinimum() bool       { return false }
func (n *node) Maximum() *float64              { return nil }
func (n *node) IsExclusiveMaximum() bool       { return false }
func (n *node) MultipleOf() *float64           { return nil }
func (n *node) MinItems() *int64               { return nil }
func (n *node) MaxItems() *int64               { return n.maxItems }
func (n *node) MinLength() *int64              { return nil }
func (n *node) MaxLength() *int64              { return n.maxLength }
func (n *node) MinProperties() *int64          { return nil }
func (n *node) MaxProperties() *int64          { return n.maxProps }
func (n *node) Required() []string             { return n.required }
func (n *node) Enum() []any                    { return n.enum }
func (n *node) Nullable() bool                 { return n.nullable }
func (n *node) UniqueItems() bool              { return false } // forbidden in structural schemas
func (n *node) AllOf() []common.Schema         { return nil }   // junctors carry no structure
func (n *node) OneOf() []common.Schema         { return nil }
func (n *node) AnyOf() []common.Schema         { return nil }
func (n *node) Not() common.Schema             { return nil }
func (n *node) IsXIntOrString() bool           { return n.intOrString }
func (n *node) IsXEmbeddedResource() bool      { return n.embedded }
func (n *node) IsXPreserveUnknownFields() bool { return n.preserveUnknown }
func (n *node) XListType() string              { return n.listType }
func (n *node) XListMapKeys() []string         { return n.listMapKeys }
func (n *node) XMapType() string               { return n.mapType }

// XValidations implements common.Schema.
func (n *node) XValidations() []common.ValidationRule {
	out := make([]common.ValidationRule, len(n.xValidations))
	for i := range n.xValidations {
		out[i] = validationRule{&n.xValidations[i]}
	}
	return out
}

// WithTypeAndObjectMeta implements common.Schema.
func (n *node) WithTypeAndObjectMeta() common.Schema {
	if n.withMeta == nil {
		// Only asked of resource roots, for which Compile precomputes it.
		return n.typeAndObjectMeta()
	}
	return n.withMeta
}

type schemaOrBool struct {
	allows bool
	schema *node
}

func (s *schemaOrBool) Schema() common.Schema {
	if s.schema == nil {
		return nil
	}
	return s.schema
}

func (s *schemaOrBool) Allows() bool { return s.allows }

type validationRule struct {
	r *apiextensionsv1.ValidationRule
}

func (v validationRule) Rule() string              { return v.r.Rule }
func (v validationRule) Message() string           { return v.r.Message }
func (v validationRule) MessageExpression() string { return v.r.MessageExpression }
func (v validationRule) FieldPath() string         { return v.r.FieldPath }
