package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/patch"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// rbacServer implements registryv1.RBACServiceServer: kube-apiserver's
// registries of the four rbac.authorization.k8s.io/v1 kinds (strategy,
// validation, the generic store's create, update, patch and delete) over
// the storage service. Escalation checks are the gateway's.
type rbacServer struct {
	registryv1.UnimplementedRBACServiceServer
	client storagev1.StorageServiceClient
	log    *slog.Logger
	// group is the group of the kinds served (rbac.authorization.k8s.io
	// when empty; apiregistration.k8s.io for the APIRegistrationService).
	group string
}

// target resolves a request's kind and namespace: a kind of the server's
// group; a namespaced kind needs a namespace for a single object; a
// cluster-scoped kind has none.
func (s *rbacServer) target(t *registryv1.RBACTarget, needNamespace bool) (*rbacKind, string, error) {
	k, err := rbacKindOf(t.GetResource())
	if err != nil {
		return nil, "", err
	}
	group := s.group
	if group == "" {
		group = rbacv1.GroupName
	}
	if k.gr().Group != group {
		return nil, "", notFoundResource()
	}
	ns := t.GetNamespace()
	if !k.namespaced {
		ns = ""
	} else if needNamespace && ns == "" {
		return nil, "", apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return k, ns, nil
}

func (s *rbacServer) storageErr(k *rbacKind, err error, name string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch e := storageError(err, name); {
	case apierrors.IsNotFound(e):
		return apierrors.NewNotFound(k.gr(), name)
	case apierrors.IsAlreadyExists(e):
		return apierrors.NewAlreadyExists(k.gr(), name)
	case apierrors.IsConflict(e):
		return apierrors.NewConflict(k.gr(), name, errors.New(registryModifiedMsg))
	default:
		return e
	}
}

func (s *rbacServer) get(ctx context.Context, k *rbacKind, ns, name string) (rbacObject, error) {
	resp, err := s.client.Get(ctx, &storagev1.GetRequest{Key: k.key(ns, name)})
	if err != nil {
		return nil, s.storageErr(k, err, name)
	}
	return k.decodeStored(resp.GetObject(), resp.GetResourceVersion())
}

func forStorage(k *rbacKind, obj rbacObject) ([]byte, error) {
	c, _ := obj.DeepCopyObject().(rbacObject)
	c.SetResourceVersion("")
	return k.encode(c)
}

func objectRV(k *rbacKind, obj rbacObject) (int64, error) {
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, apierrors.NewInternalError(fmt.Errorf("stored %s %s has resourceVersion %q: %w", k.kind, obj.GetName(), obj.GetResourceVersion(), err))
	}
	return rv, nil
}

func (s *rbacServer) reply(k *rbacKind, obj rbacObject) ([]byte, error) {
	data, err := k.encode(obj)
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
	}
	return data, nil
}

// checkObjectTarget makes the object's namespace and name agree with the
// request's, as upstream's handlers (the path's namespace fills an empty
// one; a different one is 400) and EnsureObjectNamespaceMatchesRequestNamespace.
func checkObjectTarget(k *rbacKind, obj rbacObject, ns, name string) error {
	if k.namespaced {
		switch obj.GetNamespace() {
		case ns:
		case "":
			obj.SetNamespace(ns)
		default:
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		obj.SetNamespace("")
	}
	if name == "" {
		return nil
	}
	switch obj.GetName() {
	case name:
		return nil
	case "":
		obj.SetName(name)
		return nil
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), name))
}

// Create validates and stores a new object.
func (s *rbacServer) Create(ctx context.Context, r *registryv1.RBACServiceCreateRequest) (*registryv1.CreateResponse, error) {
	k, ns, err := s.target(r.GetTarget(), true)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	req := r.GetRequest()
	obj, warnings, err := k.decode(req.GetObject(), req.GetOptions().GetFieldValidation())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if err := checkObjectTarget(k, obj, ns, ""); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if obj, err = k.trackUpdate(nil, obj, managerOf(req.GetOptions())); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	out, err := s.create(ctx, k, obj, req.GetOptions().GetDryRun())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := s.reply(k, out)
	if err != nil {
		return nil, err
	}
	return &registryv1.CreateResponse{Object: data, Warnings: warnings}, nil
}

