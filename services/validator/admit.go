package validator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/fieldmanager"
	"github.com/crdplane/crdplane/pkg/jsondec"
	"github.com/crdplane/crdplane/pkg/jsonenc"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
	"github.com/crdplane/crdplane/pkg/structural"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/validator/celrules"
)

// Admit prunes, defaults and validates one custom resource. Field errors
// come back as causes (and no object); request problems as gRPC errors
// carrying a Kubernetes Status.
func (s *Service) Admit(ctx context.Context, req *validatorv1.AdmitRequest) (*validatorv1.AdmitResponse, error) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(
		attribute.String("crdplane.crd", req.GetCrd().GetName()),
		attribute.Int64("crdplane.crd.generation", req.GetCrd().GetGeneration()),
		attribute.String("crdplane.version", req.GetVersion()),
		attribute.String("crdplane.operation", req.GetOperation().String()),
		attribute.String("crdplane.subresource", req.GetSubresource()),
	)
	resp, err := s.admit(ctx, req)
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			s.log.ErrorContext(ctx, "admission failed", "crd", req.GetCrd().GetName(), "version", req.GetVersion(), "err", err)
			err = apierrors.NewInternalError(err)
		}
		return nil, kstatus.ToGRPC(err)
	}
	span.SetAttributes(attribute.Int("crdplane.causes", len(resp.GetCauses())))
	return resp, nil
}

func (s *Service) admit(ctx context.Context, req *validatorv1.AdmitRequest) (*validatorv1.AdmitResponse, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	crd, err := s.src.Get(ctx, req.GetCrd())
	if err != nil {
		return nil, err
	}
	cv, err := s.compiled.get(crd, req.GetVersion())
	if err != nil {
		return nil, err
	}
	op := req.GetOperation()
	a := admission{cv: cv, converter: s.converter, cache: s.compiled, update: op == validatorv1.Operation_OPERATION_UPDATE || op == validatorv1.Operation_OPERATION_PATCH, status: req.GetSubresource() == "status", scale: req.GetSubresource() == "scale"}
	if a.status && !cv.hasStatus {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("CustomResourceDefinition %s version %s has no status subresource", cv.crdName, cv.version))
	}
	if op == validatorv1.Operation_OPERATION_APPLY {
		return a.apply(ctx, req)
	}

	// The object to admit and, when its preparation dropped part of the
	// request, the request's object: prepared here (req.prepare), or by
	// the caller (request_object).
	var obj, reqObj map[string]any
	if req.GetPrepare() {
		if obj, reqObj, a.metaErrs, err = a.prepare(req); err != nil {
			return nil, err
		}
	}
	hasRequest := reqObj != nil || len(req.GetRequestObject()) > 0

	// Upstream's decoder decodes the whole request before the strategies
	// drop parts of it: its errors come first, and its unknown fields are
	// those of the whole request.
	var reqUnknown []string
	hasReqObject := hasRequest && req.GetFieldValidation() != metav1.FieldValidationIgnore
	if hasReqObject {
		if reqObj != nil {
			reqUnknown, err = a.unknownFieldsOf(runtime.DeepCopyJSON(reqObj))
		} else {
			reqUnknown, err = a.unknownFields(req.GetRequestObject())
		}
		if err != nil {
			return nil, err
		}
	}
	var unknown []string
	if obj != nil {
		unknown, err = a.normalize(obj, false)
	} else {
		obj, unknown, err = a.decode(req.GetObject(), false)
	}
	if err != nil {
		return nil, err
	}
	if hasReqObject {
		unknown = reqUnknown
	}
	// Strict decoding errors (the caller's duplicate fields, then unknown
	// fields), as upstream's decoder under the fieldValidation directive:
	// Strict fails before anything is validated.
	var strictErrs []string
	if req.GetFieldValidation() != metav1.FieldValidationIgnore {
		strictErrs = append(strictErrs, req.GetStrictErrors()...)
		for _, path := range unknown {
			strictErrs = append(strictErrs, fmt.Sprintf("unknown field %q", path))
		}
	}
	switch req.GetFieldValidation() {
	case metav1.FieldValidationStrict:
		if len(strictErrs) > 0 {
			return nil, apierrors.NewBadRequest(a.cannotHandle(errors.New("strict decoding error: " + strings.Join(strictErrs, ", "))))
		}
	case metav1.FieldValidationIgnore:
	default:
		a.warnings = append(a.warnings, strictErrs...)
	}
	if a.update {
		if a.old, _, err = a.decode(req.GetOldObject(), true); err != nil {
			return nil, fmt.Errorf("old object: %w", err)
		}
	}

	if req.GetManagedFields() {
		manager := fieldmanager.Name(req.GetFieldManager(), req.GetUserAgent())
		if a.status && hasRequest {
			// Upstream's field manager sees a status write before the
			// status strategy drops everything but .status: its entry
			// records the request's metadata changes too (only spec is
			// reset), while the object keeps the stored metadata.
			var derr error
			if reqObj != nil {
				reqObj = runtime.DeepCopyJSON(reqObj)
				_, derr = a.normalize(reqObj, false)
			} else {
				reqObj, _, derr = a.decode(req.GetRequestObject(), false)
			}
			if derr == nil {
				if reqObj, err = a.updateManagedFields(ctx, reqObj, manager); err != nil {
					return nil, err
				}
				(&unstructured.Unstructured{Object: obj}).SetManagedFields((&unstructured.Unstructured{Object: reqObj}).GetManagedFields())
				return a.finish(ctx, obj, len(req.GetObject()))
			}
		}
		if obj, err = a.updateManagedFields(ctx, obj, manager); err != nil {
			return nil, err
		}
	}
	return a.finish(ctx, obj, len(req.GetObject()))
}

