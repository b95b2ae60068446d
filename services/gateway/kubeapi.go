package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/pkg/kstatus"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// kubeAPI implements crdplane.gateway.v1.KubeAPIService: the Kubernetes
// REST verbs, run as a pipeline over the registry, validator, converter and
// storage services. grpc-gateway calls it over an in-process connection.
type kubeAPI struct {
	gatewayv1.UnimplementedKubeAPIServiceServer

	registry  registryv1.RegistryServiceClient
	openapi   registryv1.OpenAPIServiceClient
	storage   storagev1.StorageServiceClient
	validator validatorv1.ValidatorServiceClient
	converter converterv1.ConverterServiceClient // nil: webhook conversion unavailable

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

// toGRPC turns any error of the pipeline into the gRPC error the edge
// renders: Kubernetes Status errors keep their Status, gRPC errors from the
// backends pass through (their KubeStatus details included), anything else
// is a 500.
func toGRPC(err error) error {
	if err == nil {
		return nil
	}
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		return kstatus.ToGRPC(err)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return kstatus.ToGRPC(apierrors.NewTimeoutError(err.Error(), 0))
	}
	return kstatus.ToGRPC(apierrors.NewInternalError(err))
}

// reply wraps a handler's result for the wire.
func reply(b *httpbody.HttpBody, err error) (*httpbody.HttpBody, error) {
	if err != nil {
		return nil, toGRPC(err)
	}
	return b, nil
}
