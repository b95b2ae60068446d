package registry

// Validation of CustomResourceDefinitions, as upstream's
// ValidateCustomResourceDefinition and friends: the same rules, field paths
// and messages, evaluated on the internal form (the one upstream validates,
// so that values and paths render identically). CEL compilation and cost of
// x-kubernetes-validations, and the validation of default values, need the
// validator's machinery: see validatecrd.go.

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apimachinery/pkg/api/operation"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validationOptions are the switches upstream derives from the old object
// so that an update never tightens validation of data already stored.
type validationOptions struct {
	requireRecognizedConversionReviewVersion bool
	requireImmutableNames                    bool
	requireOpenAPISchema                     bool
	requireValidPropertyType                 bool
	requireStructuralSchema                  bool
	requireAtomicSetType                     bool
	requireMapListKeysMapSetValidation       bool
	allowInvalidCABundle                     bool
	// allowTooManySelectableFields: versions ("" for the top level) whose
	// unchanged selectable fields may stay above the limit.
	allowTooManySelectableFields map[string]bool
}

// maxSelectableFields is upstream's bound on selectable fields per version.
const maxSelectableFields = 8

// validateCreate validates a new CRD (after prepareForCreate).
func validateCreate(ctx context.Context, crd *apiextensions.CustomResourceDefinition) field.ErrorList {
	nameFn := func(name string, prefix bool) []string {
		errs := genericvalidation.NameIsDNSSubdomain(name, prefix)
		if name != crd.Spec.Names.Plural+"."+crd.Spec.Group {
			errs = append(errs, `must be spec.names.plural+"."+spec.group`)
		}
		return errs
	}
	opts := validationOptions{
		requireRecognizedConversionReviewVersion: true,
		requireOpenAPISchema:                     true,
		requireValidPropertyType:                 true,
		requireStructuralSchema:                  true,
		requireAtomicSetType:                     true,
		requireMapListKeysMapSetValidation:       true,
		// the CRD is not established yet
		allowInvalidCABundle: true,
	}
	errs := genericvalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, &crd.ObjectMeta, nil, false, nameFn, field.NewPath("metadata"), true)
	errs = append(errs, validateSpec(&crd.Spec, opts, field.NewPath("spec"))...)
	errs = append(errs, validateStatus(&crd.Status, field.NewPath("status"))...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions, field.NewPath("status", "storedVersions"))...)
	errs = append(errs, validateAPIApproval(crd, nil)...)
	errs = append(errs, validatePreserveUnknownFields(crd, nil)...)
	return errs
}

// validateUpdate validates an update of the main resource.
func validateUpdate(ctx context.Context, crd, old *apiextensions.CustomResourceDefinition) field.ErrorList {
	opts := validationOptions{
		requireRecognizedConversionReviewVersion: old.Spec.Conversion == nil || hasAcceptedReviewVersionOrNone(old.Spec.Conversion.ConversionReviewVersions),
		requireImmutableNames:                    internalConditionTrue(old, apiextensions.Established),
		requireOpenAPISchema:                     allVersionsHaveSchema(&old.Spec),
		requireValidPropertyType:                 !specHas(&old.Spec, hasInvalidType),
		requireStructuralSchema:                  !specHas(&old.Spec, isNonStructural),
		requireAtomicSetType:                     !specHas(&old.Spec, hasNonAtomicSetItems),
		requireMapListKeysMapSetValidation:       !specHas(&old.Spec, hasInvalidListKeysOrSetItems),
		allowInvalidCABundle:                     allowInvalidCABundle(old),
		allowTooManySelectableFields:             tooManySelectableFieldsAllowed(crd, old),
	}
	errs := genericvalidation.ValidateObjectMetaDeclaratively(ctx, operation.Update, &crd.ObjectMeta, &old.ObjectMeta, false, nil, field.NewPath("metadata"), true)
	errs = append(errs, validateSpecUpdate(&crd.Spec, &old.Spec, opts, field.NewPath("spec"))...)
	errs = append(errs, validateStatus(&crd.Status, field.NewPath("status"))...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions, field.NewPath("status", "storedVersions"))...)
	errs = append(errs, validateAPIApproval(crd, old)...)
	errs = append(errs, validatePreserveUnknownFields(crd, old)...)
	return errs
}

// validateStatusUpdate validates an update of the status subresource.
func validateStatusUpdate(ctx context.Context, crd, old *apiextensions.CustomResourceDefinition) field.ErrorList {
	errs := genericvalidation.ValidateObjectMetaDeclaratively(ctx, operation.Update, &crd.ObjectMeta, &old.ObjectMeta, false, nil, field.NewPath("metadata"), true)
	return append(errs, validateStatus(&crd.Status, field.NewPath("status"))...)
}

