package registry

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type schemaProps = apiextensions.JSONSchemaProps

// openAPITypes are the types a schema may declare.
var openAPITypes = []string{"array", "boolean", "integer", "number", "object", "string"}

// rootFieldsWithStatus are the JSONSchemaProps fields allowed at the root
// of a schema when the status subresource is enabled (in upstream's order
// and spelling, which shows in the message).
var rootFieldsWithStatus = []string{"Description", "Type", "Format", "Title", "Maximum", "ExclusiveMaximum", "Minimum", "ExclusiveMinimum", "MaxLength", "MinLength", "Pattern", "MaxItems", "MinItems", "UniqueItems", "MultipleOf", "Required", "Items", "Properties", "ExternalDocs", "Example", "XPreserveUnknownFields", "XValidations"}

var metaFields = []string{"metadata", "kind", "apiVersion"}

// validateCRValidation validates a schema (spec.validation or
// spec.versions[*].schema).
func validateCRValidation(v *apiextensions.CustomResourceValidation, statusEnabled bool, opts validationOptions, p *field.Path) field.ErrorList {
	if v == nil || v.OpenAPIV3Schema == nil {
		return nil
	}
	schema := v.OpenAPIV3Schema
	if errs := validateSchemaDepth(schema, p.Child("openAPIV3Schema")); len(errs) > 0 {
		// nothing else is checked in a schema this deep (validation_limits.go)
		return errs
	}
	var errs field.ErrorList
	if statusEnabled {
		errs = append(errs, validateRootWithStatus(schema, p)...)
	}
	if schema.Nullable {
		errs = append(errs, field.Forbidden(p.Child("openAPIV3Schema.nullable"), "nullable cannot be true at the root"))
	}
	sp := p.Child("openAPIV3Schema")
	var structuralInitErrs field.ErrorList
	if opts.requireStructuralSchema {
		if err := structuralUnsupported(schema); err != nil {
			// overlaps with the schema checks below; shown only alone
			structuralInitErrs = append(structuralInitErrs, field.Invalid(sp, "", err.Error()))
		} else {
			errs = append(errs, validateStructural(sp, schema)...)
		}
	}
	sv := schemaValidator{requireValidPropertyType: opts.requireValidPropertyType}
	errs = append(errs, validateOpenAPISchema(schema, sp, sv, true, opts)...)
	if len(errs) == 0 {
		errs = append(errs, structuralInitErrs...)
	}
	return errs
}

// validateRootWithStatus: with a status subresource, the root schema may
// only use fields that keep their meaning once status is split off.
func validateRootWithStatus(schema *schemaProps, p *field.Path) field.ErrorList {
	v := reflect.ValueOf(schema).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			continue
		}
		name := v.Type().Field(i).Name
		if name == "Type" {
			if schema.Type != "object" {
				return field.ErrorList{field.Invalid(p.Child("openAPIV3Schema.type"), schema.Type, `only "object" is allowed as the type at the root of the schema if the status subresource is enabled`)}
			}
			continue
		}
		if !contains(rootFieldsWithStatus, name) {
			return field.ErrorList{field.Invalid(p.Child("openAPIV3Schema"), *schema, fmt.Sprintf(`only %v fields are allowed at the root of the schema if the status subresource is enabled`, rootFieldsWithStatus))}
		}
	}
	return nil
}

// schemaValidator carries the context-dependent rules of one schema node.
type schemaValidator struct {
	requireValidPropertyType bool
	// defaultsForbidden with its reason (defaults are allowed elsewhere).
	defaultsForbidden bool
	forbiddenReason   string
	// insideResourceMeta: within the schema of metadata, kind or apiVersion.
	insideResourceMeta bool
}

func (v schemaValidator) withForbiddenDefaults(reason string) schemaValidator {
	v.defaultsForbidden, v.forbiddenReason = true, reason
	return v
}

func (v schemaValidator) withInsideResourceMeta() schemaValidator {
	v.insideResourceMeta = true
	return v
}

