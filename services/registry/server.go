package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/fieldmanager"
	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// server implements registryv1.RegistryServiceServer.
type server struct {
	registryv1.UnimplementedRegistryServiceServer
	st        *store
	inf       *informer
	discovery *discoveryIndex
	// checks runs the validator's CRD checks (nil: none configured).
	checks schemaChecks
	log    *slog.Logger
}

// Create validates and stores a new CRD.
func (s *server) Create(ctx context.Context, req *registryv1.CreateRequest) (*registryv1.CreateResponse, error) {
	crd, warnings, err := decodeCRD(req.GetObject(), req.GetOptions().GetFieldValidation())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if crd, err = trackUpdate(nil, crd, "", managerOf(req.GetOptions())); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	out, more, err := s.create(ctx, crd, req.GetOptions().GetDryRun())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := encodeCRD(out)
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
	}
	return &registryv1.CreateResponse{Object: data, Warnings: append(warnings, more...)}, nil
}

// managerOf is the field manager of a write (the fieldManager parameter,
// else derived from the User-Agent).
func managerOf(opts *registryv1.WriteOptions) string {
	return fieldmanager.Name(opts.GetFieldManager(), opts.GetUserAgent())
}

// create prepares, validates and (unless dryRun) stores a new CRD (as
// decoded, managedFields recorded).
func (s *server) create(ctx context.Context, crd *CRD, dryRun bool) (*CRD, []string, error) {
	sentRV := crd.ResourceVersion
	if err := prepareForCreate(crd); err != nil {
		return nil, nil, err
	}
	warnings, err := validateCRDWithWarnings(ctx, s.checks, crd, nil)
	if err != nil {
		return nil, nil, err
	}
	// v1.33's CRD strategy has no warnings of its own (WarningsOnCreate
	// is nil: no "unrecognized format", no set-of-objects warning, which
	// came in later versions).
	out := crd
	if dryRun {
		// a dry run still finds an existing CRD
		if _, err := s.st.get(ctx, crd.Name); err == nil {
			return nil, nil, apierrors.NewAlreadyExists(crdGR, crd.Name)
		} else if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
	} else {
		if sentRV != "" && sentRV != "0" {
			return nil, nil, errResourceVersionOnCreate
		}
		if out, err = s.st.create(ctx, crd); err != nil {
			return nil, nil, err
		}
		s.inf.observe(out)
	}
	return out, warnings, nil
}

// errResourceVersionOnCreate is what kube-apiserver answers (a 500 without
// a reason, from its storage layer) to a create that names a
// resourceVersion.
var errResourceVersionOnCreate = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status:  metav1.StatusFailure,
	Code:    http.StatusInternalServerError,
	Reason:  metav1.StatusReasonUnknown,
	Message: "resourceVersion should not be set on objects to be created",
}}

// Get reads one CRD.
func (s *server) Get(ctx context.Context, req *registryv1.GetRequest) (*registryv1.GetResponse, error) {
	crd, err := s.st.get(ctx, req.GetName())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := encodeCRD(crd)
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
	}
	return &registryv1.GetResponse{Object: data}, nil
}

// List reads CRDs, filtered and paginated by the storage.
func (s *server) List(ctx context.Context, req *registryv1.ListRequest) (*registryv1.ListResponse, error) {
	resp, err := s.st.client.List(ctx, &storagev1.ListRequest{Prefix: crdPrefix, Options: req.GetOptions()})
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

// Update replaces a CRD or its status.
func (s *server) Update(ctx context.Context, req *registryv1.UpdateRequest) (*registryv1.UpdateResponse, error) {
	if err := checkSubresource(req.GetSubresource()); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	crd, warnings, err := decodeCRD(req.GetObject(), req.GetOptions().GetFieldValidation())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if err := checkName(crd, req.GetName()); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	cur, err := s.st.get(ctx, req.GetName())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if crd, err = trackUpdate(cur, crd, req.GetSubresource(), managerOf(req.GetOptions())); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	out, more, err := s.update(ctx, crd, cur, req.GetSubresource(), req.GetOptions().GetDryRun())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	data, err := encodeCRD(out)
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
	}
	return &registryv1.UpdateResponse{Object: data, Warnings: append(warnings, more...)}, nil
}

