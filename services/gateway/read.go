package gateway

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/kstatus"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// optimisticLockMsg is kube-apiserver's conflict message for a stale resourceVersion.
const optimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

// storageErr rewords the storage service's NotFound, AlreadyExists and
// Conflict errors for the resource and name of the request, as
// kube-apiserver's registry does.
func storageErr(err error, gr schema.GroupResource, name string) error {
	if err == nil {
		return nil
	}
	s := kstatus.FromError(err)
	switch s.Reason {
	case metav1.StatusReasonNotFound:
		return apierrors.NewNotFound(gr, name)
	case metav1.StatusReasonAlreadyExists:
		return apierrors.NewAlreadyExists(gr, name)
	case metav1.StatusReasonConflict:
		return apierrors.NewConflict(gr, name, errors.New(optimisticLockMsg))
	}
	return err
}

// checkSubresource accepts the main resource and, where the version has
// one, the status subresource; anything else is 404 as upstream.
func checkSubresource(r *resource, sub, name string) error {
	switch {
	case sub == "":
		return nil
	case sub == "status" && r.hasStatus:
		return nil
	}
	return apierrors.NewNotFound(r.groupResource(), name)
}

// getStored reads one object at the storage version.
func (a *kubeAPI) getStored(ctx context.Context, r *resource, namespace, name string) ([]byte, error) {
	resp, err := a.storage.Get(ctx, &storagev1.GetRequest{Key: r.objectKey(namespace, name)})
	if err != nil {
		return nil, storageErr(err, r.groupResource(), name)
	}
	return resp.GetObject(), nil
}

// Get serves GET on one object (and its status subresource).
func (a *kubeAPI) Get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	out := negotiateOutput(requestMetaFrom(ctx).accept, req.GetPretty())
	if isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource()) {
		return reply(a.crdGet(ctx, req, out))
	}
	return reply(a.crGet(ctx, req, out))
}

func (a *kubeAPI) crGet(ctx context.Context, req *gatewayv1.GetRequest, out outputFormat) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeObject)
	if err != nil {
		return nil, err
	}
	if err := checkSubresource(r, req.GetSubresource(), req.GetName()); err != nil {
		return nil, err
	}
	addWarnings(ctx, r.warnings...)
	stored, err := a.getStored(ctx, r, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	obj, err := a.convertOne(ctx, r, r.apiVersion(), stored)
	if err != nil {
		return nil, err
	}
	return out.body(obj), nil
}

// List serves GET on a collection.
func (a *kubeAPI) List(ctx context.Context, req *gatewayv1.ListRequest) (*httpbody.HttpBody, error) {
	out := negotiateOutput(requestMetaFrom(ctx).accept, req.GetPretty())
	params := listParams{
		labelSelector:        req.GetLabelSelector(),
		fieldSelector:        req.GetFieldSelector(),
		limit:                req.GetLimit(),
		continueToken:        req.GetContinue(),
		resourceVersion:      req.GetResourceVersion(),
		resourceVersionMatch: req.GetResourceVersionMatch(),
		sendInitialEvents:    req.SendInitialEvents,
	}
	if isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource()) {
		return reply(a.crdList(ctx, req.GetNamespace(), params, out))
	}
	return reply(a.crList(ctx, req, params, out))
}

func (a *kubeAPI) crList(ctx context.Context, req *gatewayv1.ListRequest, params listParams, out outputFormat) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeCollection)
	if err != nil {
		return nil, err
	}
	page, err := a.listStored(ctx, r, req.GetNamespace(), params)
	if err != nil {
		return nil, err
	}
	addWarnings(ctx, r.warnings...)
	if page.items, err = a.convertObjects(ctx, r, r.apiVersion(), page.items); err != nil {
		return nil, err
	}
	return out.body(renderList(r.apiVersion(), r.listKind, page)), nil
}

