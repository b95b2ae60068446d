package registry

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// schemaChecks are the CRD checks that need CEL and the schema machinery
// (the validator's ValidateCRD): CEL rules compile and stay within their
// cost budget, defaults are pruned and valid.
type schemaChecks interface {
	check(ctx context.Context, crd, old *CRD) (field.ErrorList, []string, error)
}

// validatorChecks calls ValidatorService.ValidateCRD.
type validatorChecks struct {
	client validatorv1.ValidatorServiceClient
}

func (v validatorChecks) check(ctx context.Context, crd, old *CRD) (field.ErrorList, []string, error) {
	req := &validatorv1.ValidateCRDRequest{}
	var err error
	if req.Crd, err = encodeCRD(crd); err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	if old != nil {
		if req.OldCrd, err = encodeCRD(old); err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
	}
	resp, err := v.client.ValidateCRD(ctx, req)
	if err != nil {
		switch grpcstatus.Code(err) {
		case codes.Unimplemented:
			// a validator from before ValidateCRD: nothing to add
			return nil, nil, nil
		case codes.Unavailable, codes.DeadlineExceeded:
			return nil, nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the validator could not check the CustomResourceDefinition: %v", grpcstatus.Convert(err).Message()))
		}
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("validator: %w", err))
	}
	return fieldErrorsFromCauses(resp.GetCauses()), resp.GetWarnings(), nil
}

// withSchemaChecks adds the validator's findings to own (the registry's own
// validation errors). As upstream, rules are compiled and defaults checked
// only for schemas that passed the other checks.
func withSchemaChecks(ctx context.Context, checks schemaChecks, crd, old *CRD, own field.ErrorList) (field.ErrorList, []string, error) {
	if checks == nil || hasSchemaErrors(own) {
		return own, nil, nil
	}
	more, warnings, err := checks.check(ctx, crd, old)
	if err != nil {
		return nil, nil, err
	}
	return append(own, more...), warnings, nil
}

// hasSchemaErrors reports whether errs concern a schema
// (spec.validation... or spec.versions[i].schema...).
func hasSchemaErrors(errs field.ErrorList) bool {
	for _, e := range errs {
		if strings.HasPrefix(e.Field, "spec.validation") {
			return true
		}
		if rest, ok := strings.CutPrefix(e.Field, "spec.versions["); ok {
			if _, after, ok := strings.Cut(rest, "]."); ok && strings.HasPrefix(after, "schema") {
				return true
			}
		}
	}
	return false
}

// fieldErrorsFromCauses turns upstream-form causes (reason = field error
// type, message = the error body) back into field errors that render the
// same body, so that the registry's 422 lists them as upstream's would.
func fieldErrorsFromCauses(causes []*commonv1.StatusCause) field.ErrorList {
	out := make(field.ErrorList, 0, len(causes))
	for _, c := range causes {
		t := field.ErrorType(c.GetReason())
		switch t {
		case field.ErrorTypeNotFound, field.ErrorTypeRequired, field.ErrorTypeDuplicate, field.ErrorTypeInvalid,
			field.ErrorTypeNotSupported, field.ErrorTypeForbidden, field.ErrorTypeTooLong, field.ErrorTypeTooMany,
			field.ErrorTypeInternal, field.ErrorTypeTypeInvalid, field.ErrorTypeTooShort, field.ErrorTypeTooFew:
		default:
			t = field.ErrorTypeInvalid
		}
		detail := c.GetMessage()
		if rest, ok := strings.CutPrefix(detail, t.String()); ok {
			detail = strings.TrimPrefix(rest, ": ")
		}
		out = append(out, &field.Error{Type: t, Field: c.GetField(), BadValue: field.OmitValueType{}, Detail: detail})
	}
	return out
}
