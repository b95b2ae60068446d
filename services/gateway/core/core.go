// Package core serves the part of the legacy core group (/api/v1) crdplane
// serves: core/v1 Namespaces and their status and finalize subresources
// (CoreAPIService), each verb delegated to the registry's
// NamespaceService. Lists, tables and watches render through the same code
// as CRDs (packages listing and watch).
package core

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objsize"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"github.com/crdplane/crdplane/services/gateway/watch"
)

// The served core resource.
const (
	Version    = "v1"
	Resource   = "namespaces"
	Kind       = "Namespace"
	ListKind   = "NamespaceList"
	APIVersion = Version
)

// Config is what a Server needs.
type Config struct {
	// Namespaces serves the namespaces (the registry).
	Namespaces registryv1.NamespaceServiceClient
	// MinRequestTimeout is the watch timeout's base (--min-request-timeout).
	MinRequestTimeout time.Duration
	// Lifecycle is NamespaceLifecycle admission: default, kube-system and
	// kube-public cannot be deleted.
	Lifecycle bool
}

// Server implements gatewayv1.CoreAPIServiceServer, and serves the
// namespace watches (watch.Watcher).
type Server struct {
	gatewayv1.UnimplementedCoreAPIServiceServer
	ns                registryv1.NamespaceServiceClient
	minRequestTimeout time.Duration
	lifecycle         bool
}

var _ gatewayv1.CoreAPIServiceServer = (*Server)(nil)

// New returns a Server for cfg.
func New(cfg Config) *Server {
	return &Server{ns: cfg.Namespaces, minRequestTimeout: cfg.MinRequestTimeout, lifecycle: cfg.Lifecycle}
}

// checkVersion answers a version other than v1 (the only one of the core
// group) with the generic 404.
func checkVersion(v string) error {
	if v != Version {
		return httpx.ErrNotFound()
	}
	return nil
}

// checkPutOnly answers a verb other than PUT on the finalize subresource
// as go-restful does: kube-apiserver registers only PUT for it (its
// storage updates, and neither gets nor patches), so any other method on
// the path is 405 MethodNotAllowed.
func checkPutOnly(sub string) error {
	if sub == "finalize" {
		return httpx.ErrMethodNotAllowed()
	}
	return nil
}

// checkSubresource accepts the subresources a verb has (status for reads
// and writes, finalize for update); anything else is the generic 404 of a
// path kube-apiserver does not route.
func checkSubresource(sub string, allowed ...string) error {
	if sub == "" {
		return nil
	}
	for _, a := range allowed {
		if sub == a {
			return nil
		}
	}
	return httpx.ErrNotFound()
}

// Get serves GET of a namespace or its status.
func (s *Server) Get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	return httpx.Reply(s.get(ctx, req))
}

func (s *Server) get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	if err := checkVersion(req.GetVersion()); err != nil {
		return nil, err
	}
	if err := checkPutOnly(req.GetSubresource()); err != nil {
		return nil, err
	}
	if err := checkSubresource(req.GetSubresource(), "status"); err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.NegotiateOutput(rm, httpx.TargetNamespace)
	if err != nil {
		return nil, err
	}
	resp, err := s.ns.Get(ctx, &registryv1.GetRequest{Name: req.GetName()})
	if err != nil {
		return nil, err
	}
	if out.As == httpx.AsPartialObjectMetadataList {
		return nil, listing.ErrNotAcceptableConversion("you requested PartialObjectMetadataList, but the requested object is not a list (*core.Namespace)")
	}
	return listing.RespondObject(out, rm, resp.GetObject(), listing.NamespacePrinter)
}

func listParams(req *gatewayv1.ListRequest) listing.Params {
	return listing.Params{
		LabelSelector:        req.GetLabelSelector(),
		FieldSelector:        req.GetFieldSelector(),
		Limit:                req.GetLimit(),
		ContinueToken:        req.GetContinue(),
		ResourceVersion:      req.GetResourceVersion(),
		ResourceVersionMatch: req.GetResourceVersionMatch(),
		SendInitialEvents:    req.SendInitialEvents,
	}
}

// List serves GET of the namespaces (the typed list, a Table, ...).
func (s *Server) List(ctx context.Context, req *gatewayv1.ListRequest) (*httpbody.HttpBody, error) {
	return httpx.Reply(s.listNamespaces(ctx, req))
}