func validateSpecUpdate(spec, old *apiextensions.CustomResourceDefinitionSpec, opts validationOptions, p *field.Path) field.ErrorList {
	errs := validateSpec(spec, opts, p)
	if opts.requireImmutableNames {
		errs = append(errs, genericvalidation.ValidateImmutableField(spec.Scope, old.Scope, p.Child("scope"))...)
		errs = append(errs, genericvalidation.ValidateImmutableField(spec.Names.Kind, old.Names.Kind, p.Child("names", "kind"))...)
	}
	errs = append(errs, genericvalidation.ValidateImmutableField(spec.Group, old.Group, p.Child("group"))...)
	errs = append(errs, genericvalidation.ValidateImmutableField(spec.Names.Plural, old.Names.Plural, p.Child("names", "plural"))...)
	return errs
}

func preservesUnknownFields(spec *apiextensions.CustomResourceDefinitionSpec) bool {
	return spec.PreserveUnknownFields != nil && *spec.PreserveUnknownFields
}

// validateSpec validates a CRD's spec.
func validateSpec(spec *apiextensions.CustomResourceDefinitionSpec, opts validationOptions, p *field.Path) field.ErrorList {
	var errs field.ErrorList

	switch {
	case spec.Group == "":
		errs = append(errs, field.Required(p.Child("group"), ""))
	case len(utilvalidation.IsDNS1123Subdomain(spec.Group)) > 0:
		errs = append(errs, field.Invalid(p.Child("group"), spec.Group, strings.Join(utilvalidation.IsDNS1123Subdomain(spec.Group), ",")))
	case !strings.Contains(spec.Group, "."):
		errs = append(errs, field.Invalid(p.Child("group"), spec.Group, "should be a domain with at least one dot"))
	}

	errs = append(errs, validateEnum(p.Child("scope"), string(spec.Scope), []string{string(apiextensions.ClusterScoped), string(apiextensions.NamespaceScoped)}, true)...)

	// pruning needs structural schemas
	if !preservesUnknownFields(spec) {
		opts.requireStructuralSchema = true
	}

	topLevelSchema := spec.Validation != nil && spec.Validation.OpenAPIV3Schema != nil
	switch {
	case opts.requireOpenAPISchema:
		if !topLevelSchema {
			for i, v := range spec.Versions {
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					// Upstream v1.33's words (later versions drop them).
					errs = append(errs, field.Required(p.Child("versions").Index(i).Child("schema").Child("openAPIV3Schema"), "schemas are required"))
				}
			}
		}
	case !preservesUnknownFields(spec):
		if !topLevelSchema {
			for i, v := range spec.Versions {
				if v.Served && (v.Schema == nil || v.Schema.OpenAPIV3Schema == nil) {
					errs = append(errs, field.Required(p.Child("versions").Index(i).Child("schema", "openAPIV3Schema"), "because otherwise all fields are pruned"))
				}
			}
		}
	}
	if specHas(spec, schemaHasDefault) {
		opts.requireStructuralSchema = true
		if spec.PreserveUnknownFields == nil || *spec.PreserveUnknownFields {
			errs = append(errs, field.Invalid(p.Child("preserveUnknownFields"), true, "must be false in order to use defaults in the schema"))
		}
	}
	if specHas(spec, schemaHasKubernetesExtensions) {
		opts.requireStructuralSchema = true
	}

	storageCount := 0
	seen := map[string]bool{}
	unique := true
	for i := range spec.Versions {
		v := &spec.Versions[i]
		if v.Storage {
			storageCount++
		}
		if seen[v.Name] {
			unique = false
		}
		seen[v.Name] = true
		vp := p.Child("versions").Index(i)
		if msgs := utilvalidation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, strings.Join(msgs, ",")))
		}
		errs = append(errs, validateVersion(v, vp, hasStatus(subresourcesFor(spec, v.Name)), opts)...)
	}

	if spec.Validation != nil && anyVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) bool { return v.Schema != nil }) {
		errs = append(errs, field.Forbidden(p.Child("validation"), "top-level and per-version schemas are mutually exclusive"))
	}
	if spec.Subresources != nil && anyVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) bool { return v.Subresources != nil }) {
		errs = append(errs, field.Forbidden(p.Child("subresources"), "top-level and per-version subresources are mutually exclusive"))
	}
	if len(spec.AdditionalPrinterColumns) > 0 && anyVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) bool {
		return len(v.AdditionalPrinterColumns) > 0
	}) {
		errs = append(errs, field.Forbidden(p.Child("additionalPrinterColumns"), "top-level and per-version additionalPrinterColumns are mutually exclusive"))
	}
	if identicalPerVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) any { return v.Schema }, func(v *apiextensions.CustomResourceDefinitionVersion) bool { return v.Schema != nil }) {
		errs = append(errs, field.Invalid(p.Child("versions"), spec.Versions, "per-version schemas may not all be set to identical values (top-level validation should be used instead)"))
	}
	if identicalPerVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) any { return v.Subresources }, func(v *apiextensions.CustomResourceDefinitionVersion) bool { return v.Subresources != nil }) {
		errs = append(errs, field.Invalid(p.Child("versions"), spec.Versions, "per-version subresources may not all be set to identical values (top-level subresources should be used instead)"))
	}
	if identicalPerVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) any { return v.AdditionalPrinterColumns }, func(v *apiextensions.CustomResourceDefinitionVersion) bool {
		return len(v.AdditionalPrinterColumns) > 0
	}) {
		errs = append(errs, field.Invalid(p.Child("versions"), spec.Versions, "per-version additionalPrinterColumns may not all be set to identical values (top-level additionalPrinterColumns should be used instead)"))
	}
	if !unique {
		errs = append(errs, field.Invalid(p.Child("versions"), spec.Versions, "must contain unique version names"))
	}
	if storageCount != 1 {
		errs = append(errs, field.Invalid(p.Child("versions"), spec.Versions, "must have exactly one version marked as storage version"))
	}
	if spec.Version != "" {
		if msgs := utilvalidation.IsDNS1035Label(spec.Version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("version"), spec.Version, strings.Join(msgs, ",")))
		}
		if len(spec.Versions) >= 1 && spec.Versions[0].Name != spec.Version {
			errs = append(errs, field.Invalid(p.Child("version"), spec.Version, "must match the first version in spec.versions"))
		}
	}

	// names required in the spec (not in status.acceptedNames)
	np := p.Child("names")
	if spec.Names.Plural == "" {
		errs = append(errs, field.Required(np.Child("plural"), ""))
	}
	if spec.Names.Singular == "" {
		errs = append(errs, field.Required(np.Child("singular"), ""))
	}
	if spec.Names.Kind == "" {
		errs = append(errs, field.Required(np.Child("kind"), ""))
	}
	if spec.Names.ListKind == "" {
		errs = append(errs, field.Required(np.Child("listKind"), ""))
	}
	errs = append(errs, validateNames(&spec.Names, np)...)
	errs = append(errs, validateCRValidation(spec.Validation, anyStatusEnabled(spec), opts, p.Child("validation"))...)
	errs = append(errs, validateSubresources(spec.Subresources, p.Child("subresources"))...)
	for i := range spec.AdditionalPrinterColumns {
		errs = append(errs, validateColumn(&spec.AdditionalPrinterColumns[i], p.Child("additionalPrinterColumns").Index(i))...)
	}
	if len(spec.SelectableFields) > 0 {
		if spec.Validation == nil {
			errs = append(errs, field.Invalid(p.Child("selectableFields"), "", "selectableFields may only be set when validations.schema is included"))
		} else {
			errs = append(errs, validateSelectableFields(spec.SelectableFields, spec.Validation.OpenAPIV3Schema, p.Child("selectableFields"), opts, "")...)
		}
	}
	if spec.Conversion != nil && spec.Conversion.Strategy != apiextensions.NoneConverter && (spec.PreserveUnknownFields == nil || *spec.PreserveUnknownFields) {
		errs = append(errs, field.Invalid(p.Child("conversion").Child("strategy"), spec.Conversion.Strategy, "must be None if spec.preserveUnknownFields is true"))
	}
	errs = append(errs, validateConversion(spec.Conversion, opts.requireRecognizedConversionReviewVersion, p.Child("conversion"), opts)...)
	return errs
}

