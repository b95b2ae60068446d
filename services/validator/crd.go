package validator

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/celconv"
	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/structural"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/validator/celrules"
)

var crdScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	apiextensionsinstall.Install(s)
	return s
}()

// ValidateCRD performs the CRD write-time checks that need the schema and
// CEL machinery (see the proto): default values and x-kubernetes-validations
// (compilation, correlation of transition rules, estimated cost).
func (s *Service) ValidateCRD(ctx context.Context, req *validatorv1.ValidateCRDRequest) (*validatorv1.ValidateCRDResponse, error) {
	resp, err := s.validateCRD(ctx, req)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("crdplane.causes", len(resp.GetCauses())))
	return resp, nil
}

func (s *Service) validateCRD(ctx context.Context, req *validatorv1.ValidateCRDRequest) (*validatorv1.ValidateCRDResponse, error) {
	crd, crdV1, err := decodeCRD(req.GetCrd(), "crd")
	if err != nil {
		return nil, err
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("crdplane.crd", crd.Name))
	var old *apiextensions.CustomResourceDefinition
	var oldV1 *apiextensionsv1.CustomResourceDefinition
	if len(req.GetOldCrd()) > 0 {
		if old, oldV1, err = decodeCRD(req.GetOldCrd(), "old_crd"); err != nil {
			return nil, err
		}
	}
	if _, ok := crdlimits.CompiledSizeAllowed(crdV1, oldV1); !ok {
		// Not compiled: the registry refuses it (validation_limits.go)
		// and calls ValidateCRD only for schemas it found no fault with.
		return &validatorv1.ValidateCRDResponse{}, nil
	}
	errs := ValidateCRDSchemas(ctx, crd, old)
	var warnings []string
	if len(errs) == 0 {
		// Conversion rules are compiled against schemas that passed.
		var ruleErrs field.ErrorList
		warnings, ruleErrs = ValidateConversionRules(crdV1)
		errs = append(errs, ruleErrs...)
	}
	return &validatorv1.ValidateCRDResponse{Causes: crdCauses(errs), Warnings: warnings}, nil
}

// ValidateConversionRules compiles the CRD's declarative conversion rules
// (the annotation conversion.crdplane.dev/rules, package celconv) with this
// tier's CEL environment and cost limits, and checks them for round-trip
// safety against the schemas of both versions of every pair: compile
// errors are field errors (the write is refused), fields that may not
// round-trip are warnings (the write goes through).
func ValidateConversionRules(crd *apiextensionsv1.CustomResourceDefinition) ([]string, field.ErrorList) {
	rules, errs := celconv.Compile(crd)
	if len(errs) > 0 {
		return nil, errs
	}
	return celconv.RoundTripWarnings(crd, rules), nil
}

// decodeCRD decodes a v1 CRD and converts it to the internal form upstream
// validates (schemas shared by every version move to spec.validation); it
// returns both.
func decodeCRD(raw []byte, what string) (*apiextensions.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinition, error) {
	if len(raw) == 0 {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid ValidateCRDRequest: %s is required", what))
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := utiljson.Unmarshal(raw, v1); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid ValidateCRDRequest: %s: %v", what, err))
	}
	out := &apiextensions.CustomResourceDefinition{}
	if err := crdScheme.Convert(v1, out, nil); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("invalid ValidateCRDRequest: %s: %v", what, err))
	}
	return out, v1, nil
}