func (s *rbacServer) create(ctx context.Context, k *rbacKind, obj rbacObject, dryRun bool) (rbacObject, error) {
	sentRV := obj.GetResourceVersion()
	if err := prepareRBACCreate(k, obj); err != nil {
		return nil, err
	}
	if k.status != nil {
		k.status.prepareCreate(obj)
	}
	if err := k.validateCreate(obj); err != nil {
		return nil, err
	}
	if dryRun {
		if _, err := s.get(ctx, k, obj.GetNamespace(), obj.GetName()); err == nil {
			return nil, apierrors.NewAlreadyExists(k.gr(), obj.GetName())
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		return obj, nil
	}
	if sentRV != "" && sentRV != "0" {
		return nil, errResourceVersionOnCreate
	}
	data, err := forStorage(k, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	resp, err := s.client.Create(ctx, &storagev1.CreateRequest{Key: k.key(obj.GetNamespace(), obj.GetName()), Object: data})
	if err != nil {
		return nil, s.storageErr(k, err, obj.GetName())
	}
	return k.decodeStored(resp.GetObject(), resp.GetResourceVersion())
}

// prepareRBACCreate sets the system metadata of a new object as
// BeforeCreate (uid, creationTimestamp, generateName; the RBAC kinds have
// no generation).
func prepareRBACCreate(k *rbacKind, obj rbacObject) error {
	m := accessorMeta(obj)
	mm, err := metaMap(m)
	if err != nil {
		return err
	}
	o := objmeta.Object{"metadata": mm}
	if err := objmeta.CheckNameAndNamespace(o, obj.GetNamespace(), "", k.namespaced); err != nil {
		return err
	}
	objmeta.PrepareCreate(o, now().Time, false)
	delete(objmeta.Meta(o), "generation")
	return setMetaMap(m, objmeta.Meta(o))
}

// accessorMeta is the ObjectMeta of a typed RBAC object.
func accessorMeta(obj rbacObject) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *rbacv1.Role:
		return &o.ObjectMeta
	case *rbacv1.ClusterRole:
		return &o.ObjectMeta
	case *rbacv1.RoleBinding:
		return &o.ObjectMeta
	case *rbacv1.ClusterRoleBinding:
		return &o.ObjectMeta
	case *apiregistrationv1.APIService:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("not an RBAC object: %T", obj))
}

// statusTarget reports whether a write's subresource is the kind's status;
// another subresource is upstream's 404.
func statusTarget(k *rbacKind, sub string) (bool, error) {
	switch {
	case sub == "":
		return false, nil
	case sub == "status" && k.status != nil:
		return true, nil
	}
	return false, notFoundResource()
}

// track records a write's managedFields, of the status subresource when
// status is set.
func (k *rbacKind) track(status bool, cur, obj rbacObject, manager string) (rbacObject, error) {
	if status {
		return k.trackStatusUpdate(cur, obj, manager)
	}
	return k.trackUpdate(cur, obj, manager)
}

// Get reads one object.
func (s *rbacServer) Get(ctx context.Context, r *registryv1.RBACServiceGetRequest) (*registryv1.GetResponse, error) {
	k, ns, err := s.target(r.GetTarget(), true)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	obj, err := s.get(ctx, k, ns, r.GetRequest().GetName())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := s.reply(k, obj)
	if err != nil {
		return nil, err
	}
	return &registryv1.GetResponse{Object: data}, nil
}

// rbacFieldSelector checks a field selector on RBAC objects: the default
// field labels (metadata.name, metadata.namespace); anything else is 400.
func rbacFieldSelector(sel string) (string, error) {
	if sel == "" {
		return sel, nil
	}
	fs, err := fields.ParseSelector(sel)
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	fs, err = fs.Transform(func(f, v string) (string, string, error) {
		switch f {
		case "metadata.name", "metadata.namespace":
			return f, v, nil
		}
		return "", "", fmt.Errorf("%q is not a known field selector: only %q, %q", f, "metadata.name", "metadata.namespace")
	})
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	return fs.String(), nil
}

