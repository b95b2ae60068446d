package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/kstatus"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
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

// Get serves GET on one object (and its status and scale subresources).
func (a *kubeAPI) Get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	rm := httpx.RequestMetaFrom(ctx)
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	out, err := httpx.NegotiateOutput(rm, readTarget(crds, req.GetSubresource()))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	if crds {
		return httpx.Reply(a.crdGet(ctx, req, out, rm))
	}
	return httpx.Reply(a.crGet(ctx, req, out, rm))
}

func (a *kubeAPI) crGet(ctx context.Context, req *gatewayv1.GetRequest, out httpx.OutputFormat, rm httpx.RequestMeta) (*httpbody.HttpBody, error) {
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
	minRV, err := parseRV(req.GetResourceVersion())
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
	return respondObject(out, rm, obj, func() *tablePrinter { return newColumnPrinter(printerColumns(r.crd, r.version)) })
}

// readTarget is the endpoint kind of a GET: a CRD (or its status), a
// custom resource's scale subresource, or a custom resource.
func readTarget(crds bool, sub string) httpx.Target {
	switch {
	case crds:
		return httpx.TargetCRD
	case sub == "scale":
		return httpx.TargetScale
	}
	return httpx.TargetCustomResource
}

// respondObject renders one object (JSON at the request version) in the
// negotiated format; printer gives its table columns.
func respondObject(out httpx.OutputFormat, rm httpx.RequestMeta, obj []byte, printer func() *tablePrinter) (*httpbody.HttpBody, error) {
	switch out.As {
	case httpx.AsTable:
		opts, err := tableOptions(rm.Query())
		if err != nil {
			return nil, err
		}
		tw := &tableWriter{printer: printer(), opts: opts, gv: out.AsGV}
		doc, err := tw.table([][]byte{obj}, metav1.ListMeta{ResourceVersion: objectResourceVersion(obj)})
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadata:
		o, err := decodeObject(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		doc, err := partialObjectMetadata(o, out.AsGV)
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadataList:
		return nil, errNotAcceptableConversion("you requested PartialObjectMetadataList, but the requested object is not a list (*unstructured.Unstructured)")
	}
	return out.Render(obj)
}

// respondList renders a list page (items JSON at the request version).
func respondList(out httpx.OutputFormat, rm httpx.RequestMeta, apiVersion, listKind string, page httpx.ListPage, printer func() *tablePrinter) (*httpbody.HttpBody, error) {
	switch out.As {
	case httpx.AsTable:
		opts, err := tableOptions(rm.Query())
		if err != nil {
			return nil, err
		}
		tw := &tableWriter{printer: printer(), opts: opts, gv: out.AsGV}
		doc, err := tw.table(page.Items, page.ListMeta())
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadataList:
		doc, err := partialObjectMetadataList(page, out.AsGV)
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadata:
		goType := "*unstructured.UnstructuredList"
		if apiVersion == crdAPIVersion {
			goType = "*apiextensions.CustomResourceDefinitionList"
		}
		return nil, errNotAcceptableConversion("you requested PartialObjectMetadata, but the requested object is a list (" + goType + ")")
	}
	return out.Render(httpx.RenderList(apiVersion, listKind, page))
}

// errNotAcceptableConversion is upstream's 406 for a transformation the
// response cannot take.
func errNotAcceptableConversion(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable, Message: msg,
	}}
}

// objectResourceVersion reads metadata.resourceVersion without decoding the rest.
func objectResourceVersion(obj []byte) string {
	var m struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &m)
	return m.Metadata.ResourceVersion
}

// List serves GET on a collection.
func (a *kubeAPI) List(ctx context.Context, req *gatewayv1.ListRequest) (*httpbody.HttpBody, error) {
	rm := httpx.RequestMetaFrom(ctx)
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	target := httpx.TargetCustomResource
	if crds {
		target = httpx.TargetCRDCollection
	}
	out, err := httpx.NegotiateOutput(rm, target)
	if err != nil {
		return httpx.Reply(nil, err)
	}
	params := listParams{
		labelSelector:        req.GetLabelSelector(),
		fieldSelector:        req.GetFieldSelector(),
		limit:                req.GetLimit(),
		continueToken:        req.GetContinue(),
		resourceVersion:      req.GetResourceVersion(),
		resourceVersionMatch: req.GetResourceVersionMatch(),
		sendInitialEvents:    req.SendInitialEvents,
	}
	if crds {
		return httpx.Reply(a.crdList(ctx, req.GetNamespace(), params, out, rm))
	}
	return httpx.Reply(a.crList(ctx, req, params, out, rm))
}

func (a *kubeAPI) crList(ctx context.Context, req *gatewayv1.ListRequest, params listParams, out httpx.OutputFormat, rm httpx.RequestMeta) (*httpbody.HttpBody, error) {
	r, err := a.resolve(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), scopeCollection)
	if err != nil {
		return nil, err
	}
	page, err := a.listStored(ctx, r, req.GetNamespace(), params)
	if err != nil {
		return continueExpired(ctx, err, params.continueToken, out)
	}
	httpx.AddWarnings(ctx, r.warnings...)
	if page.Items, err = a.readObjects(ctx, r, page.Items); err != nil {
		return nil, err
	}
	return respondList(out, rm, r.apiVersion(), r.listKind, page, func() *tablePrinter { return newColumnPrinter(printerColumns(r.crd, r.version)) })
}

// inconsistentContinue is upstream's message for a continue token whose
// revision etcd has compacted.
const inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
	"show up in the list."