// ValidateCRDSchemas checks the defaults and CEL rules of every schema of
// crd (internal form), old being the stored CRD on update (else nil), as
// upstream's CRD validation does for structural schemas: per schema, the
// default errors, or (when there are none) the rule errors.
func ValidateCRDSchemas(ctx context.Context, crd, old *apiextensions.CustomResourceDefinition) field.ErrorList {
	requirePruned := true
	var unchanged sets.Set[string]
	pre := celrules.CheckOptions{}
	if old != nil {
		requirePruned = !specHas(&old.Spec, func(p *apiextensions.JSONSchemaProps) bool {
			v1, err := toV1(p)
			if err != nil {
				return false
			}
			has, err := structural.HasUnprunedDefaults(v1)
			return err == nil && has
		})
		unchanged = unchangedSchemas(crd, old)
		rules, messages := sets.New[string](), sets.New[string]()
		specHas(&old.Spec, func(p *apiextensions.JSONSchemaProps) bool {
			walkSchema(p, func(s *apiextensions.JSONSchemaProps) {
				for _, r := range s.XValidations {
					rules.Insert(r.Rule)
					if r.MessageExpression != "" {
						messages.Insert(r.MessageExpression)
					}
				}
			})
			return false
		})
		pre.PreexistingRule, pre.PreexistingMessageExpression = rules.Has, messages.Has
	}

	var errs field.ErrorList
	check := func(path *field.Path, v *apiextensions.CustomResourceValidation, version string) {
		if v == nil || v.OpenAPIV3Schema == nil {
			return
		}
		if crdlimits.SchemaDepth(v.OpenAPIV3Schema) > crdlimits.MaxSchemaDepth {
			// Not compiled: the registry refuses it (and calls
			// ValidateCRD only for schemas it found no fault with).
			return
		}
		props, err := toV1(v.OpenAPIV3Schema)
		if err != nil {
			return
		}
		opts := pre
		opts.SuppressPerExpressionCost = unchanged.Has(version)
		schemaPath := path.Child("openAPIV3Schema")
		defaultErrs, err := structural.ValidateDefaults(ctx, schemaPath, props, requirePruned, celrules.RuntimeCostBudget, validateDefaultRules)
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "failed to validate default value inside metadata"):
			errs = append(errs, field.Invalid(schemaPath, "", err.Error()))
		case err != nil:
			// A schema the validator cannot compile: the registry's checks
			// report what is wrong with it.
		case len(defaultErrs) > 0:
			errs = append(errs, defaultErrs...)
		default:
			errs = append(errs, celrules.CheckRules(schemaPath, props, opts)...)
		}
	}
	spec := field.NewPath("spec")
	check(spec.Child("validation"), crd.Spec.Validation, crd.Spec.Version)
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		check(spec.Child("versions").Index(i).Child("schema"), v.Schema, v.Name)
	}
	return errs
}

// validateDefaultRules validates a default value against the rules of its
// schema node, as upstream: once with the default as its own old value
// (transition rules run), then, when that passed, as on create.
func validateDefaultRules(ctx context.Context, fldPath *field.Path, node *apiextensionsv1.JSONSchemaProps, isResourceRoot bool, value any, budget int64) (field.ErrorList, int64) {
	v, err := celrules.Compile(node, celrules.WithResourceRoot(isResourceRoot))
	if err != nil || v == nil {
		return nil, budget
	}
	res := v.Validate(ctx, fldPath, value, value, nil, budget)
	if len(res.Errors) > 0 {
		return res.Errors, res.RemainingBudget
	}
	res2 := v.Validate(ctx, fldPath, value, nil, nil, budget)
	return res2.Errors, min(res.RemainingBudget, res2.RemainingBudget)
}

func toV1(p *apiextensions.JSONSchemaProps) (*apiextensionsv1.JSONSchemaProps, error) {
	out := &apiextensionsv1.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_apiextensions_JSONSchemaProps_To_v1_JSONSchemaProps(p, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// unchangedSchemas are the versions of crd whose schema old has too.
func unchangedSchemas(crd, old *apiextensions.CustomResourceDefinition) sets.Set[string] {
	out := sets.New[string]()
	for _, v := range crd.Spec.Versions {
		n, err := apiextensions.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			continue
		}
		o, err := apiextensions.GetSchemaForVersion(old, v.Name)
		if err != nil {
			continue
		}
		if equality.Semantic.DeepEqual(n, o) {
			out.Insert(v.Name)
		}
	}
	return out
}

// specHas reports whether pred holds for a root schema of spec.
func specHas(spec *apiextensions.CustomResourceDefinitionSpec, pred func(*apiextensions.JSONSchemaProps) bool) bool {
	if spec.Validation != nil && spec.Validation.OpenAPIV3Schema != nil && pred(spec.Validation.OpenAPIV3Schema) {
		return true
	}
	for _, v := range spec.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil && pred(v.Schema.OpenAPIV3Schema) {
			return true
		}
	}
	return false
}

// walkSchema calls fn on s and every schema below it.
func walkSchema(s *apiextensions.JSONSchemaProps, fn func(*apiextensions.JSONSchemaProps)) {
	if s == nil {
		return
	}
	fn(s)
	if s.Items != nil {
		walkSchema(s.Items.Schema, fn)
		for i := range s.Items.JSONSchemas {
			walkSchema(&s.Items.JSONSchemas[i], fn)
		}
	}
	for _, l := range [][]apiextensions.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range l {
			walkSchema(&l[i], fn)
		}
	}
	walkSchema(s.Not, fn)
	for _, m := range []map[string]apiextensions.JSONSchemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k := range m {
			p := m[k]
			walkSchema(&p, fn)
		}
	}
	if s.AdditionalProperties != nil {
		walkSchema(s.AdditionalProperties.Schema, fn)
	}
	if s.AdditionalItems != nil {
		walkSchema(s.AdditionalItems.Schema, fn)
	}
	for k := range s.Dependencies {
		walkSchema(s.Dependencies[k].Schema, fn)
	}
}