// check applies the per-node rules of the OpenAPI v3 subset CRDs accept.
func (v schemaValidator) check(s *schemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.requireValidPropertyType && s.Type != "" && !contains(openAPITypes, s.Type) {
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, openAPITypes))
	}
	if s.Default != nil && v.defaultsForbidden {
		detail := "must not be set"
		if v.forbiddenReason != "" {
			detail += " " + v.forbiddenReason
		}
		errs = append(errs, field.Forbidden(p.Child("default"), detail))
	}
	if s.ID != "" {
		errs = append(errs, field.Forbidden(p.Child("id"), "id is not supported"))
	}
	if s.AdditionalItems != nil {
		errs = append(errs, field.Forbidden(p.Child("additionalItems"), "additionalItems is not supported"))
	}
	if len(s.PatternProperties) != 0 {
		errs = append(errs, field.Forbidden(p.Child("patternProperties"), "patternProperties is not supported"))
	}
	if len(s.Definitions) != 0 {
		errs = append(errs, field.Forbidden(p.Child("definitions"), "definitions is not supported"))
	}
	if s.Dependencies != nil {
		errs = append(errs, field.Forbidden(p.Child("dependencies"), "dependencies is not supported"))
	}
	if s.Ref != nil {
		errs = append(errs, field.Forbidden(p.Child("$ref"), "$ref is not supported"))
	}
	if s.Type == "null" {
		errs = append(errs, field.Forbidden(p.Child("type"), "type cannot be set to null, use nullable as an alternative"))
	}
	if s.Items != nil && len(s.Items.JSONSchemas) != 0 {
		errs = append(errs, field.Forbidden(p.Child("items"), "items must be a schema object and not an array"))
	}
	if v.insideResourceMeta && s.XEmbeddedResource {
		errs = append(errs, field.Forbidden(p.Child("x-kubernetes-embedded-resource"), "must not be used inside of resource meta"))
	}
	return errs
}

