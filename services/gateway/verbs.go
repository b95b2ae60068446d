package gateway

import (
	"context"

	"google.golang.org/genproto/googleapis/api/httpbody"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objsize"
	"github.com/crdplane/crdplane/pkg/patch"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/cr"
	"github.com/crdplane/crdplane/services/gateway/crd"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
	"github.com/crdplane/crdplane/services/gateway/rbac"
	"github.com/crdplane/crdplane/services/gateway/watch"
)

// The verbs of KubeAPIService: each negotiates the response format,
// validates the request's options and decodes its body once (httpx),
// then hands the request to the CRDs' verbs (package crd) or to the
// custom resources' (package cr).

// Get serves GET on one object (and its status and scale subresources).
func (a *kubeAPI) Get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.Get(ctx, req))
	}
	rm := httpx.RequestMetaFrom(ctx)
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	out, err := httpx.NegotiateOutput(rm, readTarget(crds, req.GetSubresource()))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	if crds {
		return httpx.Reply(a.crdAPI.Get(ctx, req, out, rm))
	}
	return httpx.Reply(a.crAPI.Get(ctx, req, out, rm))
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

// List serves GET on a collection.
func (a *kubeAPI) List(ctx context.Context, req *gatewayv1.ListRequest) (*httpbody.HttpBody, error) {
	rm := httpx.RequestMetaFrom(ctx)
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.List(ctx, req, listParams(req)))
	}
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	target := httpx.TargetCustomResource
	if crds {
		target = httpx.TargetCRDCollection
	}
	out, err := httpx.NegotiateOutput(rm, target)
	if err != nil {
		return httpx.Reply(nil, err)
	}
	params := listParams(req)
	if crds {
		return httpx.Reply(a.crdAPI.List(ctx, req.GetNamespace(), params, out, rm))
	}
	return httpx.Reply(a.crAPI.List(ctx, req, params, out, rm))
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

// Watch serves watches (the legacy /watch/ paths, and ?watch=true reads
// the edge rewrites onto them).
func (a *kubeAPI) Watch(req *gatewayv1.WatchRequest, stream gatewayv1.KubeAPIService_WatchServer) error {
	ctx := stream.Context()
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
	if rbac.IsRBAC(req.GetGroup()) {
		if err := a.rbacAPI.Watch(ctx, req, params, stream); err != nil {
			return watch.Fail(ctx, stream, httpx.TargetRBACCollection, err)
		}
		return nil
	}
	rm := httpx.RequestMetaFrom(ctx)
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	target := httpx.TargetCustomResource
	if crds {
		target = httpx.TargetCRDCollection
	}
	out, err := httpx.NegotiateWatch(rm, target)
	if err != nil {
		return watch.Fail(ctx, stream, target, err)
	}
	if crds {
		err = a.crdAPI.Watch(ctx, req.GetNamespace(), params, stream, out, rm)
	} else {
		err = a.crAPI.Watch(ctx, req, params, stream, out, rm)
	}
	if err != nil {
		return watch.Fail(ctx, stream, target, err)
	}
	return nil
}

// Create serves POST on a collection.
func (a *kubeAPI) Create(ctx context.Context, req *gatewayv1.CreateRequest) (*httpbody.HttpBody, error) {
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.Create(ctx, req))
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, writeTarget(req.GetGroup(), req.GetVersion(), req.GetResource(), ""))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	opts := &metav1.CreateOptions{DryRun: req.GetDryRun(), FieldManager: req.GetFieldManager(), FieldValidation: req.GetFieldValidation()}
	if errs := metav1validation.ValidateCreateOptions(opts); len(errs) > 0 {
		return httpx.Reply(nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "CreateOptions"}, "", errs))
	}
	body, err := httpx.DecodeRequestBody(rm, req.GetBody().GetData(), a.bodyFor(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), ""))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	if crds && body.ConvErr != nil {
		return httpx.Reply(nil, body.YAMLError())
	}
	// A YAML body can grow in its conversion: what admission would see is
	// bounded as a patch result is.
	if err := objsize.Check(len(body.JSON)); err != nil {
		return httpx.Reply(nil, err)
	}
	if crds {
		return httpx.Reply(a.crdAPI.Create(ctx, req, opts, body.JSON, out))
	}
	return httpx.Reply(a.crAPI.Create(ctx, req, opts, body, out))
}

