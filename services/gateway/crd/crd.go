// Package crd serves the gateway's verbs on the CRDs themselves
// (apiextensions.k8s.io/v1 customresourcedefinitions, cluster-scoped, with a
// status subresource): get, list, watch, create, update, patch, delete and
// deletecollection, each delegated to the registry. Lists and watches
// render through the same code as custom resources (packages listing and
// watch).
package crd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/kstatus"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"github.com/crdplane/crdplane/services/gateway/watch"
)

// Group, Version and Resource address the CRDs themselves, served by the
// registry; Kind and ListKind are their kinds.
const (
	Group      = "apiextensions.k8s.io"
	Version    = "v1"
	Resource   = "customresourcedefinitions"
	Kind       = "CustomResourceDefinition"
	ListKind   = "CustomResourceDefinitionList"
	APIVersion = Group + "/" + Version
)

var crdGR = schema.GroupResource{Group: Group, Resource: Resource}

// Config is what a Server needs.
type Config struct {
	// Registry serves the CRDs.
	Registry registryv1.RegistryServiceClient
	// MinRequestTimeout is the watch timeout's base (kube-apiserver's
	// --min-request-timeout): a watch without timeoutSeconds lasts between
	// one and two times it.
	MinRequestTimeout time.Duration
}

// Server serves the verbs on CRDs. Errors are returned as Kubernetes
// Status errors (the caller turns them into gRPC errors).
type Server struct {
	registry          registryv1.RegistryServiceClient
	minRequestTimeout time.Duration
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	return &Server{registry: cfg.Registry, minRequestTimeout: cfg.MinRequestTimeout}
}

// IsCRDs reports whether group, version and resource address the CRDs.
func IsCRDs(group, version, resource string) bool {
	return group == Group && version == Version && resource == Resource
}

// crdScope rejects a namespaced path (CRDs are cluster-scoped) with 404.
func crdScope(namespace string) error {
	if namespace != "" {
		return httpx.ErrNotFound()
	}
	return nil
}

// checkCRDFieldSelector is upstream's check of a field selector on CRDs
// (runtime.DefaultMetaV1FieldSelectorConversion, the typed API's field
// label conversion): metadata.name and metadata.namespace only.
func checkCRDFieldSelector(sel fields.Selector) error {
	if sel == nil {
		return nil
	}
	for _, req := range sel.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return apierrors.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %q, %q", req.Field, "metadata.name", "metadata.namespace"))
		}
	}
	return nil
}

// PatchTypeAllowed reports whether upstream's PATCH route for CRDs (a
// go-restful route of a built-in type) consumes patches of type pt.
func PatchTypeAllowed(pt string) bool { return httpx.BuiltinPatchTypeAllowed(pt) }

// ErrUnsupportedMediaType is go-restful's 415 for a CRD patch of another
// type, as kube-apiserver renders it (a generic server response: details
// {}).
func ErrUnsupportedMediaType() error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", "415: Unsupported Media Type", 0, false)
}

func crdSubresource(sub, name string) error {
	if sub == "" || sub == "status" {
		return nil
	}
	return apierrors.NewNotFound(crdGR, name)
}

// Get serves GET on a CRD or its status.
func (s *Server) Get(ctx context.Context, req *gatewayv1.GetRequest, out httpx.OutputFormat, rm httpx.RequestMeta) (*httpbody.HttpBody, error) {
	if err := crdScope(req.GetNamespace()); err != nil {
		return nil, err
	}
	if err := crdSubresource(req.GetSubresource(), req.GetName()); err != nil {
		return nil, err
	}
	resp, err := s.registry.Get(ctx, &registryv1.GetRequest{Name: req.GetName()})
	if err != nil {
		return nil, err
	}
	if out.As == httpx.AsPartialObjectMetadataList {
		return nil, listing.ErrNotAcceptableConversion("you requested PartialObjectMetadataList, but the requested object is not a list (*apiextensions.CustomResourceDefinition)")
	}
	return listing.RespondObject(out, rm, resp.GetObject(), listing.DefaultPrinter)
}

func (s *Server) list(ctx context.Context, params listing.Params) (httpx.ListPage, error) {
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return httpx.ListPage{}, err
	}
	if err := checkCRDFieldSelector(opts.FieldSelector); err != nil {
		return httpx.ListPage{}, err
	}
	lo, minRV, err := listing.StorageOptions(opts, nil)
	if err != nil {
		return httpx.ListPage{}, err
	}
	resp, err := s.registry.List(ctx, &registryv1.ListRequest{Options: lo})
	if err != nil {
		return httpx.ListPage{}, err
	}
	if resp.GetResourceVersion() < minRV {
		return httpx.ListPage{}, listing.ErrTooLargeRV(opts.ResourceVersion, resp.GetResourceVersion(), 1)
	}
	return httpx.ListPage{
		Items:           resp.GetObjects(),
		ResourceVersion: resp.GetResourceVersion(),
		ContinueToken:   resp.GetContinueToken(),
		Remaining:       resp.RemainingItemCount,
	}, nil
}

// List serves GET on the CRDs (the negotiated form: the typed list, a Table, ...).
func (s *Server) List(ctx context.Context, namespace string, params listing.Params, out httpx.OutputFormat, rm httpx.RequestMeta) (*httpbody.HttpBody, error) {
	if err := crdScope(namespace); err != nil {
		return nil, err
	}
	page, err := s.list(ctx, params)
	if err != nil {
		return listing.ContinueExpired(ctx, err, params.ContinueToken, out)
	}
	if out.As == "" {
		return out.RenderTypedList(APIVersion, ListKind, page, func() ([]byte, error) { return listing.RenderTypedList(APIVersion, ListKind, page) })
	}
	return listing.RespondList(out, rm, APIVersion, ListKind, page, listing.DefaultPrinter)
}

