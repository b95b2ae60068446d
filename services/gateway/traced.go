package gateway

import (
	"context"

	"go.opentelemetry.io/otel"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/status"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/watch"
)

// tracedAPI serves KubeAPIService's unary methods to grpc-gateway directly
// (its in-process HandlerServer registration: no gRPC hop, no copy of the
// response body), each call in a span named as a gRPC server span would
// be ("crdplane.gateway.v1.KubeAPIService/<Method>"); watches are served
// from HTTP directly (watch/http.go).
type tracedAPI struct {
	*kubeAPI
	tracer trace.Tracer
}

var _ gatewayv1.KubeAPIServiceServer = tracedAPI{}

func newTracedAPI(a *kubeAPI) tracedAPI {
	return tracedAPI{kubeAPI: a, tracer: otel.Tracer("github.com/crdplane/crdplane/services/gateway")}
}

// traced runs one call in its span.
func traced[Req any](ctx context.Context, t tracedAPI, method string, req Req, call func(context.Context, Req) (*httpbody.HttpBody, error)) (*httpbody.HttpBody, error) {
	ctx, span := t.tracer.Start(ctx, "crdplane.gateway.v1.KubeAPIService/"+method, trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	resp, err := call(ctx, req)
	if err != nil {
		span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	return resp, err
}

func (t tracedAPI) GetVersion(ctx context.Context, req *gatewayv1.GetVersionRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "GetVersion", req, t.kubeAPI.GetVersion)
}

func (t tracedAPI) Healthz(ctx context.Context, req *gatewayv1.HealthzRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Healthz", req, t.kubeAPI.Healthz)
}

func (t tracedAPI) Livez(ctx context.Context, req *gatewayv1.LivezRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Livez", req, t.kubeAPI.Livez)
}

func (t tracedAPI) Readyz(ctx context.Context, req *gatewayv1.ReadyzRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Readyz", req, t.kubeAPI.Readyz)
}

func (t tracedAPI) GetCoreDiscovery(ctx context.Context, req *gatewayv1.GetCoreDiscoveryRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "GetCoreDiscovery", req, t.kubeAPI.GetCoreDiscovery)
}

func (t tracedAPI) GetDiscovery(ctx context.Context, req *gatewayv1.GetDiscoveryRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "GetDiscovery", req, t.kubeAPI.GetDiscovery)
}

func (t tracedAPI) GetOpenAPI(ctx context.Context, req *gatewayv1.GetOpenAPIRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "GetOpenAPI", req, t.kubeAPI.GetOpenAPI)
}

func (t tracedAPI) Get(ctx context.Context, req *gatewayv1.GetRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Get", req, t.kubeAPI.Get)
}

func (t tracedAPI) List(ctx context.Context, req *gatewayv1.ListRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "List", req, t.kubeAPI.List)
}

func (t tracedAPI) Create(ctx context.Context, req *gatewayv1.CreateRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Create", req, t.kubeAPI.Create)
}

func (t tracedAPI) Update(ctx context.Context, req *gatewayv1.UpdateRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Update", req, t.kubeAPI.Update)
}

func (t tracedAPI) Patch(ctx context.Context, req *gatewayv1.PatchRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Patch", req, t.kubeAPI.Patch)
}

func (t tracedAPI) Delete(ctx context.Context, req *gatewayv1.DeleteRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "Delete", req, t.kubeAPI.Delete)
}

func (t tracedAPI) DeleteCollection(ctx context.Context, req *gatewayv1.DeleteCollectionRequest) (*httpbody.HttpBody, error) {
	return traced(ctx, t, "DeleteCollection", req, t.kubeAPI.DeleteCollection)
}

// Watch runs a watch in its span.
func (t tracedAPI) Watch(req *gatewayv1.WatchRequest, stream gatewayv1.KubeAPIService_WatchServer) error {
	ctx, span := t.tracer.Start(stream.Context(), "crdplane.gateway.v1.KubeAPIService/Watch", trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	return t.kubeAPI.Watch(req, ctxStream{stream, ctx})
}

// ctxStream is a watch stream with another context.
type ctxStream struct {
	gatewayv1.KubeAPIService_WatchServer
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// WriteFrame and Flush pass the underlying stream's frameWriter through.
func (s ctxStream) WriteFrame(frame []byte) error {
	if fw, ok := s.KubeAPIService_WatchServer.(watch.FrameWriter); ok {
		return fw.WriteFrame(frame)
	}
	return s.Send(&httpbody.HttpBody{ContentType: httpx.ContentTypeJSON, Data: frame})
}

func (s ctxStream) Flush() error {
	if fw, ok := s.KubeAPIService_WatchServer.(watch.FrameWriter); ok {
		return fw.Flush()
	}
	return nil
}
