package structural

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"

	"github.com/crdplane/crdplane/pkg/fielderr"
)

// Validate validates a new custom resource against s: the OpenAPI schema
// (ValidateSchema), the metadata of embedded resources
// (ValidateEmbeddedResources) and list-type uniqueness (ValidateListTypes),
// in that order, as upstream's create strategy.
func Validate(obj map[string]any, s *Schema) field.ErrorList {
	errs := ValidateSchema(nil, obj, s)
	errs = append(errs, ValidateEmbeddedResources(nil, obj, s)...)
	errs = append(errs, ValidateListTypes(nil, obj, s)...)
	return errs
}

// ValidateUpdate validates an update of a custom resource from old to obj
// as upstream's update strategy: schema errors in parts that did not change
// are ratcheted (dropped), list-type errors only count when old had none,
// embedded metadata is validated as on create.
func ValidateUpdate(obj, old map[string]any, s *Schema) field.ErrorList {
	errs := ValidateSchema(nil, obj, s, WithRatcheting(old))
	errs = append(errs, ValidateEmbeddedResources(nil, obj, s)...)
	if len(ValidateListTypes(nil, old, s)) == 0 {
		errs = append(errs, ValidateListTypes(nil, obj, s)...)
	}
	return errs
}

// ValidateOption changes how ValidateSchema validates.
type ValidateOption func(*validateOptions)

type validateOptions struct {
	ratchet bool
	old     any
	corr    *Correlation
}

// WithRatcheting validates an update from old: errors of a value that is
// unchanged from its correlated old value are dropped, as upstream's
// validation ratcheting (CRDValidationRatcheting, GA). Values correlate
// through object fields and, for x-kubernetes-list-type=map lists, through
// their keys; descendants of allOf, anyOf, oneOf and not are validated
// without ratcheting.
func WithRatcheting(old any) ValidateOption {
	return func(o *validateOptions) { o.ratchet, o.old = true, old }
}

// WithCorrelation is WithRatcheting with a correlation of the validated
// value and its old value built by the caller (NewCorrelation), so that
// other validations of the same update (CEL rules) share its cached
// comparisons, as upstream shares one CorrelatedObject. A nil c validates
// without ratcheting.
func WithCorrelation(c *Correlation) ValidateOption {
	return func(o *validateOptions) { o.ratchet, o.corr = c != nil, c }
}

// ValidateSchema validates value against the OpenAPI v3 keywords of s, as
// kube-openapi's schema validator does for a CRD schema, and converts the
// errors into field errors under fldPath as upstream does (the OpenAPI
// error message becomes the detail; required, enum, maxLength, maxItems,
// maxProperties and type errors become Required, NotSupported, TooLong,
// TooMany and TypeInvalid errors).
//
// Error messages name paths relative to the validated value: for a status
// update upstream validates .status with its own schema, so its messages
// say "conditions[0].type in body ..." under the field path
// "status.conditions[0].type".
func ValidateSchema(fldPath *field.Path, value any, s *Schema, opts ...ValidateOption) field.ErrorList {
	if s == nil {
		return nil
	}
	var o validateOptions
	for _, opt := range opts {
		opt(&o)
	}
	w := walker{}
	w.path = w.buf[:0]
	c := o.corr
	if o.ratchet && c == nil {
		c = &Correlation{old: o.old, cur: value, s: s}
	}
	r := w.node(value, s, c)
	if len(r.errs) == 0 {
		return nil
	}
	return toFieldErrors(fldPath, r.errs)
}

// errKind is how upstream converts a kube-openapi error into a field
// error; it follows the error's code.
type errKind uint8

const (
	// ekPlain: not an OpenAPI Validation error (anyOf/oneOf/allOf/not
	// results, range-check errors): Invalid at the validated root with
	// value "".
	ekPlain errKind = iota
	ekRequired
	ekEnum
	ekTooLong
	ekMaxItems
	ekTooManyProperties
	ekType
	ekOther // Invalid with the error's value
)

type verr struct {
	kind   errKind
	name   string // OpenAPI path of the value
	value  any
	max    int64
	actual int64
	values []any
	msg    string
}

