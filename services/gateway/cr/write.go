package cr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/patch"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// retryStale reports whether a write that lost a race with another writer
// (errStale) is tried again from a new read: as upstream's GuaranteedUpdate
// retries, with no bound on the attempts, for as long as the request lives
// (its deadline ends it).
func retryStale(ctx context.Context) bool { return ctx.Err() == nil }

func isDryRun(dryRun []string) bool { return len(dryRun) > 0 }

// errCreateWhileTerminating is upstream's answer (its CRD handler's, before
// the body is read) to a create while the CRD is being deleted: 405 naming
// the group and the resource.
func errCreateWhileTerminating(r *resource) error {
	err := apierrors.NewMethodNotSupported(r.groupResource(), "create")
	err.ErrStatus.Message = "create not allowed while custom resource definition is terminating"
	return err
}

func (a *Server) Create(ctx context.Context, req *gatewayv1.CreateRequest, opts *metav1.CreateOptions, body httpx.Body, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	ns := req.GetNamespace()
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), ns, scopeObject)
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, r.warnings...)
	if r.terminating {
		return nil, errCreateWhileTerminating(r)
	}
	obj, err := decodeCustomResource(r, body, decodesStrictly(opts.FieldValidation))
	if err != nil {
		return nil, err
	}
	strictErrs := body.StrictErrors(opts.FieldValidation)
	if err := objmeta.CheckNameAndNamespace(obj, ns, "", r.namespaced); err != nil {
		return nil, err
	}
	if err := a.lifecycle.admitCreate(ctx, r, ns, obj); err != nil {
		return nil, err
	}
	rvSet := objmeta.String(obj, "resourceVersion") != ""
	// The system metadata (a name from generateName: the key, and what
	// errors name); the validator drops .status (AdmitRequest.prepare).
	objmeta.PrepareCreate(obj, a.now(), false)
	name := objmeta.String(obj, "name")
	if err := checkKind(r, obj, name); err != nil {
		return nil, err
	}
	admitted, err := a.admit(ctx, r, admission{
		op: validatorv1.Operation_OPERATION_CREATE, obj: obj, name: name, fieldValidation: opts.FieldValidation,
		strictErrors: strictErrs, fieldManager: opts.FieldManager,
	})
	if err != nil {
		return nil, err
	}
	stored, err := a.convertOne(ctx, r, r.storageAPIVersion(), admitted)
	if err != nil {
		return nil, err
	}
	key := r.objectKey(ns, name)
	var result []byte
	if isDryRun(opts.DryRun) {
		if _, err := a.storage.Get(ctx, &storagev1.GetRequest{Key: key}); err == nil {
			return nil, apierrors.NewAlreadyExists(r.groupResource(), name)
		} else if !apierrors.IsNotFound(storageErr(err, r.groupResource(), name)) {
			return nil, err
		}
		result = stored
	} else {
		if rvSet {
			// kube-apiserver's storage refuses this with a plain (500) error.
			return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
				Message: "resourceVersion should not be set on objects to be created",
			}}
		}
		resp, err := a.storage.Create(ctx, &storagev1.CreateRequest{Key: key, Object: stored})
		if err != nil {
			return nil, storageErr(err, r.groupResource(), name)
		}
		result = resp.GetObject()
	}
	if result, err = a.readObject(ctx, r, result); err != nil {
		return nil, err
	}
	httpx.SetHTTPCode(ctx, http.StatusCreated)
	return out.Body(result), nil
}

