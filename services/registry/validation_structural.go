package registry

// Structural schema rules (the reference's "Specifying a structural
// schema"): every specified field has a type, value validations in
// allOf/anyOf/oneOf/not only restrict what is declared outside them, and
// metadata is only restricted in name and generateName. Messages and paths
// are upstream's; its errors are sorted by their text.

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

type level int

const (
	rootLevel level = iota
	itemLevel
	fieldLevel
)

// structuralUnsupported reports the first construct a structural schema
// cannot hold at all (upstream's NewStructural errors).
func structuralUnsupported(s *schemaProps) error {
	if s == nil {
		return nil
	}
	switch {
	case s.ID != "":
		return errors.New("OpenAPIV3Schema 'id' is not supported")
	case s.Schema != "":
		return errors.New("OpenAPIV3Schema 'schema' is not supported")
	case s.Ref != nil && *s.Ref != "":
		return errors.New("OpenAPIV3Schema '$ref' is not supported")
	case len(s.PatternProperties) > 0:
		return errors.New("OpenAPIV3Schema 'patternProperties' is not supported")
	case len(s.Dependencies) > 0:
		return errors.New("OpenAPIV3Schema 'dependencies' is not supported")
	case s.AdditionalItems != nil:
		return errors.New("OpenAPIV3Schema 'additionalItems' is not supported")
	case len(s.Definitions) > 0:
		return errors.New("OpenAPIV3Schema 'definitions' is not supported")
	}
	if err := structuralUnsupported(s.Not); err != nil {
		return err
	}
	for _, list := range [][]schemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			if err := structuralUnsupported(&list[i]); err != nil {
				return err
			}
		}
	}
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		return errors.New("internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined")
	}
	if s.Items != nil {
		if len(s.Items.JSONSchemas) > 0 {
			return errors.New("OpenAPIV3Schema 'items' must be a schema, but is an array")
		}
		if err := structuralUnsupported(s.Items.Schema); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Properties) {
		p := s.Properties[k]
		if err := structuralUnsupported(&p); err != nil {
			return err
		}
	}
	if s.AdditionalProperties != nil {
		return structuralUnsupported(s.AdditionalProperties.Schema)
	}
	return nil
}

