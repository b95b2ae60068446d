package cr

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
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"github.com/crdplane/crdplane/services/gateway/watch"
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
// them, the status and scale subresources; anything else is 404 as upstream.
func checkSubresource(r *resource, sub, name string) error {
	switch {
	case sub == "":
		return nil
	case sub == "status" && r.hasStatus:
		return nil
	case sub == "scale" && r.scale != nil:
		return nil
	}
	return apierrors.NewNotFound(r.groupResource(), name)
}

func (a *Server) Get(ctx context.Context, req *gatewayv1.GetRequest, out httpx.OutputFormat, rm httpx.RequestMeta) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeObject)
	if err != nil {
		return nil, err
	}
	if err := checkSubresource(r, req.GetSubresource(), req.GetName()); err != nil {
		return nil, err
	}
	if err := checkObjectName(req.GetName()); err != nil {
		return nil, err
	}
	if req.GetResourceVersion() == "" {
		// Without a resourceVersion upstream reads etcd, which refuses a
		// "." or ".." namespace; with one its watch cache finds nothing.
		if err := checkStorageKey(r, req.GetNamespace(), req.GetName()); err != nil {
			return nil, err
		}
	}
	minRV, err := listing.ParseRV(req.GetResourceVersion())
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, r.warnings...)
	// "Not older than" a revision (upstream's watch cache waits for it, a
	// missing object included, else 504): storage waits.
	resp, err := a.storage.Get(ctx, &storagev1.GetRequest{Key: r.objectKey(req.GetNamespace(), req.GetName()), MinResourceVersion: uint64(minRV)})
	if err != nil {
		return nil, storageErr(err, r.groupResource(), req.GetName())
	}
	obj, err := a.readObject(ctx, r, resp.GetObject())
	if err != nil {
		return nil, err
	}
	if req.GetSubresource() == "scale" {
		return a.scaleGet(r, out, rm, obj)
	}
	return listing.RespondObject(out, rm, obj, func() *listing.TablePrinter {
		return listing.NewColumnPrinter(listing.PrinterColumns(r.crd, r.version))
	})
}

func (a *Server) List(ctx context.Context, req *gatewayv1.ListRequest, params listing.Params, out httpx.OutputFormat, rm httpx.RequestMeta) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeCollection)
	if err != nil {
		return nil, err
	}
	page, err := a.listStored(ctx, r, req.GetNamespace(), params)
	if err != nil {
		return listing.ContinueExpired(ctx, err, params.ContinueToken, out)
	}
	httpx.AddWarnings(ctx, r.warnings...)
	if page.Items, err = a.readObjects(ctx, r, page.Items); err != nil {
		return nil, err
	}
	return listing.RespondList(out, rm, r.apiVersion(), r.listKind, page, func() *listing.TablePrinter {
		return listing.NewColumnPrinter(listing.PrinterColumns(r.crd, r.version))
	})
}

// listStored reads one page of a collection at the storage version.
func (a *Server) listStored(ctx context.Context, r *resource, namespace string, params listing.Params) (httpx.ListPage, error) {
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return httpx.ListPage{}, err
	}
	if err := listing.CheckFieldSelector(opts.FieldSelector, r.fieldAllowed); err != nil {
		return httpx.ListPage{}, err
	}
	if listReadsEtcd(opts) {
		if err := checkStorageKey(r, namespace, ""); err != nil {
			return httpx.ListPage{}, err
		}
	}
	lo, minRV, err := listing.StorageOptions(opts, r.selectableFields)
	if err != nil {
		return httpx.ListPage{}, err
	}
	beyond := listing.RVBeyondRevisions(opts.ResourceVersion)
	// Exact as upstream decides it, from the parameters as written.
	exactBeyond := beyond && (opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
		opts.ResourceVersionMatch == "" && opts.Limit > 0)
	switch {
	case exactBeyond:
		// An exact read past the largest revision: upstream's etcd3 store
		// reads int64(rv), a negative revision, which etcd reads as the
		// latest; then the result is older than asked (no retry hint).
		lo.ResourceVersion, minRV = 0, 0
	}
	// "Not older than" a revision still to come: storage waits for it, as
	// upstream's watch cache does (minRV is the resourceVersion's uint64).
	req := &storagev1.ListRequest{Prefix: r.collectionKey(namespace), Options: lo, MinResourceVersion: uint64(minRV)}
	resp, err := a.storage.List(ctx, req)
	if err != nil {
		return httpx.ListPage{}, err
	}
	if exactBeyond {
		return httpx.ListPage{}, listing.ErrTooLargeRV(opts.ResourceVersion, resp.GetResourceVersion(), 0)
	}
	return httpx.ListPage{
		Items:           resp.GetObjects(),
		ResourceVersion: resp.GetResourceVersion(),
		ContinueToken:   resp.GetContinueToken(),
		Remaining:       resp.RemainingItemCount,
	}, nil
}

func (a *Server) Watch(ctx context.Context, req *gatewayv1.WatchRequest, params listing.Params, stream gatewayv1.KubeAPIService_WatchServer, out httpx.OutputFormat, rm httpx.RequestMeta) error {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeCollection)
	if err != nil {
		return err
	}
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return err
	}
	if err := listing.CheckFieldSelector(opts.FieldSelector, r.fieldAllowed); err != nil {
		return err
	}
	if err := listing.SelectName(opts, params.Name); err != nil {
		return err
	}
	rv, err := listing.ParseRV(opts.ResourceVersion)
	if err != nil {
		return err
	}
	// Past the largest revision: a watch that waits (silently) forever.
	rv = listing.ClampRV(rv, opts.ResourceVersion)
	plan := watch.NewPlan(opts, rv, a.minRequestTimeout)
	plan.APIVersion, plan.Kind, plan.Wire = r.apiVersion(), r.kind, out
	plan.Convert = func(ctx context.Context, obj []byte) ([]byte, error) {
		return a.readObject(ctx, r, obj)
	}
	if plan.Transform, err = listing.EventTransform(out, rm, func() *listing.TablePrinter {
		return listing.NewColumnPrinter(listing.PrinterColumns(r.crd, r.version))
	}); err != nil {
		return err
	}
	wreq := &storagev1.WatchRequest{
		Prefix:            r.collectionKey(req.GetNamespace()),
		ResourceVersion:   plan.ResourceVersion,
		SendInitialEvents: plan.InitialEvents,
		AllowBookmarks:    plan.AllowBookmarks,
		SelectableFields:  r.selectableFields,
	}
	if opts.LabelSelector != nil && !opts.LabelSelector.Empty() {
		wreq.LabelSelector = opts.LabelSelector.String()
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		wreq.FieldSelector = opts.FieldSelector.String()
	}
	httpx.AddWarnings(ctx, r.warnings...)
	wctx, cancel := context.WithTimeout(ctx, plan.Timeout)
	defer cancel()
	backend, err := a.storage.Watch(wctx, wreq)
	if err != nil {
		return err
	}
	return watch.Serve(wctx, stream, plan, func() (watch.Event, error) { return backend.Recv() })
}