func (a *Server) Update(ctx context.Context, req *gatewayv1.UpdateRequest, opts *metav1.UpdateOptions, body httpx.Body, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	ns, name, sub := req.GetNamespace(), req.GetName(), req.GetSubresource()
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), ns, scopeObject)
	if err != nil {
		return nil, err
	}
	if err := checkSubresource(r, sub, name); err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, r.warnings...)
	if sub == "scale" {
		doc, err := a.scaleUpdate(ctx, r, ns, name, body.JSON, body.ConvErr, updateParams{
			name: name, dryRun: isDryRun(opts.DryRun), fieldValidation: opts.FieldValidation,
			fieldManager: opts.FieldManager,
		})
		if err != nil {
			return nil, err
		}
		return out.Body(doc), nil
	}
	obj, err := decodeCustomResource(r, body, decodesStrictly(opts.FieldValidation))
	if err != nil {
		return nil, err
	}
	strictErrs := body.StrictErrors(opts.FieldValidation)
	if err := checkNameAndNamespace(obj, ns, name, r.namespaced); err != nil {
		return nil, err
	}
	// Upstream's order: the uid precondition a PUT's metadata.uid is
	// (checked against the stored object, a missing one included), the
	// object's existence, then its resourceVersion.
	uid := objmeta.String(obj, "uid")
	cur, err := a.readCurrent(ctx, r, ns, name)
	if err != nil {
		if uid != "" && apierrors.IsNotFound(err) {
			return nil, errUIDPrecondition(r, ns, name, uid, "")
		}
		return nil, err
	}
	if have := objmeta.String(cur.obj, "uid"); uid != "" && uid != have {
		return nil, errUIDPrecondition(r, ns, name, uid, have)
	}
	wantRV, err := resourceVersion(obj)
	if err != nil {
		return nil, err
	}
	if wantRV == 0 {
		// Custom resources take no unconditional update (upstream's
		// AllowUnconditionalUpdate is false for them).
		// The value is the store's uint64 resourceVersion, which v1.33
		// renders with %#v: "Invalid value: 0x0".
		return nil, httpx.NewInvalid(schema.GroupKind{Group: r.group, Kind: r.plural}, name, httpx.CausesFromFieldErrors(field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update"),
		}))
	}
	if wantRV != cur.rv {
		return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
	}
	result, err := a.applyUpdate(ctx, r, cur, obj, updateParams{
		name: name, subresource: sub, dryRun: isDryRun(opts.DryRun), fieldValidation: opts.FieldValidation,
		strictErrors: strictErrs, fieldManager: opts.FieldManager,
	})
	if errors.Is(err, errStale) {
		return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
	}
	if err != nil {
		return nil, err
	}
	return out.Body(result), nil
}

// upstreamEtcdPrefix is the etcd prefix of the upstream server crdplane
// answers as (apiextensions-apiserver's default, the reference of the
// conformance oracle); upstream names keys under it in StorageError
// messages.
const upstreamEtcdPrefix = "/registry/apiextensions.kubernetes.io"

// upstreamKey is the key upstream's storage names an object by:
// <prefix>/<group>/<plural>/[<namespace>/]<name>.
func upstreamKey(r *resource, ns, name string) string {
	if r.namespaced {
		return upstreamEtcdPrefix + "/" + r.group + "/" + r.plural + "/" + ns + "/" + name
	}
	return upstreamEtcdPrefix + "/" + r.group + "/" + r.plural + "/" + name
}

// errUIDPrecondition is upstream's answer to an update whose metadata.uid
// (a precondition: rest.DefaultUpdatedObjectInfo) is not the stored
// object's (have; "" when there is none): the etcd3 store's StorageError,
// as InterpretUpdateError makes it a 409 Conflict.
func errUIDPrecondition(r *resource, ns, name, want, have string) error {
	return apierrors.NewConflict(r.groupResource(), name, fmt.Errorf(
		"StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID in object meta: %s",
		upstreamKey(r, ns, name), want, have))
}

// current is the stored state of one object.
type current struct {
	key     string
	rv      int64
	stored  []byte // at the storage version
	reqJSON []byte // at the request version
	obj     object // at the request version, decoded
}