// Update serves PUT on an object or its status.
func (a *kubeAPI) Update(ctx context.Context, req *gatewayv1.UpdateRequest) (*httpbody.HttpBody, error) {
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.Update(ctx, req))
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, writeTarget(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetSubresource()))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	opts := &metav1.UpdateOptions{DryRun: req.GetDryRun(), FieldManager: req.GetFieldManager(), FieldValidation: req.GetFieldValidation()}
	if errs := metav1validation.ValidateUpdateOptions(opts); len(errs) > 0 {
		return httpx.Reply(nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "UpdateOptions"}, "", errs))
	}
	body, err := httpx.DecodeRequestBody(rm, req.GetBody().GetData(), a.bodyFor(ctx, req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetNamespace(), req.GetSubresource()))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	if crds && body.ConvErr != nil {
		return httpx.Reply(nil, body.YAMLError())
	}
	// A YAML body can grow in its conversion: what admission would see is
	// bounded as a patch result is.
	if err := objsize.Check(len(body.JSON)); err != nil {
		return httpx.Reply(nil, err)
	}
	if crds {
		return httpx.Reply(a.crdAPI.Update(ctx, req, opts, body.JSON, out))
	}
	return httpx.Reply(a.crAPI.Update(ctx, req, opts, body, out))
}

// Patch serves PATCH on an object or its status and scale: JSON merge
// patch, JSON patch and server-side apply; strategic merge patches are 415
// for custom resources.
func (a *kubeAPI) Patch(ctx context.Context, req *gatewayv1.PatchRequest) (*httpbody.HttpBody, error) {
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.Patch(ctx, req))
	}
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, writeTarget(req.GetGroup(), req.GetVersion(), req.GetResource(), req.GetSubresource()))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	pt := patch.Type(rm.ContentType)
	crds := isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource())
	if !crds && !patch.Supported(pt) && pt != patch.ApplyYAML {
		return httpx.Reply(nil, patch.UnsupportedError(pt))
	}
	if crds && !crd.PatchTypeAllowed(pt) {
		return httpx.Reply(nil, crd.ErrUnsupportedMediaType())
	}
	opts := &metav1.PatchOptions{DryRun: req.GetDryRun(), FieldManager: req.GetFieldManager(), FieldValidation: req.GetFieldValidation()}
	if req.GetForce() {
		force := true
		opts.Force = &force
	}
	if errs := metav1validation.ValidatePatchOptions(opts, types.PatchType(pt)); len(errs) > 0 {
		return httpx.Reply(nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs))
	}
	if crds {
		return httpx.Reply(a.crdAPI.Patch(ctx, req, opts, pt, out))
	}
	return httpx.Reply(a.crAPI.Patch(ctx, req, opts, pt, out))
}

// Delete serves DELETE on one object.
func (a *kubeAPI) Delete(ctx context.Context, req *gatewayv1.DeleteRequest) (*httpbody.HttpBody, error) {
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, writeTarget(req.GetGroup(), req.GetVersion(), req.GetResource(), ""))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	body, err := httpx.DecodeDeleteBody(rm, req.GetBody().GetData())
	if err != nil {
		return httpx.Reply(nil, err)
	}
	opts, err := cr.DeleteOptions(body, rm.Query(), req.GetDryRun(), req.GracePeriodSeconds, req.GetPropagationPolicy())
	if err != nil {
		return httpx.Reply(nil, err)
	}
	if isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource()) {
		return httpx.Reply(a.crdAPI.Delete(ctx, req, opts, out))
	}
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.Delete(ctx, req, opts, out))
	}
	// Its errors are the wire's already (httpx.Reply), its rendering as before.
	return a.crAPI.Delete(ctx, req, opts, out)
}

// DeleteCollection serves DELETE on a collection: every selected object is
// deleted as by Delete; the answer lists them as they were.
func (a *kubeAPI) DeleteCollection(ctx context.Context, req *gatewayv1.DeleteCollectionRequest) (*httpbody.HttpBody, error) {
	rm := httpx.RequestMetaFrom(ctx)
	out, err := httpx.WriteOutput(rm, writeTarget(req.GetGroup(), req.GetVersion(), req.GetResource(), ""))
	if err != nil {
		return httpx.Reply(nil, err)
	}
	body, err := httpx.DecodeDeleteBody(rm, req.GetBody().GetData())
	if err != nil {
		return httpx.Reply(nil, err)
	}
	opts, err := cr.DeleteOptions(body, rm.Query(), req.GetDryRun(), req.GracePeriodSeconds, req.GetPropagationPolicy())
	if err != nil {
		return httpx.Reply(nil, err)
	}
	params := listing.Params{LabelSelector: req.GetLabelSelector(), FieldSelector: req.GetFieldSelector()}
	if isCRDs(req.GetGroup(), req.GetVersion(), req.GetResource()) {
		return httpx.Reply(a.crdAPI.DeleteCollection(ctx, req.GetNamespace(), params, opts, out))
	}
	if rbac.IsRBAC(req.GetGroup()) {
		return httpx.Reply(a.rbacAPI.DeleteCollection(ctx, req, params, opts, out))
	}
	return httpx.Reply(a.crAPI.DeleteCollection(ctx, req, params, opts, out))
}
