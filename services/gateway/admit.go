package gateway

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// converting to the storage version). Field errors are a 422; unknown
// fields reported by the validator are a 400 under fieldValidation=Strict,
// warnings under Warn, and dropped under Ignore.
func (a *kubeAPI) admit(ctx context.Context, r *resource, ad admission) ([]byte, error) {
	data, err := encodeObject(ad.obj)
	if err != nil {
		return nil, err
	}
	req := &validatorv1.AdmitRequest{
		Crd:         r.crdRef(),
		Version:     r.version,
		Operation:   ad.op,
		Object:      data,
		Subresource: ad.subresource,
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
	causes := causesFromFieldErrors(ad.metaErrs)
	causes = append(causes, causesFromProto(resp.GetCauses())...)
	if len(causes) > 0 {
		return nil, newInvalid(r.groupKind(), ad.name, causes)
	}
	var unknown, other []string
	for _, w := range resp.GetWarnings() {
		if strings.HasPrefix(w, `unknown field "`) {
			unknown = append(unknown, w)
		} else {
			other = append(other, w)
		}
	}
	addWarnings(ctx, other...)
	if len(unknown) > 0 {
		switch ad.fieldValidation {
		case metav1.FieldValidationStrict:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
				r.kind, r.version, r.kind, strings.Join(unknown, ", ")))
		case metav1.FieldValidationWarn, "":
			// Warn is kube-apiserver's default directive.
			addWarnings(ctx, unknown...)
		}
	}
	if len(resp.GetObject()) == 0 {
		return data, nil
	}
	return resp.GetObject(), nil
}