// validateOpenAPISchema walks a schema applying the OpenAPI and Kubernetes
// extension rules (upstream's ValidateCustomResourceDefinitionOpenAPISchema
// without CEL).
func validateOpenAPISchema(s *schemaProps, p *field.Path, sv schemaValidator, isRoot bool, opts validationOptions) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := sv.check(s, p)
	if s.UniqueItems {
		errs = append(errs, field.Forbidden(p.Child("uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
	}
	if ap := s.AdditionalProperties; ap != nil {
		if len(s.Properties) != 0 && (!ap.Allows || ap.Schema != nil) {
			errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
		}
		sub := sv
		if sv.insideResourceMeta {
			sub = sv.withForbiddenDefaults("inside additionalProperties applying to object metadata")
		}
		errs = append(errs, validateOpenAPISchema(ap.Schema, p.Child("additionalProperties"), sub, false, opts)...)
	}
	for _, name := range sortedKeys(s.Properties) {
		prop := s.Properties[name]
		sub := sv
		if (isRoot || s.XEmbeddedResource) && contains(metaFields, name) {
			sub = sub.withInsideResourceMeta()
			if isRoot {
				sub = sub.withForbiddenDefaults(fmt.Sprintf("in top-level %s", name))
			}
		}
		errs = append(errs, validateOpenAPISchema(&prop, p.Child("properties").Key(name), sub, false, opts)...)
	}
	errs = append(errs, validateOpenAPISchema(s.Not, p.Child("not"), sv, false, opts)...)
	for i := range s.AllOf {
		errs = append(errs, validateOpenAPISchema(&s.AllOf[i], p.Child("allOf").Index(i), sv, false, opts)...)
	}
	for i := range s.OneOf {
		errs = append(errs, validateOpenAPISchema(&s.OneOf[i], p.Child("oneOf").Index(i), sv, false, opts)...)
	}
	for i := range s.AnyOf {
		errs = append(errs, validateOpenAPISchema(&s.AnyOf[i], p.Child("anyOf").Index(i), sv, false, opts)...)
	}
	for _, name := range sortedKeys(s.Definitions) {
		d := s.Definitions[name]
		errs = append(errs, validateOpenAPISchema(&d, p.Child("definitions").Key(name), sv, false, opts)...)
	}
	if s.Items != nil {
		errs = append(errs, validateOpenAPISchema(s.Items.Schema, p.Child("items"), sv, false, opts)...)
		for i := range s.Items.JSONSchemas {
			errs = append(errs, validateOpenAPISchema(&s.Items.JSONSchemas[i], p.Child("items").Index(i), sv, false, opts)...)
		}
	}
	for _, name := range sortedKeys(s.Dependencies) {
		errs = append(errs, validateOpenAPISchema(s.Dependencies[name].Schema, p.Child("dependencies").Key(name), sv, false, opts)...)
	}
	errs = append(errs, validateListAndMapTypes(s, p, opts)...)
	errs = append(errs, validateXValidations(s, p)...)
	return errs
}

// validateListAndMapTypes checks x-kubernetes-preserve-unknown-fields,
// x-kubernetes-map-type, x-kubernetes-list-type and
// x-kubernetes-list-map-keys.
func validateListAndMapTypes(s *schemaProps, p *field.Path, opts validationOptions) field.ErrorList {
	var errs field.ErrorList
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(p.Child("x-kubernetes-preserve-unknown-fields"), *s.XPreserveUnknownFields, "must be true or undefined"))
	}
	if s.XMapType != nil && s.Type != "object" {
		if s.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), "must be object if x-kubernetes-map-type is specified"))
		} else {
			errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be object if x-kubernetes-map-type is specified"))
		}
	}
	if s.XMapType != nil && *s.XMapType != "atomic" && *s.XMapType != "granular" {
		errs = append(errs, field.NotSupported(p.Child("x-kubernetes-map-type"), *s.XMapType, []string{"atomic", "granular"}))
	}
	switch {
	case s.XListType != nil && s.Type != "array":
		if s.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), "must be array if x-kubernetes-list-type is specified"))
		} else {
			errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be array if x-kubernetes-list-type is specified"))
		}
	case opts.requireAtomicSetType && s.XListType != nil && *s.XListType == "set" && s.Items != nil && s.Items.Schema != nil:
		is := s.Items.Schema
		switch is.Type {
		case "array":
			if is.XListType != nil && *is.XListType != "atomic" {
				errs = append(errs, field.Invalid(p.Child("items").Child("x-kubernetes-list-type"), is.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		case "object":
			if is.XMapType == nil || *is.XMapType != "atomic" {
				// upstream reports the list type as the value
				errs = append(errs, field.Invalid(p.Child("items").Child("x-kubernetes-map-type"), is.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		}
	}
	if s.XListType != nil && *s.XListType != "atomic" && *s.XListType != "set" && *s.XListType != "map" {
		errs = append(errs, field.NotSupported(p.Child("x-kubernetes-list-type"), *s.XListType, []string{"atomic", "set", "map"}))
	}
	if len(s.XListMapKeys) > 0 {
		if s.XListType == nil {
			errs = append(errs, field.Required(p.Child("x-kubernetes-list-type"), "must be map if x-kubernetes-list-map-keys is non-empty"))
		} else if *s.XListType != "map" {
			errs = append(errs, field.Invalid(p.Child("x-kubernetes-list-type"), *s.XListType, "must be map if x-kubernetes-list-map-keys is non-empty"))
		}
	}
	if s.XListType != nil && *s.XListType == "map" {
		errs = append(errs, validateMapList(s, p)...)
	}
	if opts.requireMapListKeysMapSetValidation {
		errs = append(errs, validateMapListKeysMapSet(s, p)...)
	}
	return errs
}

func validateMapList(s *schemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.XListMapKeys) == 0 {
		errs = append(errs, field.Required(p.Child("x-kubernetes-list-map-keys"), "must not be empty if x-kubernetes-list-type is map"))
	}
	if s.Items == nil {
		return append(errs, field.Required(p.Child("items"), "must have a schema if x-kubernetes-list-type is map"))
	}
	if s.Items.Schema == nil {
		return append(errs, field.Invalid(p.Child("items"), s.Items, "must only have a single schema if x-kubernetes-list-type is map"))
	}
	is := s.Items.Schema
	if is.Type != "object" {
		return append(errs, field.Invalid(p.Child("items").Child("type"), is.Type, "must be object if parent array's x-kubernetes-list-type is map"))
	}
	keys := map[string]bool{}
	for _, k := range s.XListMapKeys {
		if prop, ok := is.Properties[k]; ok {
			if prop.Type == "array" || prop.Type == "object" {
				// upstream reports the item type as the value
				errs = append(errs, field.Invalid(p.Child("items").Child("properties").Key(k).Child("type"), is.Type, "must be a scalar type if parent array's x-kubernetes-list-type is map"))
			}
		} else {
			errs = append(errs, field.Invalid(p.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "entries must all be names of item properties"))
		}
		if keys[k] {
			errs = append(errs, field.Invalid(p.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "must not contain duplicate entries"))
		}
		keys[k] = true
	}
	return errs
}

// validateMapListKeysMapSet: items of set and map lists are not nullable,
// and map keys are required or defaulted and not nullable.
func validateMapListKeysMapSet(s *schemaProps, p *field.Path) field.ErrorList {
	if s.Items == nil || s.Items.Schema == nil || s.XListType == nil {
		return nil
	}
	lt := *s.XListType
	if lt != "set" && lt != "map" {
		return nil
	}
	var errs field.ErrorList
	is := s.Items.Schema
	if is.Nullable {
		errs = append(errs, field.Forbidden(p.Child("items").Child("nullable"), "cannot be nullable when x-kubernetes-list-type is "+lt))
	}
	if lt != "map" {
		return errs
	}
	required := map[string]bool{}
	for _, r := range is.Required {
		required[r] = true
	}
	for _, k := range s.XListMapKeys {
		prop, ok := is.Properties[k]
		if !ok {
			continue
		}
		kp := p.Child("items").Child("properties").Key(k)
		if !required[k] && prop.Default == nil {
			errs = append(errs, field.Required(kp.Child("default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
		}
		if prop.Nullable {
			errs = append(errs, field.Forbidden(kp.Child("nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
		}
	}
	return errs
}

var validationReasons = []string{"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"}

var newlines = regexp.MustCompile(`[\n\r]+`)

// validateXValidations checks the shape of x-kubernetes-validations rules
// (their CEL is not compiled here).
func validateXValidations(s *schemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range s.XValidations {
		rp := p.Child("x-kubernetes-validations").Index(i)
		r := strings.TrimSpace(rule.Rule)
		msg := strings.TrimSpace(rule.Message)
		switch {
		case r == "":
			errs = append(errs, field.Required(rp.Child("rule"), "rule is not specified"))
		case rule.Message != "" && msg == "":
			errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "message must be non-empty if specified"))
		case newlines.MatchString(msg):
			errs = append(errs, field.Invalid(rp.Child("message"), rule.Message, "message must not contain line breaks"))
		case newlines.MatchString(r) && msg == "":
			errs = append(errs, field.Required(rp.Child("message"), "message must be specified if rule contains line breaks"))
		}
		if rule.MessageExpression != "" && strings.TrimSpace(rule.MessageExpression) == "" {
			errs = append(errs, field.Required(rp.Child("messageExpression"), "messageExpression must be non-empty if specified"))
		}
		if rule.Reason != nil && !contains(validationReasons, string(*rule.Reason)) {
			errs = append(errs, field.NotSupported(rp.Child("reason"), *rule.Reason, validationReasons))
		}
		if rule.FieldPath != "" && strings.TrimSpace(rule.FieldPath) == "" {
			errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "fieldPath must be non-empty if specified"))
		}
		if newlines.MatchString(rule.FieldPath) {
			errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "fieldPath must not contain line breaks"))
		}
		if rule.FieldPath != "" && structuralUnsupported(s) == nil {
			if _, _, err := resolveFieldPath(rule.FieldPath, s, true); err != nil {
				errs = append(errs, field.Invalid(rp.Child("fieldPath"), rule.FieldPath, "fieldPath must be a valid path"))
			}
		}
	}
	return errs
}

// specHas reports whether any root schema of spec satisfies pred.
func specHas(spec *apiextensions.CustomResourceDefinitionSpec, pred func(*schemaProps) bool) bool {
	if spec.Validation != nil && spec.Validation.OpenAPIV3Schema != nil && pred(spec.Validation.OpenAPIV3Schema) {
		return true
	}
	for i := range spec.Versions {
		v := &spec.Versions[i]
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil && pred(v.Schema.OpenAPIV3Schema) {
			return true
		}
	}
	return false
}

// schemaHas reports whether s or any schema nested in it satisfies pred.
func schemaHas(s *schemaProps, pred func(*schemaProps) bool) bool {
	if s == nil {
		return false
	}
	if pred(s) {
		return true
	}
	if s.Items != nil {
		if schemaHas(s.Items.Schema, pred) {
			return true
		}
		for i := range s.Items.JSONSchemas {
			if schemaHas(&s.Items.JSONSchemas[i], pred) {
				return true
			}
		}
	}
	for _, list := range [][]schemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			if schemaHas(&list[i], pred) {
				return true
			}
		}
	}
	if schemaHas(s.Not, pred) {
		return true
	}
	for _, m := range []map[string]schemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k := range m {
			x := m[k]
			if schemaHas(&x, pred) {
				return true
			}
		}
	}
	if s.AdditionalProperties != nil && schemaHas(s.AdditionalProperties.Schema, pred) {
		return true
	}
	if s.AdditionalItems != nil && schemaHas(s.AdditionalItems.Schema, pred) {
		return true
	}
	for _, d := range s.Dependencies {
		if schemaHas(d.Schema, pred) {
			return true
		}
	}
	return false
}