// Patch applies a merge or JSON patch to a CRD or its status, starting over
// when another writer got in first (unless the patch names the
// resourceVersion it applies to).
func (s *server) Patch(ctx context.Context, req *registryv1.PatchRequest) (*registryv1.PatchResponse, error) {
	if err := checkSubresource(req.GetSubresource()); err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	if req.GetPatchType() == applyPatchType {
		return s.apply(ctx, req)
	}
	pinned := patchSetsResourceVersion(req.GetPatchType(), req.GetPatch())
	for attempt := 0; ; attempt++ {
		cur, err := s.st.get(ctx, req.GetName())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		original, err := encodeCRD(cur)
		if err != nil {
			return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
		}
		strictErrs, err := decodePatch(req.GetPatchType(), req.GetPatch(), req.GetOptions().GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		patched, err := applyPatch(original, req.GetPatchType(), req.GetPatch())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		patchWarnings, err := patchStrictErrors(req.GetOptions().GetFieldValidation(), strictErrs, patched)
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		crd, warnings, err := decodeCRD(patched, req.GetOptions().GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		warnings = append(patchWarnings, warnings...)
		if err := checkName(crd, req.GetName()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if crd, err = trackUpdate(cur, crd, req.GetSubresource(), managerOf(req.GetOptions())); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		out, more, err := s.update(ctx, crd, cur, req.GetSubresource(), req.GetOptions().GetDryRun())
		if apierrors.IsConflict(err) && !pinned && attempt < maxCASRetries {
			continue
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := encodeCRD(out)
		if err != nil {
			return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
		}
		return &registryv1.PatchResponse{Object: data, Warnings: append(warnings, more...)}, nil
	}
}

// apply is a server-side apply of a CRD or its status: merged into the
// stored CRD by the field manager (a CRD that does not exist is created
// from the apply, as upstream; its status is not), then written as an
// update (or a create), starting over when another writer got in first
// unless the apply names a resourceVersion.
func (s *server) apply(ctx context.Context, req *registryv1.PatchRequest) (*registryv1.PatchResponse, error) {
	opts := req.GetOptions()
	for attempt := 0; ; attempt++ {
		cur, err := s.st.get(ctx, req.GetName())
		if err != nil && (!apierrors.IsNotFound(err) || req.GetSubresource() != "") {
			return nil, kstatus.ToGRPC(err)
		}
		crd, warnings, err := applyCRD(cur, req.GetPatch(), req.GetSubresource(), opts.GetFieldManager(), opts.GetForce(), opts.GetFieldValidation())
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		if err := checkName(crd, req.GetName()); err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		var out *CRD
		var more []string
		if cur == nil {
			out, more, err = s.create(ctx, crd, opts.GetDryRun())
			if apierrors.IsAlreadyExists(err) && attempt < maxCASRetries {
				continue
			}
		} else {
			pinned := crd.ResourceVersion != cur.ResourceVersion
			out, more, err = s.update(ctx, crd, cur, req.GetSubresource(), opts.GetDryRun())
			if apierrors.IsConflict(err) && !pinned && attempt < maxCASRetries {
				continue
			}
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := encodeCRD(out)
		if err != nil {
			return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
		}
		return &registryv1.PatchResponse{Object: data, Warnings: append(warnings, more...), Created: cur == nil}, nil
	}
}

// update applies an update of crd (as sent) over cur (as stored): the
// resourceVersion check, the strategy, validation, and the write.
func (s *server) update(ctx context.Context, crd, cur *CRD, subresource string, dryRun bool) (*CRD, []string, error) {
	if crd.ResourceVersion == "" || crd.ResourceVersion == "0" {
		// upstream's generic store: the resource as the kind, the value a uint64 (0x0)
		return nil, nil, fielderr.NewInvalid(schema.GroupKind{Group: crdGR.Group, Kind: crdGR.Resource}, crd.Name, field.ErrorList{
			field.Invalid(field.NewPath("metadata").Child("resourceVersion"), uint64(0), "must be specified for an update"),
		})
	}
	if _, err := strconv.ParseUint(crd.ResourceVersion, 10, 64); err != nil {
		return nil, nil, fielderr.NewInvalid(schema.GroupKind{Group: crdGR.Group, Kind: crdGR.Resource}, crd.Name, field.ErrorList{
			field.Invalid(field.NewPath("resourceVersion"), crd.ResourceVersion, err.Error()),
		})
	}
	if crd.ResourceVersion != cur.ResourceVersion {
		return nil, nil, errConflict(crd.Name)
	}
	var warnings []string
	if subresource == "status" {
		prepareForStatusUpdate(crd, cur)
		if err := validateCRDStatusUpdate(ctx, crd, cur); err != nil {
			return nil, nil, err
		}
	} else {
		prepareForUpdate(crd, cur)
		more, err := validateCRDWithWarnings(ctx, s.checks, crd, cur)
		if err != nil {
			return nil, nil, err
		}
		// v1.33's CRD strategy has no warnings (WarningsOnUpdate is nil).
		warnings = append(warnings, more...)
	}
	if dryRun {
		return crd, warnings, nil
	}
	out, err := s.st.write(ctx, crd, cur)
	if err != nil {
		return nil, nil, err
	}
	s.inf.observe(out)
	return out, warnings, nil
}

// Delete marks a CRD for deletion (the finalizer then removes its objects
// and the CRD), or deletes it when that already happened and no finalizer
// is left.
func (s *server) Delete(ctx context.Context, req *registryv1.DeleteRequest) (*registryv1.DeleteResponse, error) {
	for attempt := 0; ; attempt++ {
		out, err := s.deleteOnce(ctx, req)
		if apierrors.IsConflict(err) && errors.Is(err, errLostRace) && attempt < maxCASRetries {
			continue
		}
		if err != nil {
			return nil, kstatus.ToGRPC(err)
		}
		data, err := encodeCRD(out)
		if err != nil {
			return nil, kstatus.ToGRPC(apierrors.NewInternalError(err))
		}
		return &registryv1.DeleteResponse{Object: data}, nil
	}
}

// errLostRace marks a compare-and-swap conflict (as opposed to a failed
// precondition) so that Delete starts over.
var errLostRace = errors.New("lost a compare-and-swap race")

type lostRace struct{ error }

func (l lostRace) Unwrap() []error { return []error{l.error, errLostRace} }

func (s *server) deleteOnce(ctx context.Context, req *registryv1.DeleteRequest) (*CRD, error) {
	name := req.GetName()
	cur, err := s.st.get(ctx, name)
	if err != nil {
		return nil, err
	}
	if uid := req.GetPreconditionUid(); uid != "" && uid != string(cur.UID) {
		return nil, apierrors.NewConflict(crdGR, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, cur.UID))
	}
	if rv := req.GetPreconditionResourceVersion(); rv != "" && rv != cur.ResourceVersion {
		return nil, apierrors.NewConflict(crdGR, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", rv, cur.ResourceVersion))
	}
	rv, err := resourceVersion(cur)
	if err != nil {
		return nil, err
	}
	if cur.DeletionTimestamp == nil {
		crd := cur.DeepCopy()
		markForDeletion(crd)
		if req.GetDryRun() {
			return crd, nil
		}
		out, err := s.st.update(ctx, crd, rv)
		if apierrors.IsConflict(err) {
			return nil, lostRace{err}
		}
		if err != nil {
			return nil, err
		}
		s.inf.observe(out)
		return out, nil
	}
	// already marked: finalizers hold it, or nothing does any more
	if len(cur.Finalizers) > 0 {
		// upstream's generic store (markAsDeleting): a CRD that finalizers
		// hold gets deletionGracePeriodSeconds 0
		if g := cur.DeletionGracePeriodSeconds; g != nil && *g == 0 {
			return cur, nil
		}
		crd := cur.DeepCopy()
		var zero int64
		crd.DeletionGracePeriodSeconds = &zero
		if req.GetDryRun() {
			return crd, nil
		}
		out, err := s.st.update(ctx, crd, rv)
		if apierrors.IsConflict(err) {
			return nil, lostRace{err}
		}
		if err != nil {
			return nil, err
		}
		s.inf.observe(out)
		return out, nil
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

// Watch follows CRD changes from the storage's watch.
func (s *server) Watch(req *registryv1.WatchRequest, stream registryv1.RegistryService_WatchServer) error {
	return relayWatch(s.st.client, &storagev1.WatchRequest{
		Prefix:            crdPrefix,
		ResourceVersion:   req.GetResourceVersion(),
		LabelSelector:     req.GetLabelSelector(),
		FieldSelector:     req.GetFieldSelector(),
		SendInitialEvents: req.GetSendInitialEvents(),
		AllowBookmarks:    req.GetAllowBookmarks(),
	}, stream)
}

// GetDiscovery renders a discovery document.
func (s *server) GetDiscovery(ctx context.Context, req *registryv1.GetDiscoveryRequest) (*registryv1.GetDiscoveryResponse, error) {
	// right after start, wait a little for the first view of the CRDs
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.inf.waitSynced(wctx); err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewServiceUnavailable("the CRD cache is not synced yet"))
	}
	var ct string
	var doc document
	var err error
	if req.GetCore() {
		ct, doc, err = coreDocument(req.GetVersion(), req.GetAccept())
	} else {
		ct, doc, err = s.discovery.document(req.GetGroup(), req.GetVersion(), req.GetAccept())
	}
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	return &registryv1.GetDiscoveryResponse{ContentType: ct, Body: doc.body, Etag: doc.etag}, nil
}

func checkSubresource(sub string) error {
	if sub == "" || sub == "status" {
		return nil
	}
	return notFoundResource()
}

// notFoundResource is upstream's 404 for a path it does not serve, marked
// as such (the gateway answers it as net/http's "404 page not found").
func notFoundResource() error {
	return kstatus.NewPageNotFound("the server could not find the requested resource")
}

// checkName makes the object's name agree with the request's.
func checkName(crd *CRD, name string) error {
	crd.Namespace = ""
	switch crd.Name {
	case name:
		return nil
	case "":
		crd.Name = name
		return nil
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", crd.Name, name))
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
