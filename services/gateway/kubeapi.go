package gateway

import (
	"context"
	"log/slog"

	"google.golang.org/genproto/googleapis/api/httpbody"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/cr"
	"github.com/crdplane/crdplane/services/gateway/crd"
	"github.com/crdplane/crdplane/services/gateway/discovery"
	"github.com/crdplane/crdplane/services/gateway/rbac"
)

// kubeAPI implements crdplane.gateway.v1.KubeAPIService: each verb
// dispatches to the CRDs' verbs (package crd, over the registry) or to the
// custom resources' (package cr, over the validator, converter and
// storage), discovery to package discovery. grpc-gateway calls it
// in-process.
type kubeAPI struct {
	gatewayv1.UnimplementedKubeAPIServiceServer

	discovery *discovery.Server
	crdAPI    *crd.Server  // the verbs on CRDs
	crAPI     *cr.Server   // the verbs on custom resources
	rbacAPI   *rbac.Server // rbac.authorization.k8s.io

	readyChecks func() []readyCheck
	log         *slog.Logger
}

var _ gatewayv1.KubeAPIServiceServer = (*kubeAPI)(nil)

// Discovery, OpenAPI and /version: package discovery.

// GetCoreDiscovery serves /api.
func (a *kubeAPI) GetCoreDiscovery(ctx context.Context, req *gatewayv1.GetCoreDiscoveryRequest) (*httpbody.HttpBody, error) {
	return a.discovery.GetCoreDiscovery(ctx, req)
}

// GetDiscovery serves /apis, /apis/<g> and /apis/<g>/<v>.
func (a *kubeAPI) GetDiscovery(ctx context.Context, req *gatewayv1.GetDiscoveryRequest) (*httpbody.HttpBody, error) {
	return a.discovery.GetDiscovery(ctx, req)
}

// GetOpenAPI serves /openapi/v3 and its documents.
func (a *kubeAPI) GetOpenAPI(ctx context.Context, req *gatewayv1.GetOpenAPIRequest) (*httpbody.HttpBody, error) {
	return a.discovery.GetOpenAPI(ctx, req)
}

// GetVersion serves /version.
func (a *kubeAPI) GetVersion(ctx context.Context, req *gatewayv1.GetVersionRequest) (*httpbody.HttpBody, error) {
	return a.discovery.GetVersion(ctx, req)
}