// finish validates an admitted object and encodes it: causes (and no
// object) when it is invalid, else the object and the warnings.
func (a *admission) finish(ctx context.Context, obj map[string]any, sizeHint int) (*validatorv1.AdmitResponse, error) {
	var err error
	errs := a.validate(ctx, obj)
	resp := &validatorv1.AdmitResponse{}
	if len(errs) > 0 {
		// Upstream records finalizer warnings only after validation passed.
		resp.Causes = causes(append(a.metaErrs, errs...))
		resp.Warnings = dedup(a.warnings)
		return resp, nil
	}
	if !a.status {
		a.warnings = append(a.warnings, finalizerWarnings(obj, a.old)...)
	}
	resp.Warnings = dedup(a.warnings)
	if len(a.metaErrs) > 0 {
		// rest.BeforeUpdate's common metadata errors alone.
		resp.Causes = causes(a.metaErrs)
		return resp, nil
	}
	if resp.Object, err = jsonenc.Append(make([]byte, 0, sizeHint+256), obj); err != nil {
		return nil, fmt.Errorf("encode object: %w", err)
	}
	return resp, nil
}

func checkRequest(req *validatorv1.AdmitRequest) error {
	var problems []string
	if req.GetCrd().GetName() == "" {
		problems = append(problems, "crd.name is required")
	}
	if req.GetVersion() == "" {
		problems = append(problems, "version is required")
	}
	switch req.GetOperation() {
	case validatorv1.Operation_OPERATION_CREATE:
		if req.GetSubresource() != "" {
			problems = append(problems, "subresource writes are updates")
		}
	case validatorv1.Operation_OPERATION_UPDATE, validatorv1.Operation_OPERATION_PATCH:
		if len(req.GetOldObject()) == 0 {
			problems = append(problems, "old_object is required for "+strings.TrimPrefix(req.GetOperation().String(), "OPERATION_"))
		}
	case validatorv1.Operation_OPERATION_APPLY:
		if !req.GetManagedFields() {
			problems = append(problems, "APPLY needs managed_fields")
		}
		if req.GetFieldManager() == "" {
			problems = append(problems, "field_manager is required for APPLY")
		}
		if req.GetSubresource() != "" && len(req.GetOldObject()) == 0 { // subresources do not create
			problems = append(problems, "an APPLY of a subresource needs old_object")
		}
		if req.GetName() == "" {
			problems = append(problems, "name is required for APPLY")
		}
	default:
		problems = append(problems, "operation must be CREATE, UPDATE, PATCH or APPLY")
	}
	if sub := req.GetSubresource(); sub != "" && sub != "status" && sub != "scale" {
		problems = append(problems, fmt.Sprintf("subresource %q is not admitted by the validator", sub))
	}
	switch fv := req.GetFieldValidation(); fv {
	case "", metav1.FieldValidationStrict, metav1.FieldValidationWarn, metav1.FieldValidationIgnore:
	default:
		problems = append(problems, fmt.Sprintf("field_validation %q must be Strict, Warn, Ignore or empty", fv))
	}
	if req.GetPrepare() && len(req.GetRequestObject()) > 0 {
		problems = append(problems, "request_object is the validator's own with prepare")
	}
	if len(req.GetObject()) == 0 && req.GetOperation() != validatorv1.Operation_OPERATION_APPLY {
		problems = append(problems, "object is required")
	}
	if len(problems) > 0 {
		return apierrors.NewBadRequest("invalid AdmitRequest: " + strings.Join(problems, "; "))
	}
	return nil
}

