// Package rbac serves rbac.authorization.k8s.io/v1 (Roles, ClusterRoles,
// RoleBindings, ClusterRoleBindings) and apiregistration.k8s.io/v1
// (APIServices, with their status subresource): get, list, watch,
// create, update, patch (JSON, merge, strategic merge, apply), delete and
// deletecollection, each delegated to the registry's RBACService or
// APIRegistrationService (one generic store of built-in kinds there),
// with kube-apiserver's escalation checks on RBAC writes (escalate.go). Lists,
// tables and watches render through the same code as CRDs (packages
// listing and watch).
package rbac

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objsize"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"github.com/crdplane/crdplane/services/gateway/rbacauthz"
	"github.com/crdplane/crdplane/services/gateway/watch"
)

// Group and Version are the served group version of RBAC; APIRegistration
// the APIServices'.
const (
	Group           = rbacv1.GroupName
	Version         = "v1"
	APIVersion      = Group + "/" + Version
	APIRegistration = "apiregistration.k8s.io"
)

// kind is one served resource.
type kind struct {
	Group, Resource, Kind, ListKind string
	Namespaced                      bool
	Printer                         func() *listing.TablePrinter
	// Status: the kind has a status subresource.
	Status bool
}

// APIVersion is the kind's group version.
func (k kind) APIVersion() string { return k.Group + "/" + Version }

var kinds = map[string]kind{
	"roles":               {Group, "roles", "Role", "RoleList", true, listing.RolePrinter, false},
	"clusterroles":        {Group, "clusterroles", "ClusterRole", "ClusterRoleList", false, listing.RolePrinter, false},
	"rolebindings":        {Group, "rolebindings", "RoleBinding", "RoleBindingList", true, listing.RoleBindingPrinter, false},
	"clusterrolebindings": {Group, "clusterrolebindings", "ClusterRoleBinding", "ClusterRoleBindingList", false, listing.ClusterRoleBindingPrinter, false},
	"apiservices":         {APIRegistration, "apiservices", "APIService", "APIServiceList", false, listing.APIServicePrinter, true},
}

// IsRBAC reports whether a request's group is one this package serves:
// rbac.authorization.k8s.io or apiregistration.k8s.io.
func IsRBAC(group string) bool { return group == Group || group == APIRegistration }

// KindOf is the kind of a served resource ("" for another).
func KindOf(resource string) string { return kinds[resource].Kind }

// Config is what a Server needs.
type Config struct {
	// RBAC serves the objects (the registry).
	RBAC registryv1.RBACServiceClient
	// APIRegistration serves the APIServices (the registry).
	APIRegistration registryv1.APIRegistrationServiceClient
	// MinRequestTimeout is the watch timeout's base.
	MinRequestTimeout time.Duration
	// Authorizer is the request authorizers' chain, asked for the
	// escalate and bind verbs.
	Authorizer authorizer.UnconditionalAuthorizer
	// Policy is the RBAC policy the escalation checks compare a write
	// with (the gateway's RBAC cache).
	Policy func() *rbacauthz.Policy
}

// Server serves the RBAC resources. Errors are Kubernetes Status errors.
type Server struct {
	rbac              registryv1.RBACServiceClient
	apiReg            registryv1.APIRegistrationServiceClient
	minRequestTimeout time.Duration
	authz             authorizer.UnconditionalAuthorizer
	policy            func() *rbacauthz.Policy
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	return &Server{rbac: cfg.RBAC, apiReg: cfg.APIRegistration, minRequestTimeout: cfg.MinRequestTimeout, authz: cfg.Authorizer, policy: cfg.Policy}
}

// client is the registry's service of a kind's group.
func (s *Server) client(k kind) registryv1.RBACServiceClient {
	if k.Group == APIRegistration {
		return s.apiReg
	}
	return s.rbac
}

