package grpcx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// probe is a health service whose answers the tests choose by the service
// name asked for.
type probe struct {
	healthpb.UnimplementedHealthServer
	last     *healthpb.HealthCheckRequest // the last request, as the handler got it
	canceled atomic.Int64                 // handlers that saw their context end
}

func (p *probe) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	p.last = req
	switch req.Service {
	case "status":
		return nil, status.Error(codes.NotFound, "no such thing")
	case "plain":
		return nil, errors.New("plain error")
	case "deadline":
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, status.Error(codes.FailedPrecondition, "no deadline")
		}
		return nil, status.Error(codes.Aborted, dl.Format(time.RFC3339Nano))
	case "metadata":
		md, _ := metadata.FromIncomingContext(ctx)
		if _, out := metadata.FromOutgoingContext(ctx); out {
			return nil, status.Error(codes.Internal, "the caller's outgoing metadata leaked into the handler")
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs("h", "header-"+strings.Join(md.Get("x-in"), ",")))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("t", "trailer"))
	case "block":
		<-ctx.Done()
		p.canceled.Add(1)
		return nil, ctx.Err()
	}
	req.Service = "changed by the handler"
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (p *probe) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	_ = stream.SendHeader(metadata.Pairs("h", "watch"))
	for i := range 3 {
		if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_ServingStatus(i)}); err != nil {
			return err
		}
	}
	switch req.Service {
	case "fail":
		return status.Error(codes.ResourceExhausted, "watch failed")
	case "block":
		<-stream.Context().Done()
		p.canceled.Add(1)
		return stream.Context().Err()
	}
	stream.SetTrailer(metadata.Pairs("t", "done"))
	return nil
}

var probeSeq atomic.Int64

// publish publishes a probe directly and dials it.
func publish(t *testing.T, cfg InProcessConfig) (*probe, *InProcess, healthpb.HealthClient) {
	t.Helper()
	name := fmt.Sprintf("probe-%d", probeSeq.Add(1))
	p := &probe{}
	ip := NewInProcess(cfg)
	healthpb.RegisterHealthServer(ip, p)
	ip.Publish(name)
	t.Cleanup(ip.Stop)
	cc, err := Dial("inproc://" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return p, ip, healthpb.NewHealthClient(cc)
}

func TestInProcessUnary(t *testing.T) {
	p, _, client := publish(t, InProcessConfig{})
	ctx := context.Background()

	req := &healthpb.HealthCheckRequest{Service: "ok"}
	resp, err := client.Check(ctx, req)
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("%v, %v", resp, err)
	}
	// Each side has its own copy of the request.
	if req.Service != "ok" || p.last == req {
		t.Errorf("the handler shared the caller's request (%q)", req.Service)
	}

	for _, tc := range []struct {
		service string
		code    codes.Code
		msg     string
	}{
		{"status", codes.NotFound, "no such thing"},
		{"plain", codes.Unknown, "plain error"},
	} {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: tc.service})
		if s, ok := status.FromError(err); !ok || s.Code() != tc.code || s.Message() != tc.msg {
			t.Errorf("%s: got %v", tc.service, err)
		}
	}

	// The deadline reaches the handler.
	dl := time.Now().Add(time.Hour).Round(0)
	dctx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()
	_, err = client.Check(dctx, &healthpb.HealthCheckRequest{Service: "deadline"})
	if s, _ := status.FromError(err); s.Code() != codes.Aborted || s.Message() != dl.Format(time.RFC3339Nano) {
		t.Errorf("deadline: %v", err)
	}

	// Outgoing metadata arrives as incoming; headers and trailers come back.
	var header, trailer metadata.MD
	mctx := metadata.AppendToOutgoingContext(ctx, "x-in", "v")
	if _, err := client.Check(mctx, &healthpb.HealthCheckRequest{Service: "metadata"}, grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	if h, tr := header.Get("h"), trailer.Get("t"); len(h) != 1 || h[0] != "header-v" || len(tr) != 1 || tr[0] != "trailer" {
		t.Errorf("header %v, trailer %v", header, trailer)
	}

	// Unknown methods.
	cc, _ := Dial("inproc://" + fmt.Sprintf("probe-%d", probeSeq.Load()))
	defer cc.Close()
	err = cc.Invoke(ctx, "/grpc.health.v1.Health/Nope", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v", err)
	}
}

