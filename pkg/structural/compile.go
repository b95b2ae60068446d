package structural

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// Schema is one compiled node of a structural schema. The root node stands
// for the whole custom resource. A Schema is immutable once compiled and
// safe for concurrent use.
type Schema struct {
	// Structure (used by pruning, defaulting, metadata coercion, list types
	// and ratcheting, as upstream's structural schema).
	typ                  string
	properties           map[string]*Schema
	propertyNames        []string // sorted
	hasAdditional        bool     // additionalProperties is set (a schema, true or false)
	additionalAllows     bool     // additionalProperties is not false
	additionalProperties *Schema  // additionalProperties' schema, if any
	items                *Schema
	nullable             bool
	hasDefault           bool
	def                  any // pruned default value
	preserveUnknown      bool
	embeddedResource     bool
	intOrString          bool
	listType             string
	listMapKeys          []string
	xValidations         apiextensionsv1.ValidationRules

	// Derived: whether this node or one below it (properties,
	// additionalProperties, items) has a default, is an embedded resource,
	// or has a set/map list type; walks skip subtrees without.
	defaultsBelow  bool
	embeddedBelow  bool
	listTypesBelow bool

	// Value validation (OpenAPI keywords, as kube-openapi's validator sees
	// them after upstream's conversion and format post-processing).
	types         []string // OpenAPI type list: [type], or integer+string
	typesJoined   string
	format        string // after stripping unsupported formats
	formatKnown   bool   // format has a string validator in strfmt
	typeApplies   bool   // the type validator runs (a type or a format)
	maximum       *float64
	exclusiveMax  bool
	minimum       *float64
	exclusiveMin  bool
	multipleOf    *float64
	maxLength     *int64
	minLength     *int64
	pattern       string
	patternRE     *regexp.Regexp
	patternErr    error
	maxItems      *int64
	minItems      *int64
	uniqueItems   bool
	maxProperties *int64
	minProperties *int64
	required      []string
	enum          []any
	enumStrings   map[string]struct{} // string members of enum
	allOf         []*Schema
	anyOf         []*Schema
	oneOf         []*Schema
	not           *Schema
	hasJunctors   bool

	// Root only.
	preserveUnknownFields bool // the CRD's spec.preserveUnknownFields: no pruning
}

// CompileOption changes how a schema is compiled.
type CompileOption func(*compileOptions)

type compileOptions struct {
	preserveUnknownFields bool
}

// WithPreserveUnknownFields compiles the schema of a CRD with
// spec.preserveUnknownFields=true: nothing is pruned and defaults are not
// pruned either (as upstream).
func WithPreserveUnknownFields(preserve bool) CompileOption {
	return func(o *compileOptions) { o.preserveUnknownFields = preserve }
}

// Compile compiles a CRD version's openAPIV3Schema. A nil props compiles to
// an empty schema (everything but apiVersion, kind and metadata is pruned,
// nothing is validated).
func Compile(props *apiextensionsv1.JSONSchemaProps, opts ...CompileOption) (*Schema, error) {
	var o compileOptions
	for _, opt := range opts {
		opt(&o)
	}
	root := &Schema{}
	if props != nil {
		var err error
		if root, err = compileNode(props, ""); err != nil {
			return nil, err
		}
	}
	root.preserveUnknownFields = o.preserveUnknownFields
	root.derive()
	if !o.preserveUnknownFields {
		if err := pruneDefaults(root, root, nil); err != nil {
			return nil, err
		}
	}
	root.derive()
	return root, nil
}

// derive computes the *Below flags bottom up.
func (s *Schema) derive() {
	s.defaultsBelow = s.hasDefault
	s.embeddedBelow = s.embeddedResource
	s.listTypesBelow = s.listType == "set" || s.listType == "map"
	for _, c := range s.structuralChildren() {
		c.derive()
		s.defaultsBelow = s.defaultsBelow || c.defaultsBelow
		s.embeddedBelow = s.embeddedBelow || c.embeddedBelow
		s.listTypesBelow = s.listTypesBelow || c.listTypesBelow
	}
	for _, j := range s.junctors() {
		j.derive()
	}
}