// admission is one Admit call.
type admission struct {
	cv     *compiledVersion
	update bool
	status bool
	// scale: a write of the scale subresource, validated as an update of
	// the main resource; its managedFields go through the Scale.
	scale bool
	old   map[string]any
	// metaErrs are rest.BeforeUpdate's common metadata errors of an update
	// the validator prepared (prepare): the first causes.
	metaErrs field.ErrorList
	// corr correlates the object with the old one on update, shared by
	// schema and CEL ratcheting (as upstream's CorrelatedObject).
	corr     *structural.Correlation
	warnings []string

	// converter is the converter service (nil: none configured); fms the
	// field managers of this admission (see managers), remote their
	// conversions through the converter when the CRD needs it.
	converter converterv1.ConverterServiceClient
	cache     *compiledCache // the CRD's other versions
	fms       *fieldManagers
	remote    *remoteConverter
}

// dedup drops repeated warnings, keeping the first (as upstream's warning
// recorder).
func dedup(warnings []string) []string {
	if len(warnings) < 2 {
		return warnings
	}
	seen := make(map[string]struct{}, len(warnings))
	out := warnings[:0]
	for _, w := range warnings {
		if _, dup := seen[w]; !dup {
			seen[w] = struct{}{}
			out = append(out, w)
		}
	}
	return out
}

// decode decodes an object and applies what upstream's decoder does: the
// metadata round trip, pruning, embedded metadata, defaulting. It returns
// the paths of the unknown (pruned) fields in upstream's order. The stored
// (old) object is decoded as upstream reads from storage: malformed
// metadata fields are dropped.
func (a *admission) decode(raw []byte, stored bool) (map[string]any, []string, error) {
	obj, err := a.unmarshal(raw)
	if err != nil {
		return nil, nil, err
	}
	unknown, err := a.normalize(obj, stored)
	if err != nil {
		return nil, nil, err
	}
	return obj, unknown, nil
}

// unmarshal decodes an object's JSON, nothing more.
func (a *admission) unmarshal(raw []byte) (map[string]any, error) {
	v, err := jsondec.Unmarshal(raw)
	if err != nil {
		return nil, apierrors.NewBadRequest(a.cannotHandle(err))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, apierrors.NewBadRequest(a.cannotHandle(fmt.Errorf("expected a JSON object, got %s", jsonKind(v))))
	}
	return obj, nil
}

// normalize applies to a decoded object, in place, what decode applies
// after the JSON: the metadata round trip, pruning, embedded metadata,
// defaulting. It returns the paths of the unknown (pruned) fields.
func (a *admission) normalize(obj map[string]any, stored bool) ([]string, error) {
	unknown, err := structural.Normalize(obj, a.cv.schema, stored)
	if err != nil {
		return nil, apierrors.NewBadRequest(a.cannotHandle(err))
	}
	if stored {
		// Upstream's storage decoder repairs a missing generation of very
		// old objects.
		if m, ok := obj["metadata"].(map[string]any); ok {
			if g, _ := m["generation"].(int64); g == 0 {
				m["generation"] = int64(1)
			}
		}
	}
	structural.Default(obj, a.cv.schema)
	return unknown, nil
}

// unknownFields decodes an object as decode does, for its unknown fields
// only (nothing is defaulted).
func (a *admission) unknownFields(raw []byte) ([]string, error) {
	obj, err := a.unmarshal(raw)
	if err != nil {
		return nil, err
	}
	return a.unknownFieldsOf(obj)
}

// unknownFieldsOf is unknownFields of a decoded object (normalised in
// place).
func (a *admission) unknownFieldsOf(obj map[string]any) ([]string, error) {
	unknown, err := structural.Normalize(obj, a.cv.schema, false)
	if err != nil {
		return nil, apierrors.NewBadRequest(a.cannotHandle(err))
	}
	return unknown, nil
}

// cannotHandle words a decoding failure as upstream's request decoder.
// A field error (malformed embedded metadata) reads as v1.33 renders it
// (fielderr: the value with %#v, map[string]interface {}{...}).
func (a *admission) cannotHandle(err error) string {
	var fe *field.Error
	if errors.As(err, &fe) {
		return fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", a.cv.kind, a.cv.version, a.cv.kind, fielderr.Error(fe))
	}
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", a.cv.kind, a.cv.version, a.cv.kind, err)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return "number"
}