// validateVersion validates one entry of spec.versions.
func validateVersion(v *apiextensions.CustomResourceDefinitionVersion, p *field.Path, statusEnabled bool, opts validationOptions) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range deprecationWarningProblems(v.Deprecated, v.DeprecationWarning) {
		errs = append(errs, field.Invalid(p.Child("deprecationWarning"), v.DeprecationWarning, msg))
	}
	errs = append(errs, validateCRValidation(v.Schema, statusEnabled, opts, p.Child("schema"))...)
	errs = append(errs, validateSubresources(v.Subresources, p.Child("subresources"))...)
	for i := range v.AdditionalPrinterColumns {
		errs = append(errs, validateColumn(&v.AdditionalPrinterColumns[i], p.Child("additionalPrinterColumns").Index(i))...)
	}
	if len(v.SelectableFields) > 0 {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Invalid(p.Child("selectableFields"), "", "selectableFields may only be set when version.schema.openAPIV3Schema is not included"))
		} else {
			errs = append(errs, validateSelectableFields(v.SelectableFields, v.Schema.OpenAPIV3Schema, p.Child("selectableFields"), opts, v.Name)...)
		}
	}
	return errs
}

func validateEnum(p *field.Path, value string, accepted []string, required bool) field.ErrorList {
	if value == "" {
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
		return nil
	}
	for _, a := range accepted {
		if a == value {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, value, accepted)}
}

