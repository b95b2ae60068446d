package app

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/crdplane/crdplane/pkg/grpcx"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		run     bool
		wantErr string
	}{
		{args: []string{"--name", "x"}, run: true},
		{args: []string{"--name", "x", "--check-flags"}, run: false},
		{args: []string{"--check-flags", "extra"}, wantErr: `unexpected argument "extra"`},
		{args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		name := fs.String("name", "", "")
		run, err := ParseFlags(fs, tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || run {
				t.Errorf("%v: got run=%v err=%v, want error %q", tc.args, run, err, tc.wantErr)
			}
			continue
		}
		if err != nil || run != tc.run || *name != "x" {
			t.Errorf("%v: got run=%v err=%v name=%q", tc.args, run, err, *name)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// blockingHealth is a Health service whose Check blocks until release is
// closed, registered under another name: an in-flight unary call.
type blockingHealth struct {
	healthpb.UnimplementedHealthServer
	started chan struct{}
	release chan struct{}
}

func (b *blockingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {
	case <-b.started:
	default:
		close(b.started)
	}
	<-b.release
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func registerBlocking(srv grpc.ServiceRegistrar, b *blockingHealth) {
	desc := healthpb.Health_ServiceDesc
	desc.ServiceName = "test.Blocking"
	srv.RegisterService(&desc, b)
}

// TestRunDrains checks the shutdown order: when the context ends, readiness
// fails (HTTP /readyz, and NOT_SERVING to gRPC health watchers), streams
// (watches) end at once, in-flight unary calls finish, and only then does
// Run return. It also checks /metrics.
func TestRunDrains(t *testing.T) {
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocking := &blockingHealth{started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Name: "test", GRPCAddr: grpcAddr, HTTPAddr: httpAddr,
			Register:      func(s grpc.ServiceRegistrar) { registerBlocking(s, blocking) },
			ShutdownGrace: 5 * time.Second,
		})
	}()
	base := "http://" + httpAddr
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err := get(base + "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %d %v", code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cc, err := grpcx.Dial(grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	health := healthpb.NewHealthClient(cc)
	if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	stream, err := health.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := stream.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: %v %v", st, err)
	}

	code, body, err := get(base + "/metrics")
	if err != nil || code != http.StatusOK ||
		!strings.Contains(body, `crdplane_grpc_server_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} `) ||
		!strings.Contains(body, `crdplane_grpc_server_in_flight{grpc_method="Watch",grpc_service="grpc.health.v1.Health",grpc_type="server_stream"} 1`) ||
		!strings.Contains(body, `crdplane_grpc_client_handled_total{grpc_code="OK",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} `) ||
		!strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics: %d %v\n%s", code, err, body)
	}

	// An in-flight unary call holds the graceful stop.
	inflight := make(chan error, 1)
	go func() {
		inflight <- cc.Invoke(context.Background(), "/test.Blocking/Check", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	}()
	<-blocking.started

	cancel()
	began := time.Now()
	if st, err := stream.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health watch after shutdown began: %v %v", st, err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the health watch stream did not end")
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("the watch stream ended %s after shutdown began", d)
	}
	code, body, err = get(base + "/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("/readyz while draining: %d %q %v", code, body, err)
	}
	if code, _, err := get(base + "/livez"); err != nil || code != http.StatusOK {
		t.Fatalf("/livez while draining: %d %v", code, err)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned before the in-flight call finished: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(blocking.release)
	if err := <-inflight; err != nil {
		t.Fatalf("the in-flight call failed: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after the in-flight call finished")
	}
	if _, _, err := get(base + "/readyz"); err == nil {
		t.Fatal("HTTP listener still serving after Run returned")
	}
}

// TestRunInProcessHealth: a service served in-process answers the gRPC
// health service by direct calls too, so that a grpcx.Probe of a
// dependant follows its readiness.
func TestRunInProcessHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var notReady atomic.Bool
	addr := "inproc://app-health-test"
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Name: "test", GRPCAddr: addr,
			Register: func(grpc.ServiceRegistrar) {},
			Ready: func() error {
				if notReady.Load() {
					return errors.New("etcd unreachable")
				}
				return nil
			},
			ShutdownGrace: time.Second,
		})
	}()
	cc, err := grpcx.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	p := grpcx.NewProbe("dep", cc)
	wait := func(healthy bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for (p.Check(ctx) == nil) != healthy {
			if time.Now().After(deadline) {
				t.Fatalf("probe never %v: %v", healthy, p.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(true)
	notReady.Store(true)
	wait(false)
	if err := p.Err(); err == nil || err.Error() != "dep: NOT_SERVING" {
		t.Fatalf("probe: %v", err)
	}
	notReady.Store(false)
	wait(true)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOpsHandlerProfiling(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		rec := httptest.NewRecorder()
		OpsHandler(NewHealth(nil), profiling).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
		want := http.StatusNotFound
		if profiling {
			want = http.StatusOK
		}
		if rec.Code != want || (profiling && !strings.Contains(rec.Body.String(), "goroutine")) {
			t.Errorf("profiling=%v: /debug/pprof/ answered %d, want %d", profiling, rec.Code, want)
		}
	}
}
