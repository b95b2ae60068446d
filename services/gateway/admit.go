package gateway

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// admission is one object's trip through the validator.
type admission struct {
	op          validatorv1.Operation
	obj         object // at the request version
	old         object // on update, at the request version
	subresource string
	name        string
	// metaErrs are the gateway's own metadata errors; they join the
	// validator's field errors in one 422, metadata first, as upstream.
	metaErrs field.ErrorList
	// fieldValidation is the request's fieldValidation directive.
	fieldValidation string
}

// admit prunes, defaults and validates an object at the request version
// (its schema is the one that applies, as upstream validates before
// converting to the storage version). The validator applies the request's
// fieldValidation directive to unknown fields (a 400 under Strict,
// warnings under Warn, nothing under Ignore); its warnings are sent
// whatever the outcome, as upstream's decoder and strategies record them
// before answering. Field errors are a 422.
func (a *kubeAPI) admit(ctx context.Context, r *resource, ad admission) ([]byte, error) {
	data, err := encodeObject(ad.obj)
	if err != nil {
		return nil, err
	}
	req := &validatorv1.AdmitRequest{
		Crd:             r.crdRef(),
		Version:         r.version,
		Operation:       ad.op,
		Object:          data,
		Subresource:     ad.subresource,
		FieldValidation: ad.fieldValidation,
	}
	if ad.old != nil {
		if req.OldObject, err = encodeObject(ad.old); err != nil {
			return nil, err
		}
	}
	resp, err := a.validator.Admit(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("admit %s %q: %w", r.kind, ad.name, err)
	}
	addWarnings(ctx, resp.GetWarnings()...)
	causes := causesFromFieldErrors(ad.metaErrs)
	causes = append(causes, causesFromProto(resp.GetCauses())...)
	if len(causes) > 0 {
		return nil, newInvalid(r.groupKind(), ad.name, causes)
	}
	if len(resp.GetObject()) == 0 {
		return data, nil
	}
	return resp.GetObject(), nil
}