func (s *Server) listNamespaces(ctx context.Context, req *gatewayv1.ListRequest) (*httpbody.HttpBody, error) {
	if err := checkVersion(req.GetVersion()); err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.NegotiateOutput(rm, httpx.TargetNamespaceCollection)
	if err != nil {
		return nil, err
	}
	params := listParams(req)
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return nil, err
	}
	lo, minRV, err := listing.StorageOptions(opts, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.ns.List(ctx, &registryv1.ListRequest{Options: lo})
	if err != nil {
		return listing.ContinueExpired(ctx, err, params.ContinueToken, out)
	}
	if resp.GetResourceVersion() < minRV {
		return nil, listing.ErrTooLargeRV(opts.ResourceVersion, resp.GetResourceVersion(), 1)
	}
	page := httpx.ListPage{
		Items:           resp.GetObjects(),
		ResourceVersion: resp.GetResourceVersion(),
		ContinueToken:   resp.GetContinueToken(),
		Remaining:       resp.RemainingItemCount,
	}
	if out.As == "" {
		return out.RenderTypedList(APIVersion, ListKind, page, func() ([]byte, error) { return listing.RenderTypedList(APIVersion, ListKind, page) })
	}
	return listing.RespondList(out, rm, APIVersion, ListKind, page, listing.NamespacePrinter)
}

// Watch streams a watch of the namespaces (or of one, by name) from the
// registry.
func (s *Server) Watch(req *gatewayv1.WatchRequest, stream gatewayv1.KubeAPIService_WatchServer) error {
	ctx := stream.Context()
	rm := httpx.RequestMetaFrom(ctx)
	target := httpx.TargetNamespaceCollection
	if err := checkVersion(req.GetVersion()); err != nil {
		return watch.Fail(ctx, stream, target, err)
	}
	out, err := httpx.NegotiateWatch(rm, target)
	if err != nil {
		return watch.Fail(ctx, stream, target, err)
	}
	if err := s.watch(ctx, req, stream, out, rm); err != nil {
		return watch.Fail(ctx, stream, target, err)
	}
	return nil
}

func (s *Server) watch(ctx context.Context, req *gatewayv1.WatchRequest, stream gatewayv1.KubeAPIService_WatchServer, out httpx.OutputFormat, rm httpx.RequestMeta) error {
	params := listing.Params{
		LabelSelector:        req.GetLabelSelector(),
		FieldSelector:        req.GetFieldSelector(),
		ResourceVersion:      req.GetResourceVersion(),
		ResourceVersionMatch: req.GetResourceVersionMatch(),
		TimeoutSeconds:       req.GetTimeoutSeconds(),
		AllowWatchBookmarks:  req.GetAllowWatchBookmarks(),
		SendInitialEvents:    req.SendInitialEvents,
		Watch:                true,
		Name:                 watch.NameFrom(ctx),
	}
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return err
	}
	return watch.ServeRegistry(ctx, stream, watch.RegistryKind{APIVersion: APIVersion, Kind: Kind, Printer: listing.NamespacePrinter, MinRequestTimeout: s.minRequestTimeout},
		opts, params.Name, out, rm, func(ctx context.Context, req *registryv1.WatchRequest) (func() (watch.Event, error), error) {
			backend, err := s.ns.Watch(ctx, req)
			if err != nil {
				return nil, err
			}
			return func() (watch.Event, error) { return backend.Recv() }, nil
		})
}

// decodeBody reads a create or update body (JSON, YAML or protobuf) as
// the namespace's JSON.
func decodeBody(rm httpx.RequestMeta, raw []byte) ([]byte, error) {
	body, err := httpx.DecodeRequestBody(rm, raw, httpx.BodyFor{Target: httpx.TargetNamespace, Version: Version})
	if err != nil {
		return nil, err
	}
	if body.ConvErr != nil {
		return nil, body.YAMLError()
	}
	if err := objsize.Check(len(body.JSON)); err != nil {
		return nil, err
	}
	return body.JSON, nil
}

// Create serves POST of a namespace.
func (s *Server) Create(ctx context.Context, req *gatewayv1.CreateRequest) (*httpbody.HttpBody, error) {
	return httpx.Reply(s.create(ctx, req))
}

func (s *Server) create(ctx context.Context, req *gatewayv1.CreateRequest) (*httpbody.HttpBody, error) {
	if err := checkVersion(req.GetVersion()); err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetNamespace)
	if err != nil {
		return nil, err
	}
	wo, err := httpx.BuiltinCreateOptions(ctx, req.GetDryRun(), req.GetFieldManager(), req.GetFieldValidation())
	if err != nil {
		return nil, err
	}
	body, err := decodeBody(rm, req.GetBody().GetData())
	if err != nil {
		return nil, err
	}
	resp, err := s.ns.Create(ctx, &registryv1.CreateRequest{Object: body, Options: wo})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	httpx.SetHTTPCode(ctx, http.StatusCreated)
	return out.Render(resp.GetObject())
}

// Update serves PUT of a namespace, its status or its finalize
// subresource.
func (s *Server) Update(ctx context.Context, req *gatewayv1.UpdateRequest) (*httpbody.HttpBody, error) {
	return httpx.Reply(s.update(ctx, req))
}