// readCurrent reads an object and converts it to the request version.
func (a *Server) readCurrent(ctx context.Context, r *resource, ns, name string) (*current, error) {
	if err := checkObjectPath(r, ns, name); err != nil {
		return nil, err
	}
	key := r.objectKey(ns, name)
	resp, err := a.storage.Get(ctx, &storagev1.GetRequest{Key: key})
	if err != nil {
		return nil, storageErr(err, r.groupResource(), name)
	}
	reqv, err := a.readObject(ctx, r, resp.GetObject())
	if err != nil {
		return nil, err
	}
	obj, err := listing.DecodeObject(reqv)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("stored object %s: %w", key, err))
	}
	rv := resp.GetResourceVersion()
	if rv == 0 {
		if rv, err = resourceVersion(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	return &current{key: key, rv: rv, stored: resp.GetObject(), reqJSON: reqv, obj: obj}, nil
}

type updateParams struct {
	name            string
	subresource     string
	dryRun          bool
	fieldValidation string
	// strictErrors are the body's strict decoding errors (see
	// httpx.Body.StrictErrors).
	strictErrors []string
	// fieldManager is the request's fieldManager (managedFields).
	fieldManager string
	// patch: the update is a JSON or merge patch the gateway applied
	// (admitted as OPERATION_PATCH).
	patch bool
}

// errStale reports that the stored object moved on between read and write.
var errStale = errors.New("stale")

// applyUpdate runs the update pipeline on obj (at the request version,
// resourceVersion already checked against cur): admission against the old
// object (the validator prepares obj: immutable metadata, .status, the
// common metadata checks), conversion to the storage version, and a
// compare-and-swap write at cur's revision. An update that empties the
// finalizers of an object being deleted deletes it. It returns the result
// at the request version, or errStale when the CAS lost.
func (a *Server) applyUpdate(ctx context.Context, r *resource, cur *current, obj object, p updateParams) ([]byte, error) {
	if err := checkKind(r, obj, p.name); err != nil {
		return nil, err
	}
	op := validatorv1.Operation_OPERATION_UPDATE
	if p.patch {
		op = validatorv1.Operation_OPERATION_PATCH
	}
	admitted, err := a.admit(ctx, r, admission{
		op: op, obj: obj, old: cur.reqJSON, subresource: p.subresource,
		name: p.name, fieldValidation: p.fieldValidation,
		strictErrors: p.strictErrors, fieldManager: p.fieldManager,
	})
	if err != nil {
		return nil, err
	}
	admittedObj, err := listing.DecodeObject(admitted)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("admitted object: %w", err))
	}
	return a.commitUpdate(ctx, r, cur, admitted, admittedObj, p)
}

// commitUpdate writes an admitted update of cur: the generation, the
// conversion to the storage version, nothing when nothing changed there, a
// delete when the update empties the finalizers of an object being
// deleted, else a compare-and-swap write at cur's revision. It returns the
// result at the request version, or errStale when the CAS lost. obj is
// admitted decoded (it may be changed).
func (a *Server) commitUpdate(ctx context.Context, r *resource, cur *current, admitted []byte, obj object, p updateParams) ([]byte, error) {
	old := cur.obj
	newObj, admitted, err := a.setGeneration(r, admitted, obj, old, p.subresource)
	if err != nil {
		return nil, err
	}
	stored, err := a.convertOne(ctx, r, r.storageAPIVersion(), admitted)
	if err != nil {
		return nil, err
	}
	// Nothing changed at the storage version: no write, no new revision
	// (etcd3's GuaranteedUpdate compares with the stored data, so an
	// object stored at an older version is rewritten). Without a
	// conversion, newObj is stored decoded.
	var same bool
	if sameBytes(stored, admitted) {
		same, err = sameAsStored(newObj, cur.stored)
	} else {
		same, err = sameStored(stored, cur.stored)
	}
	if err != nil {
		return nil, err
	} else if same {
		return cur.reqJSON, nil
	}
	if _, deleting := objmeta.DeletionTimestamp(old); deleting && len(finalizers(newObj)) == 0 {
		if !p.dryRun {
			_, err := a.storage.Delete(ctx, &storagev1.DeleteRequest{Key: cur.key, PreconditionResourceVersion: cur.rv})
			if err != nil {
				err = storageErr(err, r.groupResource(), p.name)
				if apierrors.IsConflict(err) {
					return nil, errStale
				}
				if !apierrors.IsNotFound(err) {
					return nil, err
				}
			}
		}
		return admitted, nil
	}
	if p.dryRun {
		objmeta.SetResourceVersion(newObj, fmt.Sprint(cur.rv))
		return listing.EncodeObject(newObj)
	}
	resp, err := a.storage.Update(ctx, &storagev1.UpdateRequest{Key: cur.key, Object: stored, ExpectedResourceVersion: cur.rv})
	if err != nil {
		err = storageErr(err, r.groupResource(), p.name)
		if apierrors.IsConflict(err) {
			return nil, errStale
		}
		return nil, err
	}
	return a.readObject(ctx, r, resp.GetObject())
}