func (s *Schema) structuralChildren() []*Schema {
	var out []*Schema
	for _, name := range s.propertyNames {
		out = append(out, s.properties[name])
	}
	if s.additionalProperties != nil {
		out = append(out, s.additionalProperties)
	}
	if s.items != nil {
		out = append(out, s.items)
	}
	return out
}

func (s *Schema) junctors() []*Schema {
	out := append(append(append([]*Schema(nil), s.allOf...), s.anyOf...), s.oneOf...)
	if s.not != nil {
		out = append(out, s.not)
	}
	return out
}

// Property returns the schema of the named property, or nil.
func (s *Schema) Property(name string) *Schema {
	if s == nil {
		return nil
	}
	return s.properties[name]
}

// Items returns the schema of an array's items, or nil.
func (s *Schema) Items() *Schema {
	if s == nil {
		return nil
	}
	return s.items
}

// AdditionalProperties returns the schema of additionalProperties, or nil.
func (s *Schema) AdditionalProperties() *Schema {
	if s == nil {
		return nil
	}
	return s.additionalProperties
}

// Type returns the node's declared type ("" when unset).
func (s *Schema) Type() string {
	if s == nil {
		return ""
	}
	return s.typ
}

// XValidations returns the node's x-kubernetes-validations rules.
func (s *Schema) XValidations() apiextensionsv1.ValidationRules {
	if s == nil {
		return nil
	}
	return s.xValidations
}

func compileNode(p *apiextensionsv1.JSONSchemaProps, at string) (*Schema, error) {
	if p.Ref != nil {
		return nil, fmt.Errorf("%s: $ref is not supported", where(at))
	}
	if p.Items != nil && len(p.Items.JSONSchemas) > 0 {
		return nil, fmt.Errorf("%s: items must be a schema, not an array", where(at))
	}
	s := &Schema{
		typ:              p.Type,
		nullable:         p.Nullable,
		preserveUnknown:  p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields,
		embeddedResource: p.XEmbeddedResource,
		intOrString:      p.XIntOrString,
		listMapKeys:      p.XListMapKeys,
		xValidations:     p.XValidations,
		maximum:          p.Maximum,
		exclusiveMax:     p.ExclusiveMaximum,
		minimum:          p.Minimum,
		exclusiveMin:     p.ExclusiveMinimum,
		multipleOf:       p.MultipleOf,
		maxLength:        p.MaxLength,
		minLength:        p.MinLength,
		pattern:          p.Pattern,
		maxItems:         p.MaxItems,
		minItems:         p.MinItems,
		uniqueItems:      p.UniqueItems,
		maxProperties:    p.MaxProperties,
		minProperties:    p.MinProperties,
		required:         p.Required,
	}
	if p.XListType != nil {
		s.listType = *p.XListType
	}

	// Types as kube-openapi sees them.
	if p.Type != "" {
		s.types = []string{p.Type}
	}
	if p.XIntOrString {
		s.types = []string{"integer", "string"}
	}
	s.typesJoined = strings.Join(s.types, ",")
	s.format = supportedFormat(p.Format)
	s.formatKnown = s.format != "" && strfmt.Default.ContainsName(s.format)
	s.typeApplies = len(s.types) > 0 || s.format != ""

	if p.Pattern != "" {
		s.patternRE, s.patternErr = compilePattern(p.Pattern)
	}

	if p.Default != nil {
		v, err := decodeJSON(p.Default.Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: default: %w", where(at), err)
		}
		if v != nil {
			s.hasDefault, s.def = true, v
		}
	}
	for i := range p.Enum {
		v, err := decodeJSON(p.Enum[i].Raw)
		if err != nil {
			return nil, fmt.Errorf("%s: enum[%d]: %w", where(at), i, err)
		}
		s.enum = append(s.enum, v)
		if str, ok := v.(string); ok {
			if s.enumStrings == nil {
				s.enumStrings = map[string]struct{}{}
			}
			s.enumStrings[str] = struct{}{}
		}
	}

	if len(p.Properties) > 0 {
		s.properties = make(map[string]*Schema, len(p.Properties))
		for name := range p.Properties {
			prop := p.Properties[name]
			c, err := compileNode(&prop, at+"."+name)
			if err != nil {
				return nil, err
			}
			s.properties[name] = c
			s.propertyNames = append(s.propertyNames, name)
		}
		slices.Sort(s.propertyNames)
	}
	if ap := p.AdditionalProperties; ap != nil {
		s.hasAdditional = true
		s.additionalAllows = ap.Allows || ap.Schema != nil
		if ap.Schema != nil {
			c, err := compileNode(ap.Schema, at+".additionalProperties")
			if err != nil {
				return nil, err
			}
			s.additionalProperties = c
		}
	}
	if p.Items != nil && p.Items.Schema != nil {
		c, err := compileNode(p.Items.Schema, at+".items")
		if err != nil {
			return nil, err
		}
		s.items = c
	}
	for _, j := range []struct {
		in   []apiextensionsv1.JSONSchemaProps
		out  *[]*Schema
		name string
	}{{p.AllOf, &s.allOf, "allOf"}, {p.AnyOf, &s.anyOf, "anyOf"}, {p.OneOf, &s.oneOf, "oneOf"}} {
		for i := range j.in {
			c, err := compileNode(&j.in[i], fmt.Sprintf("%s.%s[%d]", at, j.name, i))
			if err != nil {
				return nil, err
			}
			*j.out = append(*j.out, c)
		}
	}
	if p.Not != nil {
		c, err := compileNode(p.Not, at+".not")
		if err != nil {
			return nil, err
		}
		s.not = c
	}
	s.hasJunctors = len(s.allOf) > 0 || len(s.anyOf) > 0 || len(s.oneOf) > 0 || s.not != nil
	return s, nil
}

