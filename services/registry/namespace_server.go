package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/patch"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"google.golang.org/protobuf/proto"
)

// nsServer implements registryv1.NamespaceServiceServer: kube-apiserver's
// namespace registry (strategy, validation, graceful deletion) over the
// storage service.
type nsServer struct {
	registryv1.UnimplementedNamespaceServiceServer
	st  *nsStore
	log *slog.Logger
}

func nsReply(ns *Namespace) ([]byte, error) {
	data, err := encodeNamespace(ns)
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
	}
	return data, nil
}

func checkNamespaceSubresource(sub string, allowed ...string) error {
	if sub == "" || slices.Contains(allowed, sub) {
		return nil
	}
	return notFoundResource()
}

// Create validates and stores a new namespace.
func (s *nsServer) Create(ctx context.Context, req *registryv1.CreateRequest) (*registryv1.CreateResponse, error) {
	ns, warnings, err := decodeNamespace(req.GetObject(), req.GetOptions().GetFieldValidation())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if ns, err = trackNamespaceUpdate(nil, ns, "", managerOf(req.GetOptions())); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	out, err := s.create(ctx, ns, req.GetOptions().GetDryRun())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := nsReply(out)
	if err != nil {
		return nil, err
	}
	return &registryv1.CreateResponse{Object: data, Warnings: warnings}, nil
}