func schemaHasDefault(s *schemaProps) bool {
	return schemaHas(s, func(s *schemaProps) bool { return s.Default != nil })
}

func schemaHasKubernetesExtensions(s *schemaProps) bool {
	return schemaHas(s, func(s *schemaProps) bool {
		return s.XEmbeddedResource || s.XPreserveUnknownFields != nil || s.XIntOrString ||
			len(s.XListMapKeys) > 0 || s.XListType != nil || len(s.XValidations) > 0
	})
}

func hasInvalidType(s *schemaProps) bool {
	return schemaHas(s, func(s *schemaProps) bool { return s.Type != "" && !contains(openAPITypes, s.Type) })
}

func hasNonAtomicSetItems(s *schemaProps) bool {
	return schemaHas(s, func(s *schemaProps) bool {
		if s.XListType == nil || *s.XListType != "set" || s.Items == nil || s.Items.Schema == nil {
			return false
		}
		is := s.Items.Schema
		switch is.Type {
		case "array":
			return is.XListType != nil && *is.XListType != "atomic"
		case "object":
			return is.XMapType == nil || *is.XMapType != "atomic"
		}
		return false
	})
}

func hasInvalidListKeysOrSetItems(s *schemaProps) bool {
	return schemaHas(s, func(s *schemaProps) bool { return len(validateMapListKeysMapSet(s, field.NewPath(""))) > 0 })
}

func isNonStructural(s *schemaProps) bool {
	if structuralUnsupported(s) != nil {
		return true
	}
	return len(validateStructural(nil, s)) > 0
}

func allVersionsHaveSchema(spec *apiextensions.CustomResourceDefinitionSpec) bool {
	if spec.Validation != nil && spec.Validation.OpenAPIV3Schema != nil {
		return true
	}
	for _, v := range spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return false
		}
	}
	return true
}