func TestInProcessCancel(t *testing.T) {
	p, _, client := publish(t, InProcessConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "block"})
	if status.Code(err) != codes.DeadlineExceeded || p.canceled.Load() != 1 {
		t.Fatalf("%v (%d handlers cancelled)", err, p.canceled.Load())
	}
}

func TestInProcessStream(t *testing.T) {
	p, _, client := publish(t, InProcessConfig{})
	for _, tc := range []struct {
		service string
		code    codes.Code
	}{{"ok", codes.OK}, {"fail", codes.ResourceExhausted}} {
		stream, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: tc.service})
		if err != nil {
			t.Fatal(err)
		}
		if h, err := stream.Header(); err != nil || h.Get("h")[0] != "watch" {
			t.Errorf("header %v, %v", h, err)
		}
		for i := range 3 {
			resp, err := stream.Recv()
			if err != nil || int(resp.Status) != i {
				t.Fatalf("%s: message %d: %v, %v", tc.service, i, resp, err)
			}
		}
		_, err = stream.Recv()
		switch {
		case tc.code == codes.OK && err != io.EOF:
			t.Errorf("%s: end %v, want EOF", tc.service, err)
		case tc.code != codes.OK && status.Code(err) != tc.code:
			t.Errorf("%s: end %v, want %v", tc.service, err, tc.code)
		}
		if tc.code == codes.OK && stream.Trailer().Get("t")[0] != "done" {
			t.Errorf("trailer %v", stream.Trailer())
		}
	}

	// Cancelling the caller's context ends the handler.
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "block"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("after cancel: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.canceled.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.canceled.Load() != 1 {
		t.Error("the handler did not see the cancellation")
	}
}

func TestInProcessInterceptorsAndStop(t *testing.T) {
	var unary, stream atomic.Int64
	_, ip, client := publish(t, InProcessConfig{
		UnaryInterceptor: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			unary.Add(1)
			if info.FullMethod != "/grpc.health.v1.Health/Check" {
				return nil, status.Error(codes.Internal, info.FullMethod)
			}
			return h(ctx, req)
		},
		StreamInterceptor: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			stream.Add(1)
			if !info.IsServerStream || info.IsClientStream {
				return status.Error(codes.Internal, "stream info")
			}
			return h(srv, ss)
		},
	})
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	s, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = s.Recv()
	}
	if err != io.EOF || unary.Load() != 1 || stream.Load() != 1 {
		t.Fatalf("%v; interceptors ran %d, %d times", err, unary.Load(), stream.Load())
	}

	// A running stream holds GracefulStop; new calls are refused meanwhile.
	ctx, cancel := context.WithCancel(context.Background())
	blocked, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "block"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { ip.GracefulStop(); close(stopped) }()
	deadline := time.Now().Add(5 * time.Second)
	for !ip.closing.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("call while stopping: %v", err)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a stream running")
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	for err == nil {
		_, err = blocked.Recv()
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("GracefulStop did not return once the stream ended")
	}
}

// TestInProcessFallsBackToTheWire: a name with only an in-memory listener
// (a gRPC server) is reached over gRPC.
func TestInProcessFallsBackToTheWire(t *testing.T) {
	name := fmt.Sprintf("wire-%d", probeSeq.Add(1))
	srv := NewServer()
	healthpb.RegisterHealthServer(srv, &probe{})
	lis := ListenInProcess(name)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := Dial("inproc://" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "status"}); status.Code(err) != codes.NotFound {
		t.Fatalf("%v", err)
	}
	if cc.(*inprocConn).wire == nil {
		t.Fatal("the call did not go over the in-memory listener")
	}
}