// validate runs upstream's custom resource validation for the operation:
// type meta, object meta, schema (ratcheted on update), scale, embedded
// resources, list types and, unless an error makes them moot, the CEL
// rules, in upstream's order.
func (a *admission) validate(ctx context.Context, obj map[string]any) field.ErrorList {
	cv := a.cv
	if a.update {
		a.corr = structural.NewCorrelation(obj, a.old, cv.schema)
	}
	var errs field.ErrorList
	switch {
	case a.status:
		errs = append(errs, a.validateObjectMeta(obj)...)
		if st, ok := obj["status"]; ok && cv.status != nil {
			errs = append(errs, structural.ValidateSchema(field.NewPath("status"), st, cv.status, structural.WithCorrelation(a.corr.Key("status")))...)
		}
		errs = append(errs, validateScaleStatus(obj, cv)...)
		if listErrs := structural.ValidateListTypes(nil, obj, cv.schema); len(listErrs) > 0 && len(structural.ValidateListTypes(nil, a.old, cv.schema)) == 0 {
			errs = append(errs, listErrs...)
		}
	case a.update:
		errs = append(errs, a.validateResource(ctx, obj, structural.WithCorrelation(a.corr))...)
		errs = append(errs, structural.ValidateEmbeddedResources(nil, obj, cv.schema)...)
		if len(structural.ValidateListTypes(nil, a.old, cv.schema)) == 0 {
			errs = append(errs, structural.ValidateListTypes(nil, obj, cv.schema)...)
		}
	default:
		errs = append(errs, a.validateResource(ctx, obj)...)
		errs = append(errs, structural.ValidateEmbeddedResources(nil, obj, cv.schema)...)
		errs = append(errs, structural.ValidateListTypes(nil, obj, cv.schema)...)
	}
	if cv.cel != nil {
		if blockingErr(errs) {
			errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		} else {
			var old any
			if a.old != nil {
				old = a.old
			}
			res := cv.cel.Validate(ctx, nil, obj, old, a.corr, celrules.RuntimeCostBudget)
			errs = append(errs, res.Errors...)
			a.warnings = append(a.warnings, res.Warnings...)
		}
	}
	if len(errs) == 0 && !a.update {
		errs = a.validateCreatedObjectMeta(obj)
	}
	return errs
}

// validateResource is upstream's custom resource validator: type meta (on
// error nothing else), object meta, the schema, the scale paths.
func (a *admission) validateResource(ctx context.Context, obj map[string]any, opts ...structural.ValidateOption) field.ErrorList {
	if errs := a.validateTypeMeta(obj); len(errs) > 0 {
		return errs
	}
	errs := a.validateObjectMeta(obj)
	errs = append(errs, structural.ValidateSchema(nil, obj, a.cv.schema, opts...)...)
	errs = append(errs, validateScaleSpec(obj, a.cv)...)
	errs = append(errs, validateScaleStatus(obj, a.cv)...)
	return errs
}

// blockingErr reports whether errs hold an error that makes CEL rules moot
// (upstream's hasBlockingErr: a type, required, enum, maxLength, maxItems
// or maxProperties violation).
func blockingErr(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

func (a *admission) validateTypeMeta(obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	kind, _ := obj["kind"].(string)
	if kind != a.cv.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+a.cv.kind))
	}
	apiVersion, _ := obj["apiVersion"].(string)
	if apiVersion != a.cv.apiVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, "must be "+a.cv.apiVersion))
	}
	return errs
}

// validateObjectMeta is the custom resource strategy's metadata
// validation (v1.33's, package metavalidation): on create the object meta
// (name a DNS subdomain, namespace, labels, annotations, owner references,
// finalizers, managed fields); on update, and on status update,
// ValidateObjectMetaAccessorUpdate only. (rest.BeforeUpdate's common-field
// validation of an update, which repeats these checks, is the gateway's:
// its errors come before the validator's.)
func (a *admission) validateObjectMeta(obj map[string]any) field.ErrorList {
	meta, errs := objectMeta(obj)
	if len(errs) > 0 {
		return errs
	}
	path := field.NewPath("metadata")
	if !a.update {
		return metavalidation.ValidateObjectMetaAccessor(meta, a.cv.namespaced, metavalidation.NameIsDNSSubdomain, path)
	}
	oldMeta, errs := objectMeta(a.old)
	if len(errs) > 0 {
		return errs
	}
	return metavalidation.ValidateObjectMetaAccessorUpdate(meta, oldMeta, path)
}