// resolve checks the path (version v1, a served resource of the group, its
// scope, no subresource but a kind's status) and returns the kind and the
// registry's target.
func resolve(group, version, resource, namespace, sub string, collection bool) (kind, *registryv1.RBACTarget, error) {
	k, ok := kinds[resource]
	if version != Version || !ok || k.Group != group || (sub != "" && (sub != "status" || !k.Status || collection)) || (!k.Namespaced && namespace != "") {
		return kind{}, nil, httpx.ErrNotFound()
	}
	if k.Namespaced && namespace == "" && !collection {
		return kind{}, nil, httpx.ErrNotFound()
	}
	return k, &registryv1.RBACTarget{Resource: resource, Namespace: namespace}, nil
}

// checkFieldSelector is the typed API's field label conversion:
// metadata.name and metadata.namespace only.
func checkFieldSelector(sel fields.Selector) error {
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

// Get serves GET of one object.
func (s *Server) Get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), req.GetSubresource(), false)
	if err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.NegotiateOutput(rm, httpx.TargetRBAC)
	if err != nil {
		return nil, err
	}
	resp, err := s.client(k).Get(ctx, &registryv1.RBACServiceGetRequest{Target: t, Request: &registryv1.GetRequest{Name: req.GetName()}})
	if err != nil {
		return nil, err
	}
	if out.As == httpx.AsPartialObjectMetadataList {
		// upstream names the internal type: *rbac.Role, *apiregistration.APIService
		pkg := "rbac"
		if k.Group == APIRegistration {
			pkg = "apiregistration"
		}
		return nil, listing.ErrNotAcceptableConversion(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (*%s.%s)", pkg, k.Kind))
	}
	return listing.RespondObject(out, rm, resp.GetObject(), k.Printer)
}

func (s *Server) list(ctx context.Context, k kind, t *registryv1.RBACTarget, params listing.Params) (httpx.ListPage, error) {
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return httpx.ListPage{}, err
	}
	if err := checkFieldSelector(opts.FieldSelector); err != nil {
		return httpx.ListPage{}, err
	}
	lo, minRV, err := listing.StorageOptions(opts, nil)
	if err != nil {
		return httpx.ListPage{}, err
	}
	resp, err := s.client(k).List(ctx, &registryv1.RBACServiceListRequest{Target: t, Request: &registryv1.ListRequest{Options: lo}})
	if err != nil {
		return httpx.ListPage{}, err
	}
	if resp.GetResourceVersion() < minRV {
		return httpx.ListPage{}, listing.ErrTooLargeRV(opts.ResourceVersion, resp.GetResourceVersion(), 1)
	}
	return httpx.ListPage{Items: resp.GetObjects(), ResourceVersion: resp.GetResourceVersion(), ContinueToken: resp.GetContinueToken(), Remaining: resp.RemainingItemCount}, nil
}

// List serves GET of a collection (in a namespace, or all).
func (s *Server) List(ctx context.Context, req *gatewayv1.ListRequest, params listing.Params) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), "", true)
	if err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.NegotiateOutput(rm, httpx.TargetRBACCollection)
	if err != nil {
		return nil, err
	}
	page, err := s.list(ctx, k, t, params)
	if err != nil {
		return listing.ContinueExpired(ctx, err, params.ContinueToken, out)
	}
	if out.As == "" {
		return out.RenderTypedList(k.APIVersion(), k.ListKind, page, func() ([]byte, error) { return listing.RenderTypedList(k.APIVersion(), k.ListKind, page) })
	}
	return listing.RespondList(out, rm, k.APIVersion(), k.ListKind, page, k.Printer)
}

// Watch streams a watch of a collection (or of one object, params.Name).
func (s *Server) Watch(ctx context.Context, req *gatewayv1.WatchRequest, params listing.Params, stream gatewayv1.KubeAPIService_WatchServer) error {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), "", true)
	if err != nil {
		return err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.NegotiateWatch(rm, httpx.TargetRBACCollection)
	if err != nil {
		return err
	}
	opts, err := listing.ParseOptions(params)
	if err != nil {
		return err
	}
	if err := checkFieldSelector(opts.FieldSelector); err != nil {
		return err
	}
	return watch.ServeRegistry(ctx, stream, watch.RegistryKind{APIVersion: k.APIVersion(), Kind: k.Kind, Printer: k.Printer, MinRequestTimeout: s.minRequestTimeout},
		opts, params.Name, out, rm, func(ctx context.Context, wr *registryv1.WatchRequest) (func() (watch.Event, error), error) {
			backend, err := s.client(k).Watch(ctx, &registryv1.RBACServiceWatchRequest{Target: t, Request: wr})
			if err != nil {
				return nil, err
			}
			return func() (watch.Event, error) { return backend.Recv() }, nil
		})
}