// listStored reads one page of a collection at the storage version.
func (a *kubeAPI) listStored(ctx context.Context, r *resource, namespace string, params listParams) (listPage, error) {
	opts, err := parseListOptions(params)
	if err != nil {
		return listPage{}, err
	}
	if err := checkFieldSelector(opts.FieldSelector, r.fieldAllowed); err != nil {
		return listPage{}, err
	}
	lo, err := storageListOptions(opts, schema.GroupKind{Group: r.group, Kind: r.plural}, r.selectableFields)
	if err != nil {
		return listPage{}, err
	}
	resp, err := a.storage.List(ctx, &storagev1.ListRequest{Prefix: r.collectionKey(namespace), Options: lo})
	if err != nil {
		return listPage{}, err
	}
	return listPage{
		items:           resp.GetObjects(),
		resourceVersion: resp.GetResourceVersion(),
		continueToken:   resp.GetContinueToken(),
		remaining:       resp.RemainingItemCount,
	}, nil
}

// Watch serves watches (the legacy /watch/ paths, and ?watch=true reads
// the edge rewrites onto them).
func (a *kubeAPI) Watch(req *gatewayv1.WatchRequest, stream gatewayv1.KubeAPIService_WatchServer) error {
	ctx := stream.Context()
	params := listParams{
		labelSelector:        req.GetLabelSelector(),
		fieldSelector:        req.GetFieldSelector(),
		resourceVersion:      req.GetResourceVersion(),
		resourceVersionMatch: req.GetResourceVersionMatch(),
		timeoutSeconds:       req.GetTimeoutSeconds(),
		allowWatchBookmarks:  req.GetAllowWatchBookmarks(),
		sendInitialEvents:    req.SendInitialEvents,
		watch:                true,
	}
	var err error
	if isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource()) {
		err = a.crdWatch(ctx, req.GetNamespace(), params, stream)
	} else {
		err = a.crWatch(ctx, req, params, stream)
	}
	if err != nil {
		return failWatch(ctx, stream, err)
	}
	return nil
}

// failWatch answers a watch that fails before its stream starts with the
// error's Status and HTTP code, as kube-apiserver does. (A gRPC error here
// would reach the client as a stream error, with an HTTP code derived from
// the gRPC code: 400 instead of 422, 404 lost in translation.)
func failWatch(ctx context.Context, stream gatewayv1.KubeAPIService_WatchServer, err error) error {
	if ctx.Err() != nil {
		return toGRPC(err)
	}
	s := kstatus.FromError(toGRPC(err))
	setHTTPCode(ctx, int(s.Code))
	if serr := stream.Send(&httpbody.HttpBody{ContentType: contentTypeJSON, Data: statusJSON(s, false)}); serr != nil {
		return toGRPC(err)
	}
	return nil
}

func (a *kubeAPI) crWatch(ctx context.Context, req *gatewayv1.WatchRequest, params listParams, stream gatewayv1.KubeAPIService_WatchServer) error {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeCollection)
	if err != nil {
		return err
	}
	opts, err := parseListOptions(params)
	if err != nil {
		return err
	}
	if err := checkFieldSelector(opts.FieldSelector, r.fieldAllowed); err != nil {
		return err
	}
	rv, err := parseRV(schema.GroupKind{Group: r.group, Kind: r.plural}, opts.ResourceVersion)
	if err != nil {
		return err
	}
	plan := planWatch(opts, rv, a.minRequestTimeout)
	plan.apiVersion, plan.kind = r.apiVersion(), r.kind
	plan.convert = func(ctx context.Context, obj []byte) ([]byte, error) {
		return a.convertOne(ctx, r, r.apiVersion(), obj)
	}
	wreq := &storagev1.WatchRequest{
		Prefix:            r.collectionKey(req.GetNamespace()),
		ResourceVersion:   plan.resourceVersion,
		SendInitialEvents: plan.initialEvents,
		AllowBookmarks:    plan.allowBookmarks,
		SelectableFields:  r.selectableFields,
	}
	if opts.LabelSelector != nil && !opts.LabelSelector.Empty() {
		wreq.LabelSelector = opts.LabelSelector.String()
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		wreq.FieldSelector = opts.FieldSelector.String()
	}
	addWarnings(ctx, r.warnings...)
	wctx, cancel := context.WithTimeout(ctx, plan.timeout)
	defer cancel()
	backend, err := a.storage.Watch(wctx, wreq)
	if err != nil {
		return err
	}
	return serveWatch(wctx, stream, plan, func() (backendEvent, error) { return backend.Recv() })
}