// result mirrors kube-openapi's Result: errors deduplicated by message,
// and a match count that decides which anyOf/oneOf branch's errors are
// reported.
type result struct {
	errs  []verr
	match int
}

func (r *result) add(e verr) {
	for i := range r.errs {
		if r.errs[i].msg == e.msg {
			return
		}
	}
	r.errs = append(r.errs, e)
}

func (r *result) merge(o result) {
	if r.errs == nil && len(o.errs) > 0 {
		r.errs = o.errs
	} else {
		for _, e := range o.errs {
			r.add(e)
		}
	}
	r.match += o.match
}

func (r *result) valid() bool { return len(r.errs) == 0 }

// pseg is one segment of an OpenAPI validation path.
type pseg struct {
	kind  uint8 // segProp, segAdditional, segIndex
	key   string
	index int
}

const (
	segProp uint8 = iota
	segAdditional
	segIndex
)

type walker struct {
	path []pseg
	buf  [16]pseg
}

func (w *walker) push(kind uint8, key string, index int) {
	w.path = append(w.path, pseg{kind: kind, key: key, index: index})
}

func (w *walker) pop() { w.path = w.path[:len(w.path)-1] }

// pathString renders the path as kube-openapi builds it: properties joined
// with "." (no leading dot at the root), additionalProperties keys always
// prefixed with ".", indices as "[i]".
func (w *walker) pathString() string {
	var b strings.Builder
	for _, s := range w.path {
		switch s.kind {
		case segProp:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		case segAdditional:
			b.WriteByte('.')
			b.WriteString(s.key)
		case segIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// node validates d against s; with a correlation c, errors are dropped when
// d equals its old value (ratcheting).
func (w *walker) node(d any, s *Schema, c *Correlation) result {
	r := w.validate(d, s, c)
	if c != nil && !r.valid() && c.Equal() {
		r.errs = nil
	}
	return r
}

type valueKind uint8

const (
	kNull valueKind = iota
	kBool
	kString
	kInt
	kFloat
	kArray
	kObject
	kOther
)

func kindOf(d any) valueKind {
	switch d.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case string:
		return kString
	case int64:
		return kInt
	case float64:
		return kFloat
	case []any:
		return kArray
	case map[string]any:
		return kObject
	}
	return kOther
}

// validate is kube-openapi's SchemaValidator.Validate: the type, schema
// props (allOf/anyOf/oneOf/not), string, format, number, slice, common
// (enum) and object validators, each where it applies, in this order.
func (w *walker) validate(d any, s *Schema, c *Correlation) result {
	var r result
	k := kindOf(d)
	if k == kNull {
		r.merge(w.typeNull(s))
		r.merge(w.enum(d, s))
		return r
	}
	if s.typeApplies {
		r.merge(w.typeCheck(d, k, s))
		r.match++
	}
	r.merge(w.junctors(d, s))
	r.match++
	switch k {
	case kString:
		r.merge(w.str(d.(string), s))
		r.match++
		if s.formatKnown {
			r.merge(w.formatCheck(d.(string), s))
			r.match++
		}
	case kInt, kFloat:
		r.merge(w.number(d, s))
		r.match++
	case kArray:
		r.merge(w.slice(d.([]any), s, c))
		r.match++
	}
	r.merge(w.enum(d, s))
	r.match++
	if k == kObject {
		r.merge(w.object(d.(map[string]any), s, c))
		r.match++
	}
	r.match++
	return r
}

func contains(l []string, s string) bool {
	return slices.Contains(l, s)
}

func (w *walker) typeErr(typ, value string) result {
	path := w.pathString()
	return result{errs: []verr{{
		kind:  ekType,
		name:  path,
		value: value,
		msg:   fmt.Sprintf("%s in body must be of type %s: %q", path, typ, value),
	}}}
}

func (w *walker) typeNull(s *Schema) result {
	if len(s.types) > 0 && !contains(s.types, "null") && !s.nullable {
		return w.typeErr(s.typesJoined, "null")
	}
	return result{match: 1}
}

func (w *walker) typeCheck(d any, k valueKind, s *Schema) result {
	var schType, format string
	switch k {
	case kBool:
		schType = "boolean"
	case kString:
		schType = "string"
	case kInt:
		schType, format = "integer", "int64"
	case kFloat:
		schType, format = "number", "float64"
	case kArray:
		schType = "array"
	case kObject:
		schType = "object"
	}
	isFloatInt := k == kFloat && isFloat64AJSONInteger(d.(float64)) && contains(s.types, "integer")
	isIntFloat := k == kInt && contains(s.types, "number")
	if k != kString && k != kArray && s.format != "" &&
		!(contains(s.types, schType) || format == s.format || isFloatInt || isIntFloat) {
		return w.typeErr(s.format, format)
	}
	if !contains(s.types, "number") && !contains(s.types, "integer") && s.format != "" && (k == kString || k == kArray) {
		return result{match: 1}
	}
	if !(contains(s.types, schType) || isFloatInt || isIntFloat) {
		return w.typeErr(s.typesJoined, schType)
	}
	return result{match: 1}
}

func (w *walker) plain(msg string) verr { return verr{kind: ekPlain, msg: msg} }

// junctors is kube-openapi's schemaPropsValidator: allOf, anyOf, oneOf and
// not, validated without ratcheting.
func (w *walker) junctors(d any, s *Schema) result {
	var main result
	if !s.hasJunctors {
		main.match++
		return main
	}
	if len(s.anyOf) > 0 {
		var best, first *result
		succeeded := false
		for _, b := range s.anyOf {
			res := w.validate(d, b, nil)
			if res.valid() {
				best, succeeded = nil, true
				if first == nil {
					first = &res
				}
				break
			}
			if best == nil || res.match > best.match {
				best = &res
			}
		}
		if !succeeded {
			main.add(w.plain(fmt.Sprintf("%q must validate at least one schema (anyOf)", w.pathString())))
		}
		if best != nil {
			main.merge(*best)
		} else if first != nil {
			main.merge(*first)
		}
	}
	if len(s.oneOf) > 0 {
		var best, first *result
		validated := 0
		for _, b := range s.oneOf {
			res := w.validate(d, b, nil)
			if res.valid() {
				validated++
				best = nil
				if first == nil {
					first = &res
				}
				continue
			}
			if validated == 0 && (best == nil || res.match > best.match) {
				best = &res
			}
		}
		if validated != 1 {
			more := "Found none valid"
			if validated > 0 {
				more = fmt.Sprintf("Found %d valid alternatives", validated)
			}
			main.add(w.plain(fmt.Sprintf("%q must validate one and only one schema (oneOf). %s", w.pathString(), more)))
			if best != nil {
				main.merge(*best)
			}
		} else if first != nil {
			main.merge(*first)
		}
	}
	if len(s.allOf) > 0 {
		validated := 0
		for _, b := range s.allOf {
			res := w.validate(d, b, nil)
			if res.valid() {
				validated++
			}
			main.merge(res)
		}
		if validated != len(s.allOf) {
			more := ""
			if validated == 0 {
				more = ". None validated"
			}
			main.add(w.plain(fmt.Sprintf("%q must validate all the schemas (allOf)%s", w.pathString(), more)))
		}
	}
	if s.not != nil {
		if res := w.validate(d, s.not, nil); res.valid() {
			main.add(w.plain(fmt.Sprintf("%q must not validate the schema (not)", w.pathString())))
		}
	}
	main.match++
	return main
}

// str is kube-openapi's string validator: the first failing of maxLength,
// minLength and pattern.
func (w *walker) str(d string, s *Schema) result {
	if s.maxLength == nil && s.minLength == nil && s.pattern == "" {
		return result{}
	}
	if s.maxLength != nil || s.minLength != nil {
		n := int64(utf8.RuneCountInString(d))
		if s.maxLength != nil && n > *s.maxLength {
			path := w.pathString()
			return result{errs: []verr{{kind: ekTooLong, name: path, value: d, max: *s.maxLength,
				msg: fmt.Sprintf("%s in body should be at most %d chars long", path, *s.maxLength)}}}
		}
		if s.minLength != nil && n < *s.minLength {
			path := w.pathString()
			return result{errs: []verr{{kind: ekOther, name: path, value: d,
				msg: fmt.Sprintf("%s in body should be at least %d chars long", path, *s.minLength)}}}
		}
	}
	if s.pattern != "" {
		if s.patternErr != nil {
			path := w.pathString()
			return result{errs: []verr{{kind: ekOther, name: path, value: d,
				msg: fmt.Sprintf("%s in body should match '%s, but pattern is invalid: %s'", path, s.pattern, s.patternErr)}}}
		}
		if !s.patternRE.MatchString(d) {
			path := w.pathString()
			return result{errs: []verr{{kind: ekOther, name: path, value: d,
				msg: fmt.Sprintf("%s in body should match '%s'", path, s.pattern)}}}
		}
	}
	return result{}
}

func (w *walker) formatCheck(d string, s *Schema) result {
	if strfmt.Default.Validates(s.format, d) {
		return result{}
	}
	path := w.pathString()
	return result{errs: []verr{{kind: ekType, name: path, value: d,
		msg: fmt.Sprintf("%s in body must be of type %s: %q", path, s.format, d)}}}
}

// enum is kube-openapi's common validator. A value matches a member when
// it converts to the member's Go type (as reflect.Value.Convert) and is
// then equal; null never matches.
func (w *walker) enum(d any, s *Schema) result {
	if len(s.enum) == 0 {
		return result{}
	}
	if str, ok := d.(string); ok {
		if _, found := s.enumStrings[str]; found {
			return result{}
		}
	} else if d != nil {
		for _, e := range s.enum {
			if enumMatch(d, e) {
				return result{}
			}
		}
	}
	path := w.pathString()
	return result{errs: []verr{{kind: ekEnum, name: path, value: d, values: s.enum,
		msg: fmt.Sprintf("%s in body should be one of %v", path, s.enum)}}}
}

func enumMatch(d, e any) bool {
	switch e := e.(type) {
	case string:
		switch d := d.(type) {
		case string:
			return d == e
		case int64:
			// reflect converts an integer to a string as a rune.
			r := "\uFFFD"
			if int64(rune(d)) == d {
				r = string(rune(d))
			}
			return r == e
		}
	case int64:
		switch d := d.(type) {
		case int64:
			return d == e
		case float64:
			return int64(d) == e
		}
	case float64:
		switch d := d.(type) {
		case int64:
			return float64(d) == e
		case float64:
			return d == e
		}
	case bool:
		if d, ok := d.(bool); ok {
			return d == e
		}
	case map[string]any:
		if d, ok := d.(map[string]any); ok {
			return reflect.DeepEqual(d, e)
		}
	case []any:
		if d, ok := d.([]any); ok {
			return reflect.DeepEqual(d, e)
		}
	}
	return false
}

// number is kube-openapi's number validator as v1.33 builds it (without
// the node's type and format, so no value is out of its type's range):
// multipleOf, minimum and maximum, each compared in the value's native
// type (an int64 value against the bound truncated to int64).
func (w *walker) number(d any, s *Schema) result {
	var res result
	res.match = 1
	if s.multipleOf == nil && s.maximum == nil && s.minimum == nil {
		return res
	}
	var mul, lo, hi result
	if s.multipleOf != nil {
		f := *s.multipleOf
		if i, isInt := d.(int64); isInt {
			if e, ok := w.multipleOfInt(i, int64(f)); ok {
				mul.add(e)
			}
		} else if e, ok := w.multipleOfFloat(asFloat64(d), f); ok {
			mul.add(e)
		}
	}
	if s.minimum != nil {
		if e, ok := w.bound(d, *s.minimum, s.exclusiveMin, false); ok {
			lo.add(e)
		}
	}
	if s.maximum != nil {
		if e, ok := w.bound(d, *s.maximum, s.exclusiveMax, true); ok {
			hi.add(e)
		}
	}
	res.merge(mul)
	res.merge(lo)
	res.merge(hi)
	return res
}

func asFloat64(d any) float64 {
	switch d := d.(type) {
	case int64:
		return float64(d)
	case float64:
		return d
	}
	return 0
}

func (w *walker) multipleOfInt(d, factor int64) (verr, bool) {
	if factor <= 0 {
		path := w.pathString()
		return verr{kind: ekOther, name: path, value: factor,
			msg: fmt.Sprintf("factor MultipleOf declared for %s must be positive: %v", path, factor)}, true
	}
	if (d/factor)*factor != d {
		path := w.pathString()
		return verr{kind: ekOther, name: path, value: d,
			msg: fmt.Sprintf("%s in body should be a multiple of %v", path, factor)}, true
	}
	return verr{}, false
}

func (w *walker) multipleOfFloat(d, factor float64) (verr, bool) {
	if factor <= 0 {
		path := w.pathString()
		return verr{kind: ekOther, name: path, value: factor,
			msg: fmt.Sprintf("factor MultipleOf declared for %s must be positive: %v", path, factor)}, true
	}
	var mult float64
	if factor < 1 {
		mult = 1 / factor * d
	} else {
		mult = d / factor
	}
	if !isFloat64AJSONInteger(mult) {
		path := w.pathString()
		return verr{kind: ekOther, name: path, value: d,
			msg: fmt.Sprintf("%s in body should be a multiple of %v", path, factor)}, true
	}
	return verr{}, false
}

// bound checks a minimum or maximum in the value's native type.
func (w *walker) bound(d any, b float64, exclusive, isMax bool) (verr, bool) {
	if i, ok := d.(int64); ok {
		bi := int64(b)
		var fail bool
		if isMax {
			fail = (!exclusive && i > bi) || (exclusive && i >= bi)
		} else {
			fail = (!exclusive && i < bi) || (exclusive && i <= bi)
		}
		if !fail {
			return verr{}, false
		}
		return w.boundErr(d, bi, exclusive, isMax), true
	}
	return w.boundFloat(asFloat64(d), d, b, exclusive, isMax)
}

func (w *walker) boundFloat(data float64, value any, b float64, exclusive, isMax bool) (verr, bool) {
	var fail bool
	if isMax {
		fail = (!exclusive && data > b) || (exclusive && data >= b)
	} else {
		fail = (!exclusive && data < b) || (exclusive && data <= b)
	}
	if !fail {
		return verr{}, false
	}
	return w.boundErr(value, b, exclusive, isMax), true
}

func (w *walker) boundErr(value, bound any, exclusive, isMax bool) verr {
	path := w.pathString()
	var msg string
	switch {
	case isMax && exclusive:
		msg = fmt.Sprintf("%s in body should be less than %v", path, bound)
	case isMax:
		msg = fmt.Sprintf("%s in body should be less than or equal to %v", path, bound)
	case exclusive:
		msg = fmt.Sprintf("%s in body should be greater than %v", path, bound)
	default:
		msg = fmt.Sprintf("%s in body should be greater than or equal to %v", path, bound)
	}
	return verr{kind: ekOther, name: path, value: value, msg: msg}
}

// slice is kube-openapi's slice validator: items, then minItems, maxItems
// and uniqueItems.
func (w *walker) slice(l []any, s *Schema, c *Correlation) result {
	var r result
	if s.items != nil {
		for i, v := range l {
			var cc *Correlation
			if c != nil {
				cc = c.Index(i)
			}
			w.push(segIndex, "", i)
			r.merge(w.node(v, s.items, cc))
			w.pop()
		}
	}
	size := int64(len(l))
	if s.minItems != nil && size < *s.minItems {
		path := w.pathString()
		r.add(verr{kind: ekOther, name: path, value: size,
			msg: fmt.Sprintf("%s in body should have at least %d items", path, *s.minItems)})
	}
	if s.maxItems != nil && size > *s.maxItems {
		path := w.pathString()
		r.add(verr{kind: ekMaxItems, name: path, actual: size, max: *s.maxItems,
			msg: fmt.Sprintf("%s in body should have at most %d items", path, *s.maxItems)})
	}
	if s.uniqueItems && hasDuplicates(l) {
		path := w.pathString()
		r.add(verr{kind: ekOther, name: path,
			msg: fmt.Sprintf("%s in body shouldn't contain duplicates", path)})
	}
	r.match++
	return r
}

func hasDuplicates(l []any) bool {
	for i := 1; i < len(l); i++ {
		for j := 0; j < i; j++ {
			if reflect.DeepEqual(l[i], l[j]) {
				return true
			}
		}
	}
	return false
}

// object is kube-openapi's object validator: minProperties, maxProperties,
// additionalProperties, properties, required.
func (w *walker) object(m map[string]any, s *Schema, c *Correlation) result {
	var r result
	n := int64(len(m))
	if s.minProperties != nil && n < *s.minProperties {
		path := w.pathString()
		r.add(verr{kind: ekOther, name: path, value: n,
			msg: fmt.Sprintf("%s in body should have at least %d properties", path, *s.minProperties)})
	}
	if s.maxProperties != nil && n > *s.maxProperties {
		path := w.pathString()
		r.add(verr{kind: ekTooManyProperties, name: path, actual: n, max: *s.maxProperties,
			msg: fmt.Sprintf("%s in body should have at most %d properties", path, *s.maxProperties)})
	}
	if s.hasAdditional && !s.additionalAllows {
		for _, k := range sortedKeys(m) {
			if _, isProp := s.properties[k]; !isProp {
				path := w.pathString()
				r.add(verr{kind: ekOther, name: path, value: k,
					msg: fmt.Sprintf("%s.%s in body is a forbidden property", path, k)})
			}
		}
	} else if ap := s.additionalProperties; ap != nil {
		for _, k := range sortedKeys(m) {
			if _, isProp := s.properties[k]; isProp {
				continue
			}
			w.push(segAdditional, k, 0)
			r.merge(w.node(m[k], ap, w.childCorr(c, k)))
			w.pop()
		}
	}
	for _, k := range s.propertyNames {
		v, ok := m[k]
		if !ok {
			continue
		}
		w.push(segProp, k, 0)
		r.merge(w.node(v, s.properties[k], w.childCorr(c, k)))
		w.pop()
	}
	for _, k := range s.required {
		if _, ok := m[k]; !ok {
			name := w.pathString() + "." + k
			r.add(verr{kind: ekRequired, name: name, msg: name + " in body is required"})
		}
	}
	return r
}

// childCorr correlates field k of an object; at the validated root,
// apiVersion and kind are not ratcheted.
func (w *walker) childCorr(c *Correlation, k string) *Correlation {
	if c == nil {
		return nil
	}
	if len(w.path) == 0 && (k == "kind" || k == "apiVersion") {
		return nil
	}
	return c.Key(k)
}

// toFieldErrors is upstream's conversion of kube-openapi errors.
func toFieldErrors(fldPath *field.Path, errs []verr) field.ErrorList {
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		if e.kind == ekPlain {
			out = append(out, field.Invalid(fldPath, "", e.msg))
			continue
		}
		errPath := fldPath
		if e.name != "" && e.name != "." {
			errPath = fldPath.Child(strings.TrimPrefix(e.name, "."))
		}
		value := e.value
		if value == nil {
			value = ""
		}
		switch e.kind {
		case ekRequired:
			out = append(out, field.Required(errPath, ""))
		case ekEnum:
			values := make([]string, 0, len(e.values))
			for _, v := range e.values {
				if s, ok := v.(string); ok {
					values = append(values, s)
				} else {
					b, _ := json.Marshal(v)
					values = append(values, string(b))
				}
			}
			out = append(out, field.NotSupported(errPath, e.value, values))
		case ekTooLong:
			out = append(out, fielderr.TooLong(errPath, int(e.max)))
		case ekMaxItems, ekTooManyProperties:
			out = append(out, fielderr.TooMany(errPath, int(e.actual), int(e.max)))
		case ekType:
			out = append(out, field.TypeInvalid(errPath, value, e.msg))
		default:
			out = append(out, field.Invalid(errPath, value, e.msg))
		}
	}
	return out
}

const (
	maxJSONFloat = float64(1<<53 - 1)
	minJSONFloat = -float64(1<<53 - 1)
	epsilon      = 1e-9
)

// isFloat64AJSONInteger reports whether f is an integer within
// [-2^53+1, 2^53-1], allowing a relative error of 1e-9 (go-openapi's rule).
func isFloat64AJSONInteger(f float64) bool {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < minJSONFloat || f > maxJSONFloat {
		return false
	}
	rounded := math.Round(f)
	if f == rounded {
		return true
	}
	if rounded == 0 {
		return false
	}
	diff := math.Abs(f - rounded)
	if diff == 0 {
		return true
	}
	return diff < epsilon*math.Abs(rounded)
}