// setGeneration sets metadata.generation of an admitted update as
// upstream's strategies do, on the object as admission left it (pruned and
// defaulted, as upstream's decoder hands it to PrepareForUpdate): a status
// write keeps the generation; any other write increments it when anything
// outside metadata differs from the old object read back as upstream's
// storage decoder would (pruned and defaulted with the current schema).
// obj is admitted decoded; it is changed and returned with its encoding.
func (a *Server) setGeneration(r *resource, admitted []byte, obj, old object, sub string) (object, []byte, error) {
	gen := objmeta.Generation(old)
	if sub != "status" {
		base := deepCopyObject(old)
		if err := a.schemas.asDecoded(r, base); err != nil {
			return nil, nil, internalError(err)
		}
		if !reflect.DeepEqual(withoutMetadata(obj), withoutMetadata(base)) {
			gen++
		}
	}
	if cur := objmeta.Meta(obj)["generation"]; cur == gen {
		return obj, admitted, nil
	}
	objmeta.Meta(obj)["generation"] = gen
	data, err := listing.EncodeObject(obj)
	return obj, data, err
}

// withoutMetadata is obj without its metadata (a shallow copy).
func withoutMetadata(obj object) object {
	out := make(object, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// sameStored reports whether two stored objects are the same, ignoring
// metadata.resourceVersion.
func sameStored(a, b []byte) (bool, error) {
	x, err := listing.DecodeObject(a)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return sameAsStored(x, b)
}

// sameAsStored is sameStored of a decoded object and a stored one.
func sameAsStored(x object, b []byte) (bool, error) {
	y, err := listing.DecodeObject(b)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return sameObject(x, y), nil
}

// sameBytes reports whether a and b are the same bytes in memory (a value
// passed through unchanged), not merely equal.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameObject compares two decoded objects, ignoring
// metadata.resourceVersion.
func sameObject(a, b object) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok {
			return false
		}
		if k != "metadata" {
			if !reflect.DeepEqual(va, vb) {
				return false
			}
			continue
		}
		ma, _ := va.(map[string]any)
		mb, _ := vb.(map[string]any)
		if ma == nil || mb == nil {
			if !reflect.DeepEqual(va, vb) {
				return false
			}
			continue
		}
		n := 0
		for mk, mva := range ma {
			if mk == "resourceVersion" {
				continue
			}
			n++
			if mvb, ok := mb[mk]; !ok || !reflect.DeepEqual(mva, mvb) {
				return false
			}
		}
		if _, ok := mb["resourceVersion"]; ok {
			n++
		}
		if n != len(mb) {
			return false
		}
	}
	return true
}

func finalizers(obj object) []any {
	m, _ := obj["metadata"].(map[string]any)
	f, _ := m["finalizers"].([]any)
	return f
}