// Watch streams a watch of the CRDs (or of one, params.Name) from the registry.
func (s *Server) Watch(ctx context.Context, namespace string, params listing.Params, stream gatewayv1.KubeAPIService_WatchServer, out httpx.OutputFormat, rm httpx.RequestMeta) error {
	if err := crdScope(namespace); err != nil {
		return err
	}
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return err
	}
	if err := checkCRDFieldSelector(opts.FieldSelector); err != nil {
		return err
	}
	return watch.ServeRegistry(ctx, stream, watch.RegistryKind{APIVersion: APIVersion, Kind: Kind, Printer: listing.DefaultPrinter, MinRequestTimeout: s.minRequestTimeout},
		opts, params.Name, out, rm, func(ctx context.Context, req *registryv1.WatchRequest) (func() (watch.Event, error), error) {
			backend, err := s.registry.Watch(ctx, req)
			if err != nil {
				return nil, err
			}
			return func() (watch.Event, error) { return backend.Recv() }, nil
		})
}

// Create serves POST of a CRD.
func (s *Server) Create(ctx context.Context, req *gatewayv1.CreateRequest, opts *metav1.CreateOptions, body []byte, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	if err := crdScope(req.GetNamespace()); err != nil {
		return nil, err
	}
	resp, err := s.registry.Create(ctx, &registryv1.CreateRequest{
		Object:  body,
		Options: httpx.RegistryWriteOptions(ctx, opts.DryRun, opts.FieldManager, opts.FieldValidation),
	})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	httpx.SetHTTPCode(ctx, http.StatusCreated)
	return out.Render(resp.GetObject())
}

// Update serves PUT of a CRD or its status.
func (s *Server) Update(ctx context.Context, req *gatewayv1.UpdateRequest, opts *metav1.UpdateOptions, body []byte, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	if err := crdScope(req.GetNamespace()); err != nil {
		return nil, err
	}
	if err := crdSubresource(req.GetSubresource(), req.GetName()); err != nil {
		return nil, err
	}
	resp, err := s.registry.Update(ctx, &registryv1.UpdateRequest{
		Name:        req.GetName(),
		Subresource: req.GetSubresource(),
		Object:      body,
		Options:     httpx.RegistryWriteOptions(ctx, opts.DryRun, opts.FieldManager, opts.FieldValidation),
	})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	return out.Render(resp.GetObject())
}

// Patch serves PATCH of a CRD or its status, server-side apply included.
func (s *Server) Patch(ctx context.Context, req *gatewayv1.PatchRequest, opts *metav1.PatchOptions, pt string, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	if err := crdScope(req.GetNamespace()); err != nil {
		return nil, err
	}
	if err := crdSubresource(req.GetSubresource(), req.GetName()); err != nil {
		return nil, err
	}
	wo := httpx.RegistryWriteOptions(ctx, opts.DryRun, opts.FieldManager, opts.FieldValidation)
	wo.Force = opts.Force != nil && *opts.Force
	resp, err := s.registry.Patch(ctx, &registryv1.PatchRequest{
		Name:        req.GetName(),
		Subresource: req.GetSubresource(),
		PatchType:   pt,
		Patch:       req.GetBody().GetData(),
		Options:     wo,
	})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	if resp.GetCreated() {
		// An apply that created the CRD.
		httpx.SetHTTPCode(ctx, http.StatusCreated)
	}
	return out.Render(resp.GetObject())
}

// Delete serves DELETE of a CRD.
func (s *Server) Delete(ctx context.Context, req *gatewayv1.DeleteRequest, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	if err := crdScope(req.GetNamespace()); err != nil {
		return nil, err
	}
	return s.delete(ctx, req.GetName(), opts, out)
}

func (s *Server) delete(ctx context.Context, name string, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	dreq := &registryv1.DeleteRequest{Name: name, DryRun: len(opts.DryRun) > 0}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			dreq.PreconditionUid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			dreq.PreconditionResourceVersion = *p.ResourceVersion
		}
	}
	resp, err := s.registry.Delete(ctx, dreq)
	if err != nil {
		return nil, err
	}
	return out.Render(resp.GetObject())
}

// DeleteCollection deletes the CRDs a list selects, page by page, and answers
// the list of those deleted.
func (s *Server) DeleteCollection(ctx context.Context, namespace string, params listing.Params, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	if err := crdScope(namespace); err != nil {
		return nil, err
	}
	var all httpx.ListPage
	for {
		page, err := s.list(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			name, _ := listing.ItemNameNamespace(it)
			if _, err := s.delete(ctx, name, opts, httpx.OutputFormat{}); err != nil {
				if kstatus.FromError(err).Code == http.StatusNotFound {
					continue
				}
				return nil, fmt.Errorf("delete CRD %s: %w", name, err)
			}
		}
		all.Items = append(all.Items, page.Items...)
		all.ResourceVersion = page.ResourceVersion
		if page.ContinueToken == "" {
			break
		}
		params.ContinueToken = page.ContinueToken
	}
	return out.RenderTypedList(APIVersion, ListKind, all, func() ([]byte, error) { return listing.RenderTypedList(APIVersion, ListKind, all) })
}