// subresourcesFor returns the subresources that apply to a version.
func subresourcesFor(spec *apiextensions.CustomResourceDefinitionSpec, version string) *apiextensions.CustomResourceSubresources {
	if !anyVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) bool { return v.Subresources != nil }) {
		return spec.Subresources
	}
	for i := range spec.Versions {
		if spec.Versions[i].Name == version {
			return spec.Versions[i].Subresources
		}
	}
	return nil
}

func hasStatus(s *apiextensions.CustomResourceSubresources) bool { return s != nil && s.Status != nil }

func anyStatusEnabled(spec *apiextensions.CustomResourceDefinitionSpec) bool {
	if hasStatus(spec.Subresources) {
		return true
	}
	return anyVersion(spec.Versions, func(v *apiextensions.CustomResourceDefinitionVersion) bool { return hasStatus(v.Subresources) })
}

func anyVersion(vs []apiextensions.CustomResourceDefinitionVersion, pred func(*apiextensions.CustomResourceDefinitionVersion) bool) bool {
	for i := range vs {
		if pred(&vs[i]) {
			return true
		}
	}
	return false
}

// identicalPerVersion reports whether every version sets the field (set) to
// the same value (get).
func identicalPerVersion(vs []apiextensions.CustomResourceDefinitionVersion, get func(*apiextensions.CustomResourceDefinitionVersion) any, set func(*apiextensions.CustomResourceDefinitionVersion) bool) bool {
	if len(vs) == 0 {
		return false
	}
	first := get(&vs[0])
	for i := range vs {
		if !set(&vs[i]) || !semanticEqual(get(&vs[i]), first) {
			return false
		}
	}
	return true
}

func deprecationWarningProblems(deprecated bool, warning *string) []string {
	if !deprecated && warning != nil {
		return []string{"can only be set for deprecated versions"}
	}
	if warning == nil {
		return nil
	}
	w := *warning
	var out []string
	if len(w) > 256 {
		out = append(out, "must be <= 256 characters long")
	}
	if len(w) == 0 {
		out = append(out, "must not be an empty string")
	}
	for i, r := range w {
		if !isPrintable(r) {
			out = append(out, fmt.Sprintf("must only contain printable UTF-8 characters; non-printable character found at index %d", i))
			break
		}
		if isControl(r) {
			out = append(out, fmt.Sprintf("must only contain printable UTF-8 characters; control character found at index %d", i))
			break
		}
	}
	if !validUTF8(w) {
		out = append(out, "must only contain printable UTF-8 characters")
	}
	return out
}

// validateStatus validates status.acceptedNames.
func validateStatus(status *apiextensions.CustomResourceDefinitionStatus, p *field.Path) field.ErrorList {
	return validateNames(&status.AcceptedNames, p.Child("acceptedNames"))
}

// validateStoredVersions checks status.storedVersions against spec.versions.
func validateStoredVersions(stored []string, versions []apiextensions.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	if len(stored) == 0 {
		return field.ErrorList{field.Invalid(p, stored, "must have at least one stored version")}
	}
	var errs field.ErrorList
	index := map[string]int{}
	for i, v := range stored {
		index[v] = i
	}
	for _, v := range versions {
		_, ok := index[v.Name]
		if v.Storage && !ok {
			errs = append(errs, field.Invalid(p, stored, "must have the storage version "+v.Name))
		}
		delete(index, v.Name)
	}
	// report the leftovers in the order they are stored
	for i, v := range stored {
		if j, ok := index[v]; ok && j == i {
			errs = append(errs, field.Invalid(p.Index(i), v, fmt.Sprintf("missing from spec.versions; %[1]s was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in %[1]s and removes %[1]s from status.storedVersions", v)))
		}
	}
	return errs
}

func internalConditionTrue(crd *apiextensions.CustomResourceDefinition, t apiextensions.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensions.ConditionTrue
		}
	}
	return false
}
