package cr

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// admission is one object's trip through the validator.
type admission struct {
	op  validatorv1.Operation
	obj object // at the request version
	// old is, on update, the stored object at the request version as read
	// (current.reqJSON), sent as it is: the validator decodes it to the
	// values of the decoded object encoded for admission
	// (TestOldObjectAsRead).
	old         []byte
	subresource string
	name        string
	// fieldValidation is the request's fieldValidation directive.
	fieldValidation string
	// strictErrors are the strict decoding errors of the request body
	// (its duplicate fields), as the directive reports them.
	strictErrors []string
	// fieldManager is the request's fieldManager parameter: the validator
	// records the write in metadata.managedFields under it (derived from
	// the User-Agent when empty).
	fieldManager string
}

// admit prepares, prunes, defaults and validates an object at the request
// version (its schema is the one that applies, as upstream validates
// before converting to the storage version): the validator prepares it
// (AdmitRequest.prepare: .status, an update's immutable metadata and its
// common metadata checks, whose errors come first). The validator applies the request's
// fieldValidation directive to the body's strict errors and the unknown
// fields of the whole request (a 400 under Strict, warnings under Warn,
// nothing under Ignore); its warnings are sent
// whatever the outcome, as upstream's decoder and strategies record them
// before answering. Field errors are a 422.
func (a *Server) admit(ctx context.Context, r *resource, ad admission) ([]byte, error) {
	data, err := encodeForAdmission(ad.obj)
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
		StrictErrors:    ad.strictErrors,
		ManagedFields:   true,
		FieldManager:    ad.fieldManager,
		UserAgent:       httpx.RequestMetaFrom(ctx).UserAgent,
		Prepare:         true,
		OldObject:       ad.old,
	}
	resp, err := a.validator.Admit(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("admit %s %q: %w", r.kind, ad.name, err)
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	if causes := httpx.CausesFromProto(resp.GetCauses()); len(causes) > 0 {
		if ad.op == validatorv1.Operation_OPERATION_UPDATE || ad.op == validatorv1.Operation_OPERATION_PATCH {
			// Upstream validates an update's metadata twice (the
			// validator's first causes are rest.BeforeUpdate's common
			// fields, then its strategy's): every metadata error is listed
			// twice, or three times (ValidateObjectMetaAccessor's labels,
			// annotations, owner references, ... again).
			return nil, httpx.NewInvalidAll(r.groupKind(), ad.name, causes)
		}
		return nil, httpx.NewInvalid(r.groupKind(), ad.name, causes)
	}
	if len(resp.GetObject()) == 0 {
		// The validator prepared the object: what was sent is not it.
		return nil, apierrors.NewInternalError(fmt.Errorf("the validator admitted %s %q without returning it", r.kind, ad.name))
	}
	return resp.GetObject(), nil
}