// validateCreatedObjectMeta is rest.BeforeCreate's common validation of
// object meta, run once the strategy's validation passed: the name only
// needs to be a path segment there (so it finds nothing the strategy's
// DNS-subdomain check let through; kept for upstream's order).
func (a *admission) validateCreatedObjectMeta(obj map[string]any) field.ErrorList {
	meta, errs := objectMeta(obj)
	if len(errs) > 0 {
		return errs
	}
	return metavalidation.ValidateObjectMetaAccessor(meta, a.cv.namespaced, metavalidation.ValidatePathSegmentName, field.NewPath("metadata"))
}

func objectMeta(obj map[string]any) (*metav1.ObjectMeta, field.ErrorList) {
	meta, err := structural.ObjectMetaOf(obj)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), obj["metadata"], err.Error())}
	}
	return meta, nil
}

func validateScaleSpec(obj map[string]any, cv *compiledVersion) field.ErrorList {
	if cv.scale == nil {
		return nil
	}
	return validateReplicas(obj, cv.scale.SpecReplicasPath)
}

func validateScaleStatus(obj map[string]any, cv *compiledVersion) field.ErrorList {
	if cv.scale == nil {
		return nil
	}
	errs := validateReplicas(obj, cv.scale.StatusReplicasPath)
	if p := cv.scale.LabelSelectorPath; p != nil {
		selector, _, err := unstructured.NestedString(obj, strings.Split(strings.TrimPrefix(*p, "."), ".")...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*p), selector, err.Error()))
		}
	}
	return errs
}

func validateReplicas(obj map[string]any, path string) field.ErrorList {
	replicas, _, err := unstructured.NestedInt64(obj, strings.Split(strings.TrimPrefix(path, "."), ".")...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, err.Error())}
	case replicas < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, "should be a non-negative integer")}
	case replicas > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// standardFinalizers are the finalizers Kubernetes itself defines.
var standardFinalizers = map[string]bool{
	metav1.FinalizerOrphanDependents: true,
	metav1.FinalizerDeleteDependents: true,
	"kubernetes":                     true,
}

// finalizerWarnings warns about finalizer names that are not
// domain-qualified, for the finalizers obj adds (to old's), as upstream.
func finalizerWarnings(obj, old map[string]any) []string {
	added := finalizers(obj)
	if old != nil {
		for _, f := range finalizers(old) {
			added = slices.DeleteFunc(added, func(s string) bool { return s == f })
		}
	}
	slices.Sort(added)
	added = slices.Compact(added)
	var out []string
	const path = "metadata.finalizers"
	for _, f := range added {
		for _, msg := range metavalidation.IsQualifiedName(f) {
			out = append(out, fmt.Sprintf("%s: %q: %s", path, f, msg))
		}
		if !strings.Contains(f, "/") && !standardFinalizers[f] {
			if strings.Contains(f, ".") {
				out = append(out, fmt.Sprintf("%s: %q: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers", path, f))
			} else {
				out = append(out, fmt.Sprintf("%s: %q: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers", path, f))
			}
		}
	}
	return out
}

func finalizers(obj map[string]any) []string {
	meta, _ := obj["metadata"].(map[string]any)
	l, _ := meta["finalizers"].([]any)
	out := make([]string, 0, len(l))
	for _, f := range l {
		if s, ok := f.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// causes renders field errors as Status causes: the error type as reason,
// the field path, and the error body as message, worded as upstream v1.33
// (fielderr: a compound value as %#v, e.g. a list-type duplicate's
// map[string]interface {}{"name":"a"}).
func causes(errs field.ErrorList) []*commonv1.StatusCause {
	out := make([]*commonv1.StatusCause, 0, len(errs))
	for _, e := range errs {
		out = append(out, &commonv1.StatusCause{Reason: string(e.Type), Message: fielderr.Body(e), Field: e.Field})
	}
	return out
}

// crdCauses renders a CRD's field errors as causes, worded as upstream
// v1.33 as the registry renders the rest of a CRD's validation (the
// values there are upstream's internal API types, which v1.33 prints with
// %#v, pointers as addresses).
func crdCauses(errs field.ErrorList) []*commonv1.StatusCause {
	return causes(errs)
}