func (a *Server) Patch(ctx context.Context, req *gatewayv1.PatchRequest, opts *metav1.PatchOptions, pt string, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	ns, name, sub := req.GetNamespace(), req.GetName(), req.GetSubresource()
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), ns, scopeObject)
	if err != nil {
		return nil, err
	}
	if err := checkSubresource(r, sub, name); err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, r.warnings...)
	if sub == "scale" {
		if pt == patch.ApplyYAML {
			doc, err := a.crApply(ctx, r, req, opts)
			if err != nil {
				return nil, err
			}
			return out.Body(doc), nil
		}
		doc, err := a.scalePatch(ctx, r, ns, name, pt, req.GetBody().GetData(), updateParams{
			name: name, dryRun: isDryRun(opts.DryRun), fieldValidation: opts.FieldValidation,
			fieldManager: opts.FieldManager, patch: true,
		})
		if err != nil {
			return nil, err
		}
		return out.Body(doc), nil
	}
	if pt == patch.ApplyYAML {
		doc, err := a.crApply(ctx, r, req, opts)
		if err != nil {
			return nil, err
		}
		return out.Body(doc), nil
	}
	var strictErrs []error
	for attempt := 0; ; attempt++ {
		cur, err := a.readCurrent(ctx, r, ns, name)
		if err != nil {
			return nil, err
		}
		if attempt == 0 {
			// Decoded once the object is read, as upstream's patcher does
			// (a missing object is 404 whatever the body).
			if strictErrs, err = decodePatch(pt, req.GetBody().GetData(), opts.FieldValidation); err != nil {
				return nil, err
			}
		}
		patched, err := patch.Apply(cur.reqJSON, pt, req.GetBody().GetData())
		if err != nil {
			return nil, err
		}
		var quote []byte
		quoted := func() []byte {
			if quote == nil {
				quote = patchedQuote(cur.obj, pt, req.GetBody().GetData(), patched)
			}
			return quote
		}
		// The patched object decoded as upstream's patcher decodes it
		// before the update: an object it cannot decode is its 422; its
		// strict errors follow the patch's own.
		decodeErrs, err := a.decodePatched(r, patched, opts.FieldValidation, quoted)
		if apierrors.IsInternalError(err) {
			return nil, err // the CRD's schema is over the compiled-schema budget
		}
		if err != nil {
			return nil, patchInvalid(quoted(), decodeErrorText(err))
		}
		if attempt == 0 {
			if err := patchStrictErrors(ctx, opts.FieldValidation, append(strictErrs, decodeErrs...), quoted); err != nil {
				return nil, err
			}
		}
		obj, err := listing.DecodeObject(patched)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the patched object is not a JSON object: %v", err))
		}
		if err := checkNameAndNamespace(obj, ns, name, r.namespaced); err != nil {
			return nil, err
		}
		rv, err := resourceVersion(obj)
		if err != nil {
			return nil, err
		}
		// A patch that sets a resourceVersion is a precondition.
		pinned := rv != 0 && rv != cur.rv
		if pinned {
			return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
		}
		patchPinsRV := patchMentionsResourceVersion(req.GetBody().GetData())
		// The directive applied to the patched object above (its unknown
		// fields are pruned in admission, not reported twice).
		result, err := a.applyUpdate(ctx, r, cur, obj, updateParams{
			name: name, subresource: sub, dryRun: isDryRun(opts.DryRun), fieldValidation: metav1.FieldValidationIgnore,
			fieldManager: opts.FieldManager, patch: true,
		})
		if errors.Is(err, errStale) {
			if patchPinsRV || !retryStale(ctx) {
				return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return out.Body(result), nil
	}
}

// patchMentionsResourceVersion reports whether a patch body names a
// resourceVersion (then a lost race is a conflict, not a retry).
func patchMentionsResourceVersion(p []byte) bool {
	return bytesContains(p, `"resourceVersion"`)
}