func (s *Server) update(ctx context.Context, req *gatewayv1.UpdateRequest) (*httpbody.HttpBody, error) {
	if err := checkVersion(req.GetVersion()); err != nil {
		return nil, err
	}
	if err := checkSubresource(req.GetSubresource(), "status", "finalize"); err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetNamespace)
	if err != nil {
		return nil, err
	}
	wo, err := httpx.BuiltinUpdateOptions(ctx, req.GetDryRun(), req.GetFieldManager(), req.GetFieldValidation())
	if err != nil {
		return nil, err
	}
	body, err := decodeBody(rm, req.GetBody().GetData())
	if err != nil {
		return nil, err
	}
	resp, err := s.ns.Update(ctx, &registryv1.UpdateRequest{
		Name: req.GetName(), Subresource: req.GetSubresource(), Object: body, Options: wo,
	})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	return out.Render(resp.GetObject())
}

// Patch serves PATCH of a namespace or its status (JSON, merge and
// strategic merge patches, server-side apply).
func (s *Server) Patch(ctx context.Context, req *gatewayv1.PatchRequest) (*httpbody.HttpBody, error) {
	return httpx.Reply(s.patch(ctx, req))
}

func (s *Server) patch(ctx context.Context, req *gatewayv1.PatchRequest) (*httpbody.HttpBody, error) {
	if err := checkVersion(req.GetVersion()); err != nil {
		return nil, err
	}
	if err := checkPutOnly(req.GetSubresource()); err != nil {
		return nil, err
	}
	if err := checkSubresource(req.GetSubresource(), "status"); err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetNamespace)
	if err != nil {
		return nil, err
	}
	pt, wo, err := httpx.BuiltinPatchOptions(ctx, req.GetDryRun(), req.GetFieldManager(), req.GetFieldValidation(), req.GetForce())
	if err != nil {
		return nil, err
	}
	resp, err := s.ns.Patch(ctx, &registryv1.PatchRequest{
		Name: req.GetName(), Subresource: req.GetSubresource(), PatchType: pt, Patch: req.GetBody().GetData(), Options: wo,
	})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	if resp.GetCreated() {
		httpx.SetHTTPCode(ctx, http.StatusCreated)
	}
	return out.Render(resp.GetObject())
}

// Delete serves DELETE of a namespace: the first marks it Terminating (the
// registry's namespace controller then empties and removes it).
func (s *Server) Delete(ctx context.Context, req *gatewayv1.DeleteRequest) (*httpbody.HttpBody, error) {
	return httpx.Reply(s.delete(ctx, req))
}

func (s *Server) delete(ctx context.Context, req *gatewayv1.DeleteRequest) (*httpbody.HttpBody, error) {
	if err := checkVersion(req.GetVersion()); err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetNamespace)
	if err != nil {
		return nil, err
	}
	body, err := httpx.DecodeDeleteBody(rm, req.GetBody().GetData())
	if err != nil {
		return nil, err
	}
	opts, err := deleteOptions(body, rm.Query(), req)
	if err != nil {
		return nil, err
	}
	if s.lifecycle && immortal(req.GetName()) {
		// NamespaceLifecycle admission
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: Resource}, req.GetName(), errors.New("this namespace may not be deleted"))
	}
	dreq := &registryv1.DeleteRequest{Name: req.GetName(), DryRun: len(opts.DryRun) > 0}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			dreq.PreconditionUid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			dreq.PreconditionResourceVersion = *p.ResourceVersion
		}
	}
	if opts.PropagationPolicy != nil {
		dreq.PropagationPolicy = string(*opts.PropagationPolicy)
	}
	dreq.OrphanDependents = opts.OrphanDependents //nolint:staticcheck // upstream still honours it
	resp, err := s.ns.Delete(ctx, dreq)
	if err != nil {
		return nil, err
	}
	return out.Render(resp.GetObject())
}

// immortal reports the namespaces NamespaceLifecycle admission keeps from
// deletion.
func immortal(name string) bool {
	return name == metav1.NamespaceDefault || name == metav1.NamespaceSystem || name == metav1.NamespacePublic
}

// deleteOptions reads DeleteOptions from the body, else from the query,
// and validates them as kube-apiserver does.
func deleteOptions(body []byte, query url.Values, req *gatewayv1.DeleteRequest) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if len(body) > 0 {
		if err := utiljson.Unmarshal(body, opts); err != nil {
			return nil, listing.PlainError(err)
		}
	} else {
		opts.DryRun = req.GetDryRun()
		opts.GracePeriodSeconds = req.GracePeriodSeconds
		if p := req.GetPropagationPolicy(); p != "" {
			pp := metav1.DeletionPropagation(p)
			opts.PropagationPolicy = &pp
		}
		if v := query.Get("orphanDependents"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			opts.OrphanDependents = &b //nolint:staticcheck // upstream still honours it
		}
	}
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	return opts, nil
}