// decodeBody reads a create or update body (JSON, YAML or protobuf) as
// the object's JSON.
func decodeBody(rm httpx.RequestMeta, raw []byte, k kind) ([]byte, error) {
	body, err := httpx.DecodeRequestBody(rm, raw, httpx.BodyFor{Target: httpx.TargetRBAC, Group: k.Group, Version: Version,
		Kind: func() (string, error) { return k.Kind, nil }})
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

// Create serves POST of an object.
func (s *Server) Create(ctx context.Context, req *gatewayv1.CreateRequest) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), "", false)
	if err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetRBAC)
	if err != nil {
		return nil, err
	}
	wo, err := httpx.BuiltinCreateOptions(ctx, req.GetDryRun(), req.GetFieldManager(), req.GetFieldValidation())
	if err != nil {
		return nil, err
	}
	body, err := decodeBody(rm, req.GetBody().GetData(), k)
	if err != nil {
		return nil, err
	}
	if err := s.checkEscalation(ctx, k, req.GetNamespace(), body); err != nil {
		return nil, err
	}
	resp, err := s.client(k).Create(ctx, &registryv1.RBACServiceCreateRequest{Target: t, Request: &registryv1.CreateRequest{
		Object: body, Options: wo}})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	httpx.SetHTTPCode(ctx, http.StatusCreated)
	return out.Render(resp.GetObject())
}

// Update serves PUT of an object (creating it when missing, as
// upstream's RBAC strategies allow).
func (s *Server) Update(ctx context.Context, req *gatewayv1.UpdateRequest) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), req.GetSubresource(), false)
	if err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetRBAC)
	if err != nil {
		return nil, err
	}
	wo, err := httpx.BuiltinUpdateOptions(ctx, req.GetDryRun(), req.GetFieldManager(), req.GetFieldValidation())
	if err != nil {
		return nil, err
	}
	body, err := decodeBody(rm, req.GetBody().GetData(), k)
	if err != nil {
		return nil, err
	}
	if err := s.checkUpdateEscalation(ctx, k, t, req.GetName(), body); err != nil {
		return nil, err
	}
	resp, err := s.client(k).Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: t, Request: &registryv1.UpdateRequest{
		Name: req.GetName(), Subresource: req.GetSubresource(), Object: body, Options: wo}})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	if resp.GetCreated() {
		httpx.SetHTTPCode(ctx, http.StatusCreated)
	}
	return out.Render(resp.GetObject())
}

// Patch serves PATCH of an object. A caller the escalation checks apply
// to has the patch run dry first, and the result checked, before it is
// written.
func (s *Server) Patch(ctx context.Context, req *gatewayv1.PatchRequest) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), req.GetSubresource(), false)
	if err != nil {
		return nil, err
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, httpx.TargetRBAC)
	if err != nil {
		return nil, err
	}
	pt, wo, err := httpx.BuiltinPatchOptions(ctx, req.GetDryRun(), req.GetFieldManager(), req.GetFieldValidation(), req.GetForce())
	if err != nil {
		return nil, err
	}
	preq := &registryv1.PatchRequest{Name: req.GetName(), Subresource: req.GetSubresource(), PatchType: pt, Patch: req.GetBody().GetData(), Options: wo}
	if s.escalationApplies(ctx) {
		dry := &registryv1.PatchRequest{Name: preq.Name, Subresource: preq.Subresource, PatchType: pt, Patch: preq.Patch, Options: &registryv1.WriteOptions{
			DryRun: true, FieldManager: wo.FieldManager, FieldValidation: wo.FieldValidation, Force: wo.Force, UserAgent: wo.UserAgent}}
		resp, err := s.client(k).Patch(ctx, &registryv1.RBACServicePatchRequest{Target: t, Request: dry})
		if err != nil {
			return nil, err
		}
		if err := s.checkUpdateEscalation(ctx, k, t, req.GetName(), resp.GetObject()); err != nil {
			return nil, err
		}
	}
	resp, err := s.client(k).Patch(ctx, &registryv1.RBACServicePatchRequest{Target: t, Request: preq})
	if err != nil {
		return nil, err
	}
	httpx.AddWarnings(ctx, resp.GetWarnings()...)
	if resp.GetCreated() {
		httpx.SetHTTPCode(ctx, http.StatusCreated)
	}
	return out.Render(resp.GetObject())
}

