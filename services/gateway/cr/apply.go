package cr

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/objmeta"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// crApply serves a server-side apply (PATCH application/apply-patch+yaml)
// of a custom resource, its status or its scale. The validator merges the
// body into the stored object (none: the apply creates the object; on
// /status and /scale a missing object stays a 404), records
// managedFields, prepares, prunes, defaults and validates the result; the
// gateway checks its metadata as on any write, sets the generation and
// stores it: a create (201) or a compare-and-swap update at the read
// revision. A lost race is applied again from a new read, unless the apply
// pins a resourceVersion (409). It returns the object at the request
// version, or its Scale on /scale.
func (a *Server) crApply(ctx context.Context, r *resource, req *gatewayv1.PatchRequest, opts *metav1.PatchOptions) ([]byte, error) {
	ns, name, sub := req.GetNamespace(), req.GetName(), req.GetSubresource()
	p := updateParams{
		name: name, subresource: sub, dryRun: isDryRun(opts.DryRun), fieldValidation: opts.FieldValidation,
		fieldManager: opts.FieldManager,
	}
	for {
		cur, err := a.readCurrent(ctx, r, ns, name)
		if err != nil && (sub != "" || !apierrors.IsNotFound(err)) {
			return nil, err
		}
		areq := &validatorv1.AdmitRequest{
			Crd: r.crdRef(), Version: r.version, Operation: validatorv1.Operation_OPERATION_APPLY,
			Subresource: sub, FieldValidation: opts.FieldValidation,
			ManagedFields: true, FieldManager: opts.FieldManager, UserAgent: httpx.RequestMetaFrom(ctx).UserAgent,
			Force: opts.Force != nil && *opts.Force, ApplyPatch: req.GetBody().GetData(),
			Namespace: ns, Name: name,
		}
		if cur != nil {
			// The object as read, not cur.obj encoded again: the validator
			// decodes both to the same values (TestOldObjectAsRead).
			areq.OldObject = cur.reqJSON
		}
		resp, err := a.validator.Admit(ctx, areq)
		if err != nil {
			return nil, fmt.Errorf("apply %s %q: %w", r.kind, name, err)
		}
		httpx.AddWarnings(ctx, resp.GetWarnings()...)
		if causes := httpx.CausesFromProto(resp.GetCauses()); len(causes) > 0 {
			if cur != nil {
				// An update's metadata errors repeat, as in admit.
				return nil, httpx.NewInvalidAll(r.groupKind(), name, causes)
			}
			return nil, httpx.NewInvalid(r.groupKind(), name, causes)
		}
		admitted := resp.GetObject()
		obj, err := listing.DecodeObject(admitted)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("applied object: %w", err))
		}
		if err := checkKind(r, obj, name); err != nil {
			return nil, err
		}
		var result []byte
		if cur == nil {
			if result, err = a.applyCreate(ctx, r, ns, name, obj, admitted, p.dryRun); errors.Is(err, errStale) && retryStale(ctx) {
				continue // created meanwhile: apply to it
			}
		} else {
			result, err = a.applyExisting(ctx, r, cur, obj, admitted, p)
			if errors.Is(err, errStale) {
				if objmeta.String(obj, "resourceVersion") != "" || !retryStale(ctx) {
					return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
				}
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		if sub == "scale" {
			return scaleOfResult(r, result)
		}
		return result, nil
	}
}

// applyCreate stores the object an apply created (errStale: another
// writer created it meanwhile).
func (a *Server) applyCreate(ctx context.Context, r *resource, ns, name string, obj object, admitted []byte, dryRun bool) ([]byte, error) {
	if err := a.lifecycle.admitCreate(ctx, r, ns, obj); err != nil {
		return nil, err
	}
	metaErrs, err := validateMetaCreate(r, obj)
	if err != nil {
		return nil, err
	}
	if len(metaErrs) > 0 {
		return nil, httpx.NewInvalid(r.groupKind(), name, httpx.CausesFromFieldErrors(metaErrs))
	}
	stored, err := a.convertOne(ctx, r, r.storageAPIVersion(), admitted)
	if err != nil {
		return nil, err
	}
	result := stored
	if !dryRun {
		resp, err := a.storage.Create(ctx, &storagev1.CreateRequest{Key: r.objectKey(ns, name), Object: stored})
		if err != nil {
			err = storageErr(err, r.groupResource(), name)
			if apierrors.IsAlreadyExists(err) {
				return nil, errStale
			}
			return nil, err
		}
		result = resp.GetObject()
	}
	if result, err = a.readObject(ctx, r, result); err != nil {
		return nil, err
	}
	httpx.SetHTTPCode(ctx, http.StatusCreated)
	return result, nil
}

// applyExisting writes an apply to a stored object: upstream's
// rest.BeforeUpdate metadata checks, a resourceVersion the apply pins, then
// the update's write (errStale: the CAS lost).
func (a *Server) applyExisting(ctx context.Context, r *resource, cur *current, obj object, admitted []byte, p updateParams) ([]byte, error) {
	metaErrs, err := validateMetaUpdate(r, obj, cur.obj)
	if err != nil {
		return nil, err
	}
	if len(metaErrs) > 0 {
		return nil, httpx.NewInvalidAll(r.groupKind(), p.name, httpx.CausesFromFieldErrors(metaErrs))
	}
	rv, err := resourceVersion(obj)
	if err != nil {
		return nil, err
	}
	if rv != 0 && rv != cur.rv {
		return nil, apierrors.NewConflict(r.groupResource(), p.name, errors.New(optimisticLockMsg))
	}
	return a.commitUpdate(ctx, r, cur, admitted, obj, p)
}

// scaleOfResult is the Scale of a custom resource written through /scale.
func scaleOfResult(r *resource, result []byte) ([]byte, error) {
	updated, err := listing.DecodeObject(result)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	scale, _, err := scaleOf(updated, r.scale)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return encodeScale(scale)
}