// continueExpired answers a list error: a continue token whose revision
// is compacted away is upstream's 410 carrying, in metadata.continue, a
// token that continues at the same key from the latest revision (rv -1);
// anything else is returned as is.
func continueExpired(ctx context.Context, err error, token string, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	s := kstatus.FromError(err)
	if token == "" || s.Reason != metav1.StatusReasonExpired {
		return nil, err
	}
	latest, ok := continueAtLatest(token)
	if !ok {
		return nil, err
	}
	st := &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: inconsistentContinue, ListMeta: metav1.ListMeta{Continue: latest},
	}
	// The Status carries list metadata, which a gRPC error cannot: it is
	// the response body, with its code.
	httpx.SetHTTPCode(ctx, http.StatusGone)
	if out.YAML || out.Protobuf {
		return out.StatusBody(st), nil
	}
	return &httpbody.HttpBody{ContentType: httpx.ContentTypeJSON, Data: httpx.StatusJSON(st, out.Pretty)}, nil
}

// continueAtLatest rewrites an (upstream format) continue token to
// continue at its key from the latest revision.
func continueAtLatest(token string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", false
	}
	var c struct {
		APIVersion      string `json:"v"`
		ResourceVersion int64  `json:"rv"`
		StartKey        string `json:"start"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.StartKey == "" {
		return "", false
	}
	c.ResourceVersion = -1
	b, err := json.Marshal(c)
	if err != nil {
		return "", false
	}
	return base64.RawURLEncoding.EncodeToString(b), true
}

// listStored reads one page of a collection at the storage version.
func (a *kubeAPI) listStored(ctx context.Context, r *resource, namespace string, params listParams) (httpx.ListPage, error) {
	opts, err := parseListOptions(params)
	if err != nil {
		return httpx.ListPage{}, err
	}
	if err := checkFieldSelector(opts.FieldSelector, r.fieldAllowed); err != nil {
		return httpx.ListPage{}, err
	}
	if listReadsEtcd(opts) {
		if err := checkStorageKey(r, namespace, ""); err != nil {
			return httpx.ListPage{}, err
		}
	}
	lo, minRV, err := storageListOptions(opts, r.selectableFields)
	if err != nil {
		return httpx.ListPage{}, err
	}
	beyond := rvBeyondRevisions(opts.ResourceVersion)
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
		return httpx.ListPage{}, errTooLargeRV(opts.ResourceVersion, resp.GetResourceVersion(), 0)
	}
	return httpx.ListPage{
		Items:           resp.GetObjects(),
		ResourceVersion: resp.GetResourceVersion(),
		ContinueToken:   resp.GetContinueToken(),
		Remaining:       resp.RemainingItemCount,
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
		name:                 watchNameFrom(ctx),
	}
	rm := httpx.RequestMetaFrom(ctx)
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	target := httpx.TargetCustomResource
	if crds {
		target = httpx.TargetCRDCollection
	}
	out, err := httpx.NegotiateWatch(rm, target)
	if err != nil {
		return failWatch(ctx, stream, target, err)
	}
	if crds {
		err = a.crdWatch(ctx, req.GetNamespace(), params, stream, out, rm)
	} else {
		err = a.crWatch(ctx, req, params, stream, out, rm)
	}
	if err != nil {
		return failWatch(ctx, stream, target, err)
	}
	return nil
}

// failWatch answers a watch that fails before its stream starts with the
// error's Status and HTTP code, as kube-apiserver does. (A gRPC error here
// would reach the client as a stream error, with an HTTP code derived from
// the gRPC code: 400 instead of 422, 404 lost in translation.)
func failWatch(ctx context.Context, stream gatewayv1.KubeAPIService_WatchServer, target httpx.Target, err error) error {
	if ctx.Err() != nil {
		return httpx.ToGRPC(err)
	}
	s := kstatus.FromError(httpx.ToGRPC(err))
	body := httpx.ErrorBody(httpx.RequestMetaFrom(ctx), target, s)
	httpx.SetHTTPCode(ctx, int(s.Code))
	if serr := stream.Send(body); serr != nil {
		return httpx.ToGRPC(err)
	}
	return nil
}

func (a *kubeAPI) crWatch(ctx context.Context, req *gatewayv1.WatchRequest, params listParams, stream gatewayv1.KubeAPIService_WatchServer, out httpx.OutputFormat, rm httpx.RequestMeta) error {
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
	if err := selectName(opts, params.name); err != nil {
		return err
	}
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return err
	}
	// Past the largest revision: a watch that waits (silently) forever.
	rv = clampRV(rv, opts.ResourceVersion)
	plan := planWatch(opts, rv, a.minRequestTimeout)
	plan.apiVersion, plan.kind, plan.wire = r.apiVersion(), r.kind, out
	plan.convert = func(ctx context.Context, obj []byte) ([]byte, error) {
		return a.readObject(ctx, r, obj)
	}
	if plan.transform, err = watchTransform(out, rm, func() *tablePrinter { return newColumnPrinter(printerColumns(r.crd, r.version)) }); err != nil {
		return err
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
	httpx.AddWarnings(ctx, r.warnings...)
	wctx, cancel := context.WithTimeout(ctx, plan.timeout)
	defer cancel()
	backend, err := a.storage.Watch(wctx, wreq)
	if err != nil {
		return err
	}
	return serveWatch(wctx, stream, plan, func() (backendEvent, error) { return backend.Recv() })
}