// Delete serves DELETE of an object (opts and out as the root read
// them, as for every kind).
func (s *Server) Delete(ctx context.Context, req *gatewayv1.DeleteRequest, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), "", false)
	if err != nil {
		return nil, err
	}
	resp, err := s.delete(ctx, k, t, req.GetName(), opts)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Metadata struct {
			Name       string    `json:"name"`
			UID        types.UID `json:"uid"`
			Finalizers []string  `json:"finalizers"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(resp, &obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(obj.Metadata.Finalizers) > 0 {
		// still there, marked: the object, 202 when dependents were asked
		// to go first with orphanDependents=false (upstream's handler)
		if od := opts.OrphanDependents; od != nil && !*od { //nolint:staticcheck // upstream still honours it
			httpx.SetHTTPCode(ctx, http.StatusAccepted)
		}
		return out.Render(resp)
	}
	// removed: upstream's store (ReturnDeletedObject unset) answers a
	// Status naming it
	st, err := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: obj.Metadata.Name, Group: k.Group, Kind: t.GetResource(), UID: obj.Metadata.UID},
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out.Render(st)
}

func (s *Server) delete(ctx context.Context, k kind, t *registryv1.RBACTarget, name string, opts *metav1.DeleteOptions) ([]byte, error) {
	dreq := &registryv1.DeleteRequest{Name: name, DryRun: len(opts.DryRun) > 0, OrphanDependents: opts.OrphanDependents} //nolint:staticcheck // upstream still honours orphanDependents
	if opts.PropagationPolicy != nil {
		dreq.PropagationPolicy = string(*opts.PropagationPolicy)
	}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			dreq.PreconditionUid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			dreq.PreconditionResourceVersion = *p.ResourceVersion
		}
	}
	resp, err := s.client(k).Delete(ctx, &registryv1.RBACServiceDeleteRequest{Target: t, Request: dreq})
	if err != nil {
		return nil, err
	}
	return resp.GetObject(), nil
}

// DeleteCollection deletes the objects a list selects and answers the
// list of those deleted.
func (s *Server) DeleteCollection(ctx context.Context, req *gatewayv1.DeleteCollectionRequest, params listing.Params, opts *metav1.DeleteOptions, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	k, t, err := resolve(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), "", true)
	if err != nil {
		return nil, err
	}
	var all httpx.ListPage
	for {
		page, err := s.list(ctx, k, t, params)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			name, ns := listing.ItemNameNamespace(it)
			if _, err := s.delete(ctx, k, &registryv1.RBACTarget{Resource: t.GetResource(), Namespace: ns}, name, opts); err != nil {
				if kstatus.FromError(err).Code == http.StatusNotFound {
					continue
				}
				return nil, fmt.Errorf("delete %s %s: %w", k.Kind, name, err)
			}
		}
		all.Items = append(all.Items, page.Items...)
		all.ResourceVersion = page.ResourceVersion
		if page.ContinueToken == "" {
			break
		}
		params.ContinueToken = page.ContinueToken
	}
	return out.RenderTypedList(k.APIVersion(), k.ListKind, all, func() ([]byte, error) { return listing.RenderTypedList(k.APIVersion(), k.ListKind, all) })
}
