package cr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objmeta"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// DeleteOptions reads DeleteOptions from the body when there is one, else
// from the query (orphanDependents, which the rpcs do not carry, from the
// raw query), and validates them as kube-apiserver does.
func DeleteOptions(body []byte, query url.Values, dryRun []string, grace *int64, propagation string) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if len(body) > 0 {
		if err := decodeDeleteOptions(body, opts); err != nil {
			return nil, err
		}
	} else {
		opts.DryRun = dryRun
		opts.GracePeriodSeconds = grace
		if propagation != "" {
			pp := metav1.DeletionPropagation(propagation)
			opts.PropagationPolicy = &pp
		}
		if v, ok := query["orphanDependents"]; ok {
			// Upstream's parameter codec, with its boolean syntax.
			od := &metav1.DeleteOptions{}
			if err := metainternalversionscheme.ParameterCodec.DecodeParameters(url.Values{"orphanDependents": v}, metav1.SchemeGroupVersion, od); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			opts.OrphanDependents = od.OrphanDependents //nolint:staticcheck // upstream still honours it
		}
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	return opts, nil
}

// deleteOne deletes one custom resource as kube-apiserver's registry does
// for custom resources (no graceful deletion; garbage collection on): the
// DeleteOptions preconditions are checked first (409); the finalizers
// the garbage collector handles are set as the options say
// (gcFinalizers); an object left with finalizers is only marked (a
// deletionTimestamp, deletionGracePeriodSeconds 0, generation+1) and
// returned, otherwise it is removed and a Success Status naming it is
// returned (deleted). No garbage collector runs: an object with orphan or
// foregroundDeletion stays until a client removes them.
func (a *Server) deleteOne(ctx context.Context, r *resource, ns, name string, opts *metav1.DeleteOptions) (doc []byte, deleted bool, _ error) {
	dryRun := isDryRun(opts.DryRun)
	for {
		cur, err := a.readCurrent(ctx, r, ns, name)
		if err != nil {
			return nil, false, err
		}
		if err := checkPreconditions(r, cur, name, opts.Preconditions); err != nil {
			return nil, false, err
		}
		changed, fins := gcFinalizers(stringFinalizers(cur.obj), opts)
		deleted = len(fins) == 0
		if deleted {
			doc, err = a.removeObject(ctx, r, cur, name, dryRun)
		} else {
			doc, err = a.markDeleting(ctx, r, cur, fins, changed, dryRun)
		}
		if errors.Is(err, errStale) {
			if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil || !retryStale(ctx) {
				return nil, false, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
			}
			continue
		}
		return doc, deleted, err
	}
}

// stringFinalizers is metadata.finalizers of obj.
func stringFinalizers(obj object) []string {
	var out []string
	for _, f := range finalizers(obj) {
		if s, ok := f.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// gcFinalizers is upstream's deletionFinalizersForGarbageCollection for a
// custom resource (its strategy has no DefaultGarbageCollectionPolicy):
// fins without orphan and foregroundDeletion, then orphan when the
// dependents are to be orphaned, then foregroundDeletion when they are to
// be deleted first; changed reports whether that is another set (else fins
// is returned as it is).
func gcFinalizers(fins []string, opts *metav1.DeleteOptions) (changed bool, out []string) {
	orphan, foreground := orphanDependents(fins, opts), deleteDependents(fins, opts)
	out = []string{}
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
	if sets.New(fins...).Equal(sets.New(out...)) {
		return false, fins
	}
	return true, out
}

// orphanDependents is upstream's shouldOrphanDependents: orphanDependents,
// else the propagation policy (Orphan), else the object's own orphan or
// foregroundDeletion finalizer, else no.
//
//nolint:staticcheck // upstream still honours orphanDependents
func orphanDependents(fins []string, opts *metav1.DeleteOptions) bool {
	if opts.OrphanDependents != nil {
		return *opts.OrphanDependents
	}
	if pp := opts.PropagationPolicy; pp != nil {
		switch *pp {
		case metav1.DeletePropagationOrphan:
			return true
		case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
			return false
		}
	}
	for _, f := range fins {
		switch f {
		case metav1.FinalizerOrphanDependents:
			return true
		case metav1.FinalizerDeleteDependents:
			return false
		}
	}
	return false
}

// deleteDependents is upstream's shouldDeleteDependents: not with
// orphanDependents set; else the propagation policy (Foreground), else the
// object's own foregroundDeletion or orphan finalizer, else no.
//
//nolint:staticcheck // upstream still honours orphanDependents
func deleteDependents(fins []string, opts *metav1.DeleteOptions) bool {
	if opts.OrphanDependents != nil {
		return false
	}
	if pp := opts.PropagationPolicy; pp != nil {
		switch *pp {
		case metav1.DeletePropagationForeground:
			return true
		case metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
			return false
		}
	}
	for _, f := range fins {
		switch f {
		case metav1.FinalizerDeleteDependents:
			return true
		case metav1.FinalizerOrphanDependents:
			return false
		}
	}
	return false
}

// checkPreconditions is upstream's precondition check of a delete, with
// its wording (the conflict names the kind, as upstream does).
func checkPreconditions(r *resource, cur *current, name string, pre *metav1.Preconditions) error {
	if pre == nil {
		return nil
	}
	gr := schema.GroupResource{Group: r.group, Resource: r.kind}
	if pre.UID != nil {
		if uid := types.UID(objmeta.String(cur.obj, "uid")); *pre.UID != uid {
			return apierrors.NewConflict(gr, name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *pre.UID, uid))
		}
	}
	if pre.ResourceVersion != nil {
		if rv := fmt.Sprint(cur.rv); *pre.ResourceVersion != rv {
			return apierrors.NewConflict(gr, name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *pre.ResourceVersion, rv))
		}
	}
	return nil
}