func (s *nsServer) create(ctx context.Context, ns *Namespace, dryRun bool) (*Namespace, error) {
	sentRV := ns.ResourceVersion
	if err := prepareNamespaceCreate(ns); err != nil {
		return nil, err
	}
	if err := invalidNamespace(ns.Name, validateNamespaceCreate(ns)); err != nil {
		return nil, err
	}
	if dryRun {
		if _, err := s.st.get(ctx, ns.Name); err == nil {
			return nil, apierrors.NewAlreadyExists(nsGR, ns.Name)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
		return ns, nil
	}
	if sentRV != "" && sentRV != "0" {
		return nil, errResourceVersionOnCreate
	}
	return s.st.create(ctx, ns)
}

// Get reads one namespace.
func (s *nsServer) Get(ctx context.Context, req *registryv1.GetRequest) (*registryv1.GetResponse, error) {
	ns, err := s.st.get(ctx, req.GetName())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := nsReply(ns)
	if err != nil {
		return nil, err
	}
	return &registryv1.GetResponse{Object: data}, nil
}

// nsListOptions converts the field selector (core/v1's field labels) and
// adds the selectable status.phase.
func nsListOptions(o *commonv1.ListOptions) (*commonv1.ListOptions, error) {
	out := &commonv1.ListOptions{}
	if o != nil {
		out = cloneListOptions(o)
	}
	sel, err := namespaceFieldSelector(out.GetFieldSelector())
	if err != nil {
		return nil, err
	}
	out.FieldSelector = sel
	out.SelectableFields = nsSelectableFields
	return out, nil
}

func cloneListOptions(o *commonv1.ListOptions) *commonv1.ListOptions {
	out, _ := proto.Clone(o).(*commonv1.ListOptions)
	return out
}

// List reads namespaces, filtered and paginated by the storage.
func (s *nsServer) List(ctx context.Context, req *registryv1.ListRequest) (*registryv1.ListResponse, error) {
	opts, err := nsListOptions(req.GetOptions())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	resp, err := s.st.client.List(ctx, &storagev1.ListRequest{Prefix: nsPrefix, Options: opts})
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

// Update replaces a namespace, its status or its spec.finalizers
// (finalize).
func (s *nsServer) Update(ctx context.Context, req *registryv1.UpdateRequest) (*registryv1.UpdateResponse, error) {
	sub := req.GetSubresource()
	if err := checkNamespaceSubresource(sub, "status", "finalize"); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	ns, warnings, err := decodeNamespace(req.GetObject(), req.GetOptions().GetFieldValidation())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if err := checkNamespaceName(ns, req.GetName()); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	cur, err := s.st.get(ctx, req.GetName())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if ns, err = trackNamespaceUpdate(cur, ns, sub, managerOf(req.GetOptions())); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	out, err := s.update(ctx, ns, cur, sub, req.GetOptions().GetDryRun())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := nsReply(out)
	if err != nil {
		return nil, err
	}
	return &registryv1.UpdateResponse{Object: data, Warnings: warnings}, nil
}

func checkNamespaceName(ns *Namespace, name string) error {
	ns.Namespace = ""
	switch ns.Name {
	case name:
		return nil
	case "":
		ns.Name = name
		defaultNamespace(ns)
		return nil
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", ns.Name, name))
}

// update applies an update of ns (as sent) over cur (as stored): the
// resourceVersion check (namespaces allow unconditional updates), the
// strategy, validation and the write.
func (s *nsServer) update(ctx context.Context, ns, cur *Namespace, sub string, dryRun bool) (*Namespace, error) {
	switch ns.ResourceVersion {
	case "", "0":
		// AllowUnconditionalUpdate: the stored object's
		ns.ResourceVersion = cur.ResourceVersion
	default:
		if _, err := strconv.ParseUint(ns.ResourceVersion, 10, 64); err != nil {
			return nil, fielderr.NewInvalid(nsGK, ns.Name, field.ErrorList{
				field.Invalid(field.NewPath("resourceVersion"), ns.ResourceVersion, err.Error()),
			})
		}
		if ns.ResourceVersion != cur.ResourceVersion {
			return nil, apierrors.NewConflict(nsGR, ns.Name, errors.New(registryModifiedMsg))
		}
	}
	prepareNamespaceUpdate(ns, cur, sub)
	if err := invalidNamespace(ns.Name, validateNamespaceUpdate(ns, cur, sub)); err != nil {
		return nil, err
	}
	if dryRun {
		return ns, nil
	}
	if namespaceEqual(ns, cur) {
		// as upstream's storage: an update that changes nothing writes
		// nothing
		return cur, nil
	}
	out, err := s.st.write(ctx, ns, cur)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// nsPatchTypes are the patch types of namespaces (a built-in kind).
func nsApplyPatch(original []byte, patchType string, body []byte) ([]byte, error) {
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
	out, err := strategicMergeCRD(originalMap, patchMap, &corev1.Namespace{})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Patch applies a JSON, merge or strategic merge patch, or a server-side
// apply, to a namespace or its status, starting over when another writer
// got in first (unless the patch names a resourceVersion).
func (s *nsServer) Patch(ctx context.Context, req *registryv1.PatchRequest) (*registryv1.PatchResponse, error) {
	sub := req.GetSubresource()
	if err := checkNamespaceSubresource(sub, "status"); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	opts := req.GetOptions()
	if req.GetPatchType() == applyPatchType {
		return s.apply(ctx, req)
	}
	pinned := patchSetsResourceVersion(req.GetPatchType(), req.GetPatch())
	for attempt := 0; ; attempt++ {
		cur, err := s.st.get(ctx, req.GetName())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		original, err := encodeNamespace(cur)
		if err != nil {
			return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
		}
		strictErrs, err := decodePatch(req.GetPatchType(), req.GetPatch(), opts.GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		patched, err := nsApplyPatch(original, req.GetPatchType(), req.GetPatch())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		patchWarnings, err := patchStrictErrors(opts.GetFieldValidation(), strictErrs, patched)
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		ns, warnings, err := decodeNamespace(patched, opts.GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if err := checkNamespaceName(ns, req.GetName()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if ns, err = trackNamespaceUpdate(cur, ns, sub, managerOf(opts)); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		out, err := s.update(ctx, ns, cur, sub, opts.GetDryRun())
		if apierrors.IsConflict(err) && !pinned && attempt < maxCASRetries {
			continue
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := nsReply(out)
		if err != nil {
			return nil, err
		}
		return &registryv1.PatchResponse{Object: data, Warnings: append(patchWarnings, warnings...)}, nil
	}
}

func (s *nsServer) apply(ctx context.Context, req *registryv1.PatchRequest) (*registryv1.PatchResponse, error) {
	opts := req.GetOptions()
	for attempt := 0; ; attempt++ {
		cur, err := s.st.get(ctx, req.GetName())
		if err != nil && (!apierrors.IsNotFound(err) || req.GetSubresource() != "") {
			return nil, kstatus.ToGRPC(err)
		}
		ns, warnings, err := applyNamespace(cur, req.GetPatch(), req.GetSubresource(), opts.GetFieldManager(), opts.GetForce(), opts.GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if err := checkNamespaceName(ns, req.GetName()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		var out *Namespace
		if cur == nil {
			out, err = s.create(ctx, ns, opts.GetDryRun())
			if apierrors.IsAlreadyExists(err) && attempt < maxCASRetries {
				continue
			}
		} else {
			pinned := ns.ResourceVersion != cur.ResourceVersion
			if !pinned {
				ns.ResourceVersion = cur.ResourceVersion
			}
			out, err = s.update(ctx, ns, cur, req.GetSubresource(), opts.GetDryRun())
			if apierrors.IsConflict(err) && !pinned && attempt < maxCASRetries {
				continue
			}
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := nsReply(out)
		if err != nil {
			return nil, err
		}
		return &registryv1.PatchResponse{Object: data, Warnings: warnings, Created: cur == nil}, nil
	}
}

// Delete is kube-apiserver's namespace delete: the first delete marks the
// namespace (deletionTimestamp, phase Terminating, the orphan and
// foregroundDeletion finalizers as the options say) and returns it; while
// spec.finalizers hold it, later deletes return it as it is; once they are
// gone, the generic delete removes it (or marks it while metadata
// finalizers hold it).
func (s *nsServer) Delete(ctx context.Context, req *registryv1.DeleteRequest) (*registryv1.DeleteResponse, error) {
	for attempt := 0; ; attempt++ {
		out, err := s.deleteOnce(ctx, req)
		if errors.Is(err, errLostRace) && attempt < maxCASRetries {
			continue
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := nsReply(out)
		if err != nil {
			return nil, err
		}
		return &registryv1.DeleteResponse{Object: data}, nil
	}
}

func (s *nsServer) deleteOnce(ctx context.Context, req *registryv1.DeleteRequest) (*Namespace, error) {
	name := req.GetName()
	cur, err := s.st.get(ctx, name)
	if err != nil {
		return nil, err
	}
	if uid := req.GetPreconditionUid(); uid != "" && uid != string(cur.UID) {
		return nil, apierrors.NewConflict(nsGR, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, cur.UID)) //nolint:staticcheck // upstream's message
	}
	if rv := req.GetPreconditionResourceVersion(); rv != "" && rv != cur.ResourceVersion {
		return nil, apierrors.NewConflict(nsGR, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", rv, cur.ResourceVersion)) //nolint:staticcheck // upstream's message
	}
	rv, err := nsRV(cur)
	if err != nil {
		return nil, err
	}
	casWrite := func(ns *Namespace) (*Namespace, error) {
		if req.GetDryRun() {
			return ns, nil
		}
		out, err := s.st.write(ctx, ns, cur)
		if apierrors.IsConflict(err) {
			return nil, lostRace{err}
		}
		return out, err
	}
	if cur.DeletionTimestamp.IsZero() {
		ns := cur.DeepCopy()
		t := now()
		ns.DeletionTimestamp = &t
		ns.Status.Phase = corev1.NamespaceTerminating
		ns.Finalizers = deleteFinalizers(ns.Finalizers, req)
		return casWrite(ns)
	}
	if len(cur.Spec.Finalizers) != 0 {
		return cur, nil
	}
	if len(cur.Finalizers) > 0 {
		if g := cur.DeletionGracePeriodSeconds; g != nil && *g == 0 {
			return cur, nil
		}
		ns := cur.DeepCopy()
		var zero int64
		ns.DeletionGracePeriodSeconds = &zero
		return casWrite(ns)
	}
	if req.GetDryRun() {
		return cur, nil
	}
	out, err := s.st.remove(ctx, cur, rv)
	if apierrors.IsConflict(err) {
		return nil, lostRace{err}
	}
	return out, err
}

// deleteFinalizers sets the orphan and foregroundDeletion finalizers of a
// namespace's first delete as the options ask (orphanDependents first,
// then propagationPolicy; neither keeps what is there).
func deleteFinalizers(fins []string, req *registryv1.DeleteRequest) []string {
	has := func(f string) bool { return slices.Contains(fins, f) }
	orphan, foreground := has(metav1.FinalizerOrphanDependents), has(metav1.FinalizerDeleteDependents)
	switch {
	case req.OrphanDependents != nil:
		orphan, foreground = req.GetOrphanDependents(), !req.GetOrphanDependents()
	case req.GetPropagationPolicy() != "":
		orphan = req.GetPropagationPolicy() == string(metav1.DeletePropagationOrphan)
		foreground = req.GetPropagationPolicy() == string(metav1.DeletePropagationForeground)
	}
	if orphan == has(metav1.FinalizerOrphanDependents) && foreground == has(metav1.FinalizerDeleteDependents) {
		return fins
	}
	out := []string{}
	for _, f := range fins {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	return out
}

// Watch follows namespace changes from the storage's watch.
func (s *nsServer) Watch(req *registryv1.WatchRequest, stream registryv1.NamespaceService_WatchServer) error {
	sel, err := namespaceFieldSelector(req.GetFieldSelector())
	if err != nil {
		return kstatus.ToGRPC(err)
	}
	return relayWatch(s.st.client, &storagev1.WatchRequest{
		Prefix:            nsPrefix,
		ResourceVersion:   req.GetResourceVersion(),
		LabelSelector:     req.GetLabelSelector(),
		FieldSelector:     sel,
		SelectableFields:  nsSelectableFields,
		SendInitialEvents: req.GetSendInitialEvents(),
		AllowBookmarks:    req.GetAllowBookmarks(),
	}, stream)
}