// List reads objects, filtered and paginated by the storage.
func (s *rbacServer) List(ctx context.Context, r *registryv1.RBACServiceListRequest) (*registryv1.ListResponse, error) {
	k, ns, err := s.target(r.GetTarget(), false)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	opts := &commonv1.ListOptions{}
	if o := r.GetRequest().GetOptions(); o != nil {
		opts = cloneListOptions(o)
	}
	if opts.FieldSelector, err = rbacFieldSelector(opts.GetFieldSelector()); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	resp, err := s.client.List(ctx, &storagev1.ListRequest{Prefix: k.prefix(ns), Options: opts})
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	return &registryv1.ListResponse{
		Objects:            resp.GetObjects(),
		ResourceVersion:    resp.GetResourceVersion(),
		ContinueToken:      resp.GetContinueToken(),
		RemainingItemCount: resp.RemainingItemCount,
	}, nil
}

// Update replaces an object.
func (s *rbacServer) Update(ctx context.Context, r *registryv1.RBACServiceUpdateRequest) (*registryv1.UpdateResponse, error) {
	k, ns, err := s.target(r.GetTarget(), true)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	req := r.GetRequest()
	status, err := statusTarget(k, req.GetSubresource())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	obj, warnings, err := k.decode(req.GetObject(), req.GetOptions().GetFieldValidation())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if err := checkObjectTarget(k, obj, ns, req.GetName()); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	cur, err := s.get(ctx, k, ns, req.GetName())
	if apierrors.IsNotFound(err) && !k.strict && !status {
		// AllowCreateOnUpdate, as the RBAC strategies
		if obj, err = k.trackUpdate(nil, obj, managerOf(req.GetOptions())); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		obj.SetResourceVersion("")
		out, err := s.create(ctx, k, obj, req.GetOptions().GetDryRun())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := s.reply(k, out)
		if err != nil {
			return nil, err
		}
		return &registryv1.UpdateResponse{Object: data, Warnings: warnings, Created: true}, nil
	}
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if obj, err = k.track(status, cur, obj, managerOf(req.GetOptions())); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	out, err := s.update(ctx, k, obj, cur, req.GetOptions().GetDryRun(), status)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := s.reply(k, out)
	if err != nil {
		return nil, err
	}
	return &registryv1.UpdateResponse{Object: data, Warnings: warnings}, nil
}

// update applies an update of obj (as sent) over cur (as stored): the
// resourceVersion check (the RBAC kinds allow unconditional updates), the
// generic metadata rules, validation and the write.
func (s *rbacServer) update(ctx context.Context, k *rbacKind, obj, cur rbacObject, dryRun, status bool) (rbacObject, error) {
	switch rv := obj.GetResourceVersion(); rv {
	case "", "0":
		if k.strict {
			return nil, fielderr.NewInvalid(k.gk(), obj.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("metadata").Child("resourceVersion"), uint64(0), "must be specified for an update"),
			})
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
	default:
		if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
			return nil, fielderr.NewInvalid(k.gk(), obj.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("resourceVersion"), rv, err.Error()),
			})
		}
		if rv != cur.GetResourceVersion() {
			return nil, apierrors.NewConflict(k.gr(), obj.GetName(), errors.New(registryModifiedMsg))
		}
	}
	if obj.GetUID() == "" {
		obj.SetUID(cur.GetUID())
	}
	obj.SetCreationTimestamp(cur.GetCreationTimestamp())
	obj.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	obj.SetGeneration(cur.GetGeneration())
	if obj.GetDeletionGracePeriodSeconds() == nil {
		obj.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	}
	switch {
	case status:
		k.status.keepSpec(obj, cur)
		if err := k.validateStatusUpdateOf(obj, cur); err != nil {
			return nil, err
		}
	default:
		if k.status != nil {
			k.status.keepStatus(obj, cur)
		}
		if err := k.validateUpdateOf(obj, cur); err != nil {
			return nil, err
		}
	}
	if dryRun {
		return obj, nil
	}
	if apiequality.Semantic.DeepEqual(obj, cur) {
		return cur, nil
	}
	rv, err := objectRV(k, cur)
	if err != nil {
		return nil, err
	}
	if cur.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
		return s.remove(ctx, k, cur, rv)
	}
	data, err := forStorage(k, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	resp, err := s.client.Update(ctx, &storagev1.UpdateRequest{Key: k.key(obj.GetNamespace(), obj.GetName()), Object: data, ExpectedResourceVersion: rv})
	if err != nil {
		return nil, s.storageErr(k, err, obj.GetName())
	}
	return k.decodeStored(resp.GetObject(), resp.GetResourceVersion())
}

