package gateway

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"

	"github.com/crdplane/crdplane/pkg/convcache"
	"github.com/crdplane/crdplane/pkg/crdcache"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/gateway/crd"
	"github.com/crdplane/crdplane/services/gateway/discovery"
)

// kubeAPI implements crdplane.gateway.v1.KubeAPIService: the Kubernetes
// REST verbs, run as a pipeline over the registry, validator, converter and
// storage services. grpc-gateway calls it over an in-process connection.
type kubeAPI struct {
	gatewayv1.UnimplementedKubeAPIServiceServer

	registry  registryv1.RegistryServiceClient
	discovery *discovery.Server
	crdAPI    *crd.Server // the verbs on CRDs
	storage   storagev1.StorageServiceClient
	validator validatorv1.ValidatorServiceClient
	converter converterv1.ConverterServiceClient // nil: webhook conversion unavailable
	converted *convcache.Cache                   // webhook-converted objects served (nil: none kept)

	crds      *crdcache.Cache
	crdEvents *crdEvents
	schemas   schemaCache

	readyChecks       func() []readyCheck
	minRequestTimeout time.Duration
	crdWait           time.Duration
	now               func() time.Time
	log               *slog.Logger
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
