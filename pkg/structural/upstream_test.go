package structural

// Upstream's pipeline, assembled from k8s.io/apiextensions-apiserver's
// packages the way its request decoder and strategies use them. Test-only:
// the differential tests compare this package against it.

import (
	"context"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/common"

	"github.com/crdplane/crdplane/pkg/upstreamv133"
)

type upstream struct {
	props           *apiextensions.JSONSchemaProps
	structural      *structuralschema.Structural
	validator       apiservervalidation.SchemaValidator
	statusValidator apiservervalidation.SchemaValidator
}

func newUpstream(t testing.TB, v1props *apiextensionsv1.JSONSchemaProps) *upstream {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1props, internal, nil); err != nil {
		t.Fatalf("convert: %v", err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatalf("structural: %v", err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		t.Fatalf("prune defaults: %v", err)
	}
	v, err := upstreamv133.NewSchemaValidator(internal)
	if err != nil {
		t.Fatalf("validator: %v", err)
	}
	u := &upstream{props: internal, structural: s, validator: v}
	if st, ok := internal.Properties["status"]; ok {
		if u.statusValidator, err = upstreamv133.NewSchemaValidator(&st); err != nil {
			t.Fatalf("status validator: %v", err)
		}
	}
	return u
}

// asV133 words errs as v1.33 where the v0.37 library differs:
//
//   - it drops the range errors of the library's number validator, which
//     checks values and bounds against the node's type and format; v1.33
//     builds its number validator without them (kube-openapi of 2025-03:
//     numberValidator has no Type or Format), so it never reports one.
//     (Where a bound is out of range, v0.37 then compares as floats while
//     v1.33 compares in the value's native type: such cases do not
//     compare with this library.)
//   - "Too long: may not be more than 1 bytes" and "Too many: 2: must
//     have at most 1 items": v0.33's field.TooLong and field.TooMany have
//     no singular.
func asV133(errs field.ErrorList) field.ErrorList {
	out := errs[:0:0]
	for _, e := range errs {
		if upstreamv133.IsRangeError(e) {
			continue
		}
		switch e.Detail {
		case "may not be more than 1 byte":
			e.Detail = "may not be more than 1 bytes"
		case "must have at most 1 item":
			e.Detail = "must have at most 1 items"
		}
		out = append(out, e)
	}
	return out
}

// decode is the schema coercer of upstream's decoder followed by
// defaulting; it returns the unknown field paths.
func (u *upstream) decode(obj map[string]any, dropInvalid bool) ([]string, error) {
	var unknown []string
	meta, found, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields: dropInvalid, ReturnUnknownFieldPaths: true,
	})
	if err != nil {
		return nil, err
	}
	unknown = append(unknown, metaUnknown...)
	unknown = append(unknown, structuralpruning.PruneWithOptions(obj, u.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, u.structural)
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, u.structural, false, schemaobjectmeta.CoerceOptions{
		DropInvalidFields: dropInvalid, ReturnUnknownFieldPaths: true,
	})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, paths...)
	if found {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			return nil, err
		}
		if meta.CreationTimestamp.IsZero() {
			if m, ok := obj["metadata"].(map[string]any); ok {
				delete(m, "creationTimestamp")
			}
		}
	}
	structuraldefaulting.Default(obj, u.structural)
	return unknown, nil
}

// embeddedV133 is upstream's validation of embedded resources as v1.33
// words it: a missing apiVersion or kind is "Required value: must not be
// empty" (the v0.37 library this module builds with leaves the detail
// empty).
func (u *upstream) embeddedV133(obj map[string]any) field.ErrorList {
	errs := schemaobjectmeta.Validate(context.Background(), nil, obj, u.structural, false)
	for _, e := range errs {
		if e.Type == field.ErrorTypeRequired && e.Detail == "" {
			e.Detail = "must not be empty"
		}
	}
	return errs
}

func (u *upstream) validate(obj map[string]any) field.ErrorList {
	errs := asV133(apiservervalidation.ValidateCustomResource(nil, obj, u.validator))
	errs = append(errs, u.embeddedV133(obj)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, u.structural, obj)...)
	return errs
}

func (u *upstream) validateUpdate(obj, old map[string]any) field.ErrorList {
	correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: u.structural})
	errs := asV133(apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, u.validator, apiservervalidation.WithRatcheting(correlated)))
	errs = append(errs, u.embeddedV133(obj)...)
	if len(listtype.ValidateListSetsAndMaps(nil, u.structural, old)) == 0 {
		errs = append(errs, listtype.ValidateListSetsAndMaps(nil, u.structural, obj)...)
	}
	return errs
}

// validateStatus is the schema part of upstream's status update validation.
func (u *upstream) validateStatus(status, oldStatus any) field.ErrorList {
	newObj := map[string]any{"status": status}
	oldObj := map[string]any{"status": oldStatus}
	correlated := common.NewCorrelatedObject(newObj, oldObj, &model.Structural{Structural: u.structural})
	return asV133(apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, oldStatus, u.statusValidator,
		apiservervalidation.WithRatcheting(correlated.Key("status"))))
}