// markDeleting is upstream's update of an object a delete leaves with
// finalizers: fins as its finalizers (when changed), and markAsDeleting
// (generation+1 and a deletionTimestamp when it was not being deleted yet,
// a deletionTimestamp in the future brought to now, and
// deletionGracePeriodSeconds 0). An object that ends up the same is not
// written. It returns the object at the request version.
func (a *Server) markDeleting(ctx context.Context, r *resource, cur *current, fins []string, changed, dryRun bool) ([]byte, error) {
	stored, err := listing.DecodeObject(cur.stored)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m := objmeta.Meta(stored)
	if changed {
		list := make([]any, len(fins))
		for i, f := range fins {
			list[i] = f
		}
		m["finalizers"] = list
	}
	now := a.now()
	ts, deleting := objmeta.DeletionTimestamp(stored)
	if !deleting {
		if g := objmeta.Generation(stored); g > 0 {
			m["generation"] = g + 1
		}
	}
	if !deleting || ts.After(now) {
		m["deletionTimestamp"] = objmeta.Timestamp(now)
	}
	m["deletionGracePeriodSeconds"] = int64(0)
	data, err := listing.EncodeObject(stored)
	if err != nil {
		return nil, err
	}
	if same, err := sameStored(data, cur.stored); err != nil {
		return nil, err
	} else if same {
		return a.readObject(ctx, r, cur.stored)
	}
	if dryRun {
		return a.readObject(ctx, r, data)
	}
	resp, err := a.storage.Update(ctx, &storagev1.UpdateRequest{Key: cur.key, Object: data, ExpectedResourceVersion: cur.rv})
	if err != nil {
		err = storageErr(err, r.groupResource(), objmeta.String(stored, "name"))
		if apierrors.IsConflict(err) {
			return nil, errStale
		}
		return nil, err
	}
	return a.readObject(ctx, r, resp.GetObject())
}

// removeObject deletes an object without finalizers (CAS on its revision).
func (a *Server) removeObject(ctx context.Context, r *resource, cur *current, name string, dryRun bool) ([]byte, error) {
	uid := objmeta.String(cur.obj, "uid")
	if !dryRun {
		_, err := a.storage.Delete(ctx, &storagev1.DeleteRequest{Key: cur.key, PreconditionUid: uid, PreconditionResourceVersion: cur.rv})
		if err != nil {
			err = storageErr(err, r.groupResource(), name)
			if apierrors.IsConflict(err) {
				return nil, errStale
			}
			return nil, err
		}
	}
	st := &metav1.Status{
		Status:  metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Name: name, Group: r.group, Kind: r.plural, UID: types.UID(uid)},
	}
	b, err := json.Marshal(withStatusTypeMeta(st))
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return b, nil
}

func withStatusTypeMeta(s *metav1.Status) *metav1.Status {
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return s
}

// Delete deletes one custom resource (DELETE on an object): opts are the
// request's options (decoded by DeleteOptions), out its negotiated format.
// Its errors are ready for the wire (httpx.Reply), its answer rendered in
// out (Render: protobuf too).
func (a *Server) Delete(ctx context.Context, req *gatewayv1.DeleteRequest, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeObject)
	if err != nil {
		return httpx.Reply(nil, err)
	}
	httpx.AddWarnings(ctx, r.warnings...)
	doc, deleted, err := a.deleteOne(ctx, r, req.GetNamespace(), req.GetName(), opts)
	if err != nil {
		return httpx.Reply(nil, err)
	}
	//nolint:staticcheck // upstream still honours orphanDependents
	if od := opts.OrphanDependents; !deleted && od != nil && !*od {
		// Upstream's 202 for a cascading delete (orphanDependents=false)
		// that did not remove the object.
		httpx.SetHTTPCode(ctx, http.StatusAccepted)
	}
	return out.Render(doc)
}

// DeleteCollection deletes every selected custom resource of a collection
// as Delete does; the answer lists them as they were.
func (a *Server) DeleteCollection(ctx context.Context, req *gatewayv1.DeleteCollectionRequest, params listing.Params, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeObject)
	if err != nil {
		return nil, err
	}
	// Upstream's deletecollection lists from etcd: a "." or ".."
	// namespace is its key's 500.
	if err := checkStorageKey(r, req.GetNamespace(), ""); err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, r.warnings...)
	var all httpx.ListPage
	for {
		page, err := a.listStored(ctx, r, req.GetNamespace(), params)
		if err != nil {
			return nil, err
		}
		items, err := a.readObjects(ctx, r, page.Items)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			name, ns := listing.ItemNameNamespace(it)
			if _, _, err := a.deleteOne(ctx, r, ns, name, opts); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		all.Items = append(all.Items, items...)
		all.ResourceVersion = page.ResourceVersion
		if page.ContinueToken == "" {
			break
		}
		params.ContinueToken = page.ContinueToken
	}
	return out.Body(httpx.RenderList(r.apiVersion(), r.listKind, all)), nil
}