func where(at string) string {
	if at == "" {
		return "openAPIV3Schema"
	}
	return "openAPIV3Schema" + at
}

var nullLiteral = []byte("null")

// decodeJSON decodes a schema's JSON value (default, enum member) as
// upstream does: numbers as int64 when integral, else float64; null as nil.
func decodeJSON(raw []byte) (any, error) {
	if len(raw) == 0 || bytes.Equal(raw, nullLiteral) {
		return nil, nil
	}
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// supportedFormats are the formats CRD schemas validate in Kubernetes
// v1.33 (apiextensions-apiserver v0.33's supportedVersionedFormats: those
// of 1.0; k8s-short-name and k8s-long-name came in 1.34), normalised as
// go-openapi does (dashes removed).
var supportedFormats = map[string]bool{
	"bsonobjectid": true, "uri": true, "email": true, "hostname": true, "ipv4": true, "ipv6": true,
	"cidr": true, "mac": true, "uuid": true, "uuid3": true, "uuid4": true, "uuid5": true,
	"isbn": true, "isbn10": true, "isbn13": true, "creditcard": true, "ssn": true, "hexcolor": true,
	"rgbcolor": true, "byte": true, "password": true, "date": true, "duration": true, "datetime": true,
}

// supportedFormat is the format kube-openapi's validator sees after
// v1.33's StripUnsupportedFormatsPostProcessorForVersion: the format when
// it is one of supportedFormats, whatever the node's type, else none (so
// int32, int64, float and double are dropped too: v1.33 validates no
// numeric formats).
func supportedFormat(format string) string {
	if supportedFormats[strings.ReplaceAll(format, "-", "")] {
		return format
	}
	return ""
}

// patterns caches compiled patterns, shared by every schema (and every
// generation of a CRD) that uses them, as kube-openapi's validator does;
// it stops growing at maxCachedPatterns or maxCachedPatternBytes of
// pattern text (a compiled pattern takes tens of bytes per byte of text:
// the cache stays within a few MiB, which no CRD can grow). A pattern not
// cached belongs to its schema, whose memory the compiled-CRD budgets
// account (pkg/crdlimits).
var patterns struct {
	sync.Mutex
	m     map[string]*regexp.Regexp
	bytes int
}

const (
	maxCachedPatterns     = 4096
	maxCachedPatternBytes = 256 << 10
)

func compilePattern(pattern string) (*regexp.Regexp, error) {
	patterns.Lock()
	re, ok := patterns.m[pattern]
	patterns.Unlock()
	if ok {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	patterns.Lock()
	defer patterns.Unlock()
	if patterns.m == nil {
		patterns.m = map[string]*regexp.Regexp{}
	}
	if len(patterns.m) < maxCachedPatterns && patterns.bytes+len(pattern) <= maxCachedPatternBytes {
		patterns.m[pattern] = re
		patterns.bytes += len(pattern)
	}
	return re, nil
}