// validateStructural checks that s (free of unsupported constructs) is a
// structural schema.
func validateStructural(p *field.Path, s *schemaProps) field.ErrorList {
	errs := structuralInvariants(s, rootLevel, p)
	errs = append(errs, junctorCompleteness(s, s, p, p)...)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

func itemsSchema(s *schemaProps) *schemaProps {
	if s == nil || s.Items == nil {
		return nil
	}
	return s.Items.Schema
}

func structuralInvariants(s *schemaProps, lvl level, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	items := itemsSchema(s)
	if s.Type == "array" && items == nil {
		errs = append(errs, field.Required(p.Child("items"), "must be specified"))
	}
	errs = append(errs, structuralInvariants(items, itemLevel, p.Child("items"))...)
	for _, k := range sortedKeys(s.Properties) {
		prop := s.Properties[k]
		errs = append(errs, structuralInvariants(&prop, fieldLevel, p.Child("properties").Key(k))...)
	}
	if s.AdditionalProperties != nil {
		if lvl == rootLevel {
			errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "must not be used at the root"))
		}
		errs = append(errs, structuralInvariants(s.AdditionalProperties.Schema, fieldLevel, p.Child("additionalProperties"))...)
	}
	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	if s.XIntOrString && preserve {
		errs = append(errs, field.Invalid(p.Child("x-kubernetes-preserve-unknown-fields"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	if s.XIntOrString && s.XEmbeddedResource {
		errs = append(errs, field.Invalid(p.Child("x-kubernetes-embedded-resource"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	errs = append(errs, junctorRules(s, isIntOrStringAnyOf(s.AnyOf), hasIntOrStringAllOf(s), p)...)

	checkMetadata := lvl == rootLevel || s.XEmbeddedResource
	switch {
	case s.XEmbeddedResource && s.Type != "object":
		if s.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), "must be object if x-kubernetes-embedded-resource is true"))
		} else {
			errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
	case s.Type == "" && !s.XIntOrString && !preserve:
		switch lvl {
		case rootLevel:
			errs = append(errs, field.Required(p.Child("type"), "must not be empty at the root"))
		case itemLevel:
			errs = append(errs, field.Required(p.Child("type"), "must not be empty for specified array items"))
		default:
			errs = append(errs, field.Required(p.Child("type"), "must not be empty for specified object fields"))
		}
	}
	if s.XEmbeddedResource && s.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"))
	}
	if lvl == rootLevel && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be object at the root"))
	}
	for _, k := range []string{"kind", "apiVersion"} {
		if prop, ok := s.Properties[k]; ok && checkMetadata && prop.Type != "string" {
			errs = append(errs, field.Invalid(p.Child("properties").Key(k).Child("type"), prop.Type, "must be string"))
		}
	}
	if md, ok := s.Properties["metadata"]; ok {
		mp := p.Child("properties").Key("metadata")
		if checkMetadata && md.Type != "object" {
			errs = append(errs, field.Invalid(mp.Child("type"), md.Type, "must be object"))
		}
		if lvl == rootLevel && !onlyNameRestrictions(md) {
			errs = append(errs, field.Forbidden(mp, "must not specify anything other than name and generateName, but metadata is implicitly specified"))
		}
	}
	if s.XEmbeddedResource && !preserve && len(s.Properties) == 0 {
		errs = append(errs, field.Required(p.Child("properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
	}
	return errs
}

// onlyNameRestrictions: the root metadata schema may give a type and a
// default and restrict name and generateName, nothing else.
func onlyNameRestrictions(md schemaProps) bool {
	_, hasName := md.Properties["name"]
	_, hasGenerateName := md.Properties["generateName"]
	n := len(md.Properties)
	if (hasName && hasGenerateName && n == 2) || ((hasName || hasGenerateName) && n == 1) || n == 0 {
		md.Properties = nil
	}
	md.Type = ""
	md.Default = nil
	// empty lists are dropped when upstream builds its structural form
	if len(md.Enum) == 0 {
		md.Enum = nil
	}
	for _, l := range []*[]schemaProps{&md.AllOf, &md.AnyOf, &md.OneOf} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if len(md.XValidations) == 0 {
		md.XValidations = nil
	}
	return reflect.ValueOf(md).IsZero()
}

// isIntOrStringAnyOf recognises anyOf: [{type: integer}, {type: string}],
// the pattern that spells x-kubernetes-int-or-string.
func isIntOrStringAnyOf(anyOf []schemaProps) bool {
	if len(anyOf) != 2 {
		return false
	}
	for i, t := range []string{"integer", "string"} {
		if !reflect.DeepEqual(anyOf[i], schemaProps{Type: t}) {
			return false
		}
	}
	return true
}

func hasIntOrStringAllOf(s *schemaProps) bool {
	return len(s.AllOf) >= 1 && isIntOrStringAnyOf(s.AllOf[0].AnyOf)
}

// junctorRules checks the value validations of s (its allOf, anyOf, oneOf
// and not, and a pattern).
func junctorRules(s *schemaProps, skipAnyOf, skipFirstAllOfAnyOf bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !skipAnyOf {
		for i := range s.AnyOf {
			errs = append(errs, nestedRules(&s.AnyOf[i], false, p.Child("anyOf").Index(i))...)
		}
	}
	for i := range s.AllOf {
		errs = append(errs, nestedRules(&s.AllOf[i], skipFirstAllOfAnyOf && i == 0, p.Child("allOf").Index(i))...)
	}
	for i := range s.OneOf {
		errs = append(errs, nestedRules(&s.OneOf[i], false, p.Child("oneOf").Index(i))...)
	}
	if s.Not != nil {
		errs = append(errs, nestedRules(s.Not, false, p.Child("not"))...)
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			errs = append(errs, field.Invalid(p.Child("pattern"), s.Pattern, fmt.Sprintf("must be a valid regular expression, but isn't: %v", err)))
		}
	}
	return errs
}

// nestedRules checks a schema inside a logical junctor: it may only hold
// value validations.
func nestedRules(s *schemaProps, skipAnyOf bool, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := junctorRules(s, skipAnyOf, false, p)
	if items := itemsSchema(s); items != nil {
		errs = append(errs, nestedRules(items, false, p.Child("items"))...)
	}
	for _, k := range sortedKeys(s.Properties) {
		prop := s.Properties[k]
		errs = append(errs, nestedRules(&prop, false, p.Child("properties").Key(k))...)
	}
	if s.Type != "" {
		errs = append(errs, field.Forbidden(p.Child("type"), "must be empty to be structural"))
	}
	if ap := s.AdditionalProperties; ap != nil && (ap.Schema != nil || ap.Allows) {
		errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "must be undefined to be structural"))
	}
	if s.Default != nil && *s.Default != nil {
		errs = append(errs, field.Forbidden(p.Child("default"), "must be undefined to be structural"))
	}
	if s.Title != "" {
		errs = append(errs, field.Forbidden(p.Child("title"), "must be empty to be structural"))
	}
	if s.Description != "" {
		errs = append(errs, field.Forbidden(p.Child("description"), "must be empty to be structural"))
	}
	if s.Nullable {
		errs = append(errs, field.Forbidden(p.Child("nullable"), "must be false to be structural"))
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-preserve-unknown-fields"), "must be false to be structural"))
	}
	if s.XEmbeddedResource {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-embedded-resource"), "must be false to be structural"))
	}
	if s.XIntOrString {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-int-or-string"), "must be false to be structural"))
	}
	if len(s.XListMapKeys) > 0 {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-list-map-keys"), "must be empty to be structural"))
	}
	if s.XListType != nil {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-list-type"), "must be undefined to be structural"))
	}
	if s.XMapType != nil {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-map-type"), "must be undefined to be structural"))
	}
	if len(s.XValidations) > 0 {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-validations"), "must be empty to be structural"))
	}
	if _, ok := s.Properties["metadata"]; ok {
		errs = append(errs, field.Forbidden(p.Child("properties").Key("metadata"), "must not be specified in a nested context"))
	}
	return errs
}

// junctorCompleteness: every property and item a junctor of v talks about
// must be specified in the structural part s.
func junctorCompleteness(v, s *schemaProps, sPath, vPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Not != nil {
		errs = append(errs, nestedCompleteness(v.Not, s, sPath, vPath.Child("not"))...)
	}
	for i := range v.AllOf {
		errs = append(errs, nestedCompleteness(&v.AllOf[i], s, sPath, vPath.Child("allOf").Index(i))...)
	}
	for i := range v.AnyOf {
		errs = append(errs, nestedCompleteness(&v.AnyOf[i], s, sPath, vPath.Child("anyOf").Index(i))...)
	}
	for i := range v.OneOf {
		errs = append(errs, nestedCompleteness(&v.OneOf[i], s, sPath, vPath.Child("oneOf").Index(i))...)
	}
	return errs
}

func nestedCompleteness(v, s *schemaProps, sPath, vPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if s == nil {
		return field.ErrorList{field.Required(sPath, fmt.Sprintf("because it is defined in %s", vPath.String()))}
	}
	errs := junctorCompleteness(v, s, sPath, vPath)
	if vi := itemsSchema(v); vi != nil {
		errs = append(errs, nestedCompleteness(vi, itemsSchema(s), sPath.Child("items"), vPath.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		vp := v.Properties[k]
		sp, ok := s.Properties[k]
		if !ok {
			errs = append(errs, field.Required(sPath.Child("properties").Key(k), fmt.Sprintf("because it is defined in %s", vPath.Child("properties").Key(k))))
			continue
		}
		errs = append(errs, nestedCompleteness(&vp, &sp, sPath.Child("properties").Key(k), vPath.Child("properties").Key(k))...)
	}
	return errs
}
