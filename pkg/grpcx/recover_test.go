package grpcx

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// panicky is a health service whose handlers panic when asked for
// "panic", and otherwise answer SERVING.
type panicky struct {
	healthpb.UnimplementedHealthServer
}

func (panicky) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if req.Service == "panic" {
		var m map[string]int
		m["boom"]++ //nolint:staticcheck // SA5000: a nil map write: a runtime panic, as a real bug would be
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (panicky) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	if req.Service == "panic" {
		panic("watch handler bug")
	}
	return nil
}

// wireAndDirect returns a health client over a gRPC server from NewServer
// (in-memory listener) and one calling the same service directly.
func wireAndDirect(t *testing.T, impl healthpb.HealthServer) map[string]healthpb.HealthClient {
	t.Helper()
	n := probeSeq.Add(1)
	wireName := fmt.Sprintf("recover-wire-%d", n)
	srv := NewServer()
	healthpb.RegisterHealthServer(srv, impl)
	lis := ListenInProcess(wireName)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	directName := fmt.Sprintf("recover-direct-%d", n)
	ip := NewInProcess(InProcessConfig{})
	healthpb.RegisterHealthServer(ip, impl)
	ip.Publish(directName)
	t.Cleanup(ip.Stop)

	clients := map[string]healthpb.HealthClient{}
	for path, name := range map[string]string{"wire": wireName, "direct": directName} {
		cc, err := Dial("inproc://" + name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		clients[path] = healthpb.NewHealthClient(cc)
	}
	return clients
}

// TestRecoverPanics: a panicking handler, unary or streaming, over gRPC or
// by a direct call, fails its call with Internal, is counted in
// crdplane_panics_total{service} and leaves the process (and the server)
// running.
func TestRecoverPanics(t *testing.T) {
	const svc = "grpc.health.v1.Health"
	for path, client := range wireAndDirect(t, panicky{}) {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			before := metrics.Panics(svc)
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "panic"})
			if s := status.Convert(err); s.Code() != codes.Internal || !strings.Contains(s.Message(), "/grpc.health.v1.Health/Check: the server panicked") {
				t.Fatalf("unary panic: %v", err)
			}
			if got := metrics.Panics(svc) - before; got != 1 {
				t.Errorf("panics counted: %v, want 1", got)
			}

			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "panic"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("first message: %v", err)
			}
			_, err = stream.Recv()
			if s := status.Convert(err); s.Code() != codes.Internal || !strings.Contains(s.Message(), "/grpc.health.v1.Health/Watch: the server panicked") {
				t.Fatalf("stream panic: %v", err)
			}
			if got := metrics.Panics(svc) - before; got != 2 {
				t.Errorf("panics counted: %v, want 2", got)
			}

			// The server still serves.
			if resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("after the panics: %v %v", resp, err)
			}
		})
	}
}

// TestMessageSizeLimits: a request over MaxRequestMessageSize is refused
// with ResourceExhausted by the server (a client that would send it) and by
// the client itself; one within it passes.
func TestMessageSizeLimits(t *testing.T) {
	big := strings.Repeat("x", MaxRequestMessageSize+1)
	fits := strings.Repeat("x", MaxRequestMessageSize-64)
	for path, client := range wireAndDirect(t, panicky{}) {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: fits}); err != nil {
				t.Fatalf("request within the limit: %v", err)
			}
			// The client refuses to send it.
			_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: big})
			if s := status.Convert(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "larger than max") {
				t.Fatalf("oversized request (client limit): %v", err)
			}
			// The server refuses to receive it from a client that sends it.
			_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: big}, grpc.MaxCallSendMsgSize(2*MaxRequestMessageSize))
			if s := status.Convert(err); s.Code() != codes.ResourceExhausted || !strings.Contains(s.Message(), "received message larger than max") {
				t.Fatalf("oversized request (server limit): %v", err)
			}
		})
	}
}