func (s *rbacServer) remove(ctx context.Context, k *rbacKind, obj rbacObject, rv int64) (rbacObject, error) {
	resp, err := s.client.Delete(ctx, &storagev1.DeleteRequest{Key: k.key(obj.GetNamespace(), obj.GetName()), PreconditionUid: string(obj.GetUID()), PreconditionResourceVersion: rv})
	if err != nil {
		return nil, s.storageErr(k, err, obj.GetName())
	}
	return k.decodeStored(resp.GetObject(), 0)
}

// applyPatchTo applies a JSON, merge or strategic merge patch to the JSON
// of an object of the kind.
func applyPatchTo(k *rbacKind, original []byte, patchType string, body []byte) ([]byte, error) {
	if patch.Type(patchType) != patch.StrategicMerge {
		return patch.Apply(original, patchType, body)
	}
	var patchMap map[string]any
	if err := json.Unmarshal(body, &patchMap); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var originalMap map[string]any
	if err := json.Unmarshal(original, &originalMap); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, err := strategicMergeCRD(originalMap, patchMap, k.newObject())
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Patch applies a JSON, merge or strategic merge patch, or a server-side
// apply, starting over when another writer got in first (unless the patch
// names a resourceVersion).
func (s *rbacServer) Patch(ctx context.Context, r *registryv1.RBACServicePatchRequest) (*registryv1.PatchResponse, error) {
	k, ns, err := s.target(r.GetTarget(), true)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	req := r.GetRequest()
	status, err := statusTarget(k, req.GetSubresource())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if req.GetPatchType() == applyPatchType {
		return s.apply(ctx, k, ns, req, status)
	}
	opts := req.GetOptions()
	pinned := patchSetsResourceVersion(req.GetPatchType(), req.GetPatch())
	for attempt := 0; ; attempt++ {
		cur, err := s.get(ctx, k, ns, req.GetName())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		original, err := k.encode(cur)
		if err != nil {
			return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
		}
		strictErrs, err := decodePatch(req.GetPatchType(), req.GetPatch(), opts.GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		patched, err := applyPatchTo(k, original, req.GetPatchType(), req.GetPatch())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		patchWarnings, err := patchStrictErrors(opts.GetFieldValidation(), strictErrs, patched)
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		obj, warnings, err := k.decode(patched, opts.GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if err := checkObjectTarget(k, obj, ns, req.GetName()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if obj, err = k.track(status, cur, obj, managerOf(opts)); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		out, err := s.update(ctx, k, obj, cur, opts.GetDryRun(), status)
		if apierrors.IsConflict(err) && !pinned && attempt < maxCASRetries {
			continue
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := s.reply(k, out)
		if err != nil {
			return nil, err
		}
		return &registryv1.PatchResponse{Object: data, Warnings: append(patchWarnings, warnings...)}, nil
	}
}

func (s *rbacServer) apply(ctx context.Context, k *rbacKind, ns string, req *registryv1.PatchRequest, status bool) (*registryv1.PatchResponse, error) {
	opts := req.GetOptions()
	for attempt := 0; ; attempt++ {
		cur, err := s.get(ctx, k, ns, req.GetName())
		if err != nil && (status || !apierrors.IsNotFound(err)) {
			return nil, kstatus.ToGRPC(err)
		}
		obj, warnings, err := k.apply(cur, req.GetPatch(), opts.GetFieldManager(), opts.GetForce(), opts.GetFieldValidation(), status)
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if err := checkObjectTarget(k, obj, ns, req.GetName()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		var out rbacObject
		if cur == nil {
			out, err = s.create(ctx, k, obj, opts.GetDryRun())
			if apierrors.IsAlreadyExists(err) && attempt < maxCASRetries {
				continue
			}
		} else {
			pinned := obj.GetResourceVersion() != cur.GetResourceVersion()
			if !pinned {
				obj.SetResourceVersion(cur.GetResourceVersion())
			}
			out, err = s.update(ctx, k, obj, cur, opts.GetDryRun(), status)
			if apierrors.IsConflict(err) && !pinned && attempt < maxCASRetries {
				continue
			}
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := s.reply(k, out)
		if err != nil {
			return nil, err
		}
		return &registryv1.PatchResponse{Object: data, Warnings: warnings, Created: cur == nil}, nil
	}
}

// Delete is the generic store's delete: preconditions, then the object is
// removed, or marked (deletionTimestamp) while metadata finalizers hold it.
func (s *rbacServer) Delete(ctx context.Context, r *registryv1.RBACServiceDeleteRequest) (*registryv1.DeleteResponse, error) {
	k, ns, err := s.target(r.GetTarget(), true)
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	req := r.GetRequest()
	for attempt := 0; ; attempt++ {
		out, err := s.deleteOnce(ctx, k, ns, req)
		if apierrors.IsConflict(err) && errors.Is(err, errLostRace) && attempt < maxCASRetries {
			continue
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := s.reply(k, out)
		if err != nil {
			return nil, err
		}
		return &registryv1.DeleteResponse{Object: data}, nil
	}
}

func (s *rbacServer) deleteOnce(ctx context.Context, k *rbacKind, ns string, req *registryv1.DeleteRequest) (rbacObject, error) {
	name := req.GetName()
	cur, err := s.get(ctx, k, ns, name)
	if err != nil {
		return nil, err
	}
	if uid := req.GetPreconditionUid(); uid != "" && uid != string(cur.GetUID()) {
		return nil, apierrors.NewConflict(k.gr(), name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, cur.GetUID())) //nolint:staticcheck // upstream's message
	}
	if rv := req.GetPreconditionResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return nil, apierrors.NewConflict(k.gr(), name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", rv, cur.GetResourceVersion())) //nolint:staticcheck // upstream's message
	}
	rv, err := objectRV(k, cur)
	if err != nil {
		return nil, err
	}
	// the garbage collector's finalizers, as the options ask (upstream's
	// store, garbage collection on): an object left with finalizers is
	// marked, not removed
	if fins := deleteFinalizers(cur.GetFinalizers(), req); len(fins) > 0 {
		if cur.GetDeletionTimestamp() != nil && slices.Equal(fins, cur.GetFinalizers()) {
			return cur, nil
		}
		obj, _ := cur.DeepCopyObject().(rbacObject)
		obj.SetFinalizers(fins)
		if obj.GetDeletionTimestamp() == nil {
			t := now()
			obj.SetDeletionTimestamp(&t)
			var zero int64
			obj.SetDeletionGracePeriodSeconds(&zero)
		}
		if req.GetDryRun() {
			return obj, nil
		}
		data, err := forStorage(k, obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		resp, err := s.client.Update(ctx, &storagev1.UpdateRequest{Key: k.key(ns, name), Object: data, ExpectedResourceVersion: rv})
		if err != nil {
			err = s.storageErr(k, err, name)
			if apierrors.IsConflict(err) {
				return nil, lostRace{err}
			}
			return nil, err
		}
		return k.decodeStored(resp.GetObject(), resp.GetResourceVersion())
	}
	if req.GetDryRun() {
		return cur, nil
	}
	out, err := s.remove(ctx, k, cur, rv)
	if apierrors.IsConflict(err) {
		return nil, lostRace{err}
	}
	return out, err
}

// Watch follows the changes of a kind (in a namespace, or all) from the
// storage's watch.
func (s *rbacServer) Watch(r *registryv1.RBACServiceWatchRequest, stream registryv1.RBACService_WatchServer) error {
	k, ns, err := s.target(r.GetTarget(), false)
	if err != nil {
		return kstatus.ToGRPC(err)
	}
	req := r.GetRequest()
	sel, err := rbacFieldSelector(req.GetFieldSelector())
	if err != nil {
		return kstatus.ToGRPC(err)
	}
	return relayWatch(s.client, &storagev1.WatchRequest{
		Prefix:            k.prefix(ns),
		ResourceVersion:   req.GetResourceVersion(),
		LabelSelector:     req.GetLabelSelector(),
		FieldSelector:     sel,
		SendInitialEvents: req.GetSendInitialEvents(),
		AllowBookmarks:    req.GetAllowBookmarks(),
	}, stream)
}
