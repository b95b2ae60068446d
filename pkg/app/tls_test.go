package app

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/grpcx/pki"
)

func loadTLS(t *testing.T, dir, service string) *grpcx.TLS {
	t.Helper()
	d := filepath.Join(dir, service)
	tl, err := grpcx.LoadTLS(grpcx.TLSFiles{CertFile: filepath.Join(d, "tls.crt"), KeyFile: filepath.Join(d, "tls.key"), CAFile: filepath.Join(d, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestRunMutualTLS: Run serves over mutual TLS with the allow-list: the
// service's own methods (and reflection) for the callers allowed, the
// health service for any verified caller, the HTTP listener as before.
func TestRunMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if err := pki.Generate(pki.Config{Dir: dir, Services: []string{"storage", "gateway", "validator"}}); err != nil {
		t.Fatal(err)
	}
	addr, httpAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b := &blockingHealth{started: make(chan struct{}), release: make(chan struct{})}
	close(b.release)
	go func() {
		done <- Run(ctx, Config{
			Name: "storage", GRPCAddr: addr, HTTPAddr: httpAddr,
			Register:       func(r grpc.ServiceRegistrar) { registerBlocking(r, b) },
			TLS:            loadTLS(t, dir, "storage"),
			AllowedCallers: []string{"gateway"},
			ShutdownGrace:  time.Second,
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	dial := func(creds credentials.TransportCredentials) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	call := func(cc *grpc.ClientConn, method string) error {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		return cc.Invoke(cctx, method, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse), grpc.WaitForReady(true))
	}
	gw := dial(loadTLS(t, dir, "gateway").ClientCredentials())
	val := dial(loadTLS(t, dir, "validator").ClientCredentials())
	if err := call(gw, "/test.Blocking/Check"); err != nil {
		t.Fatalf("the gateway: %v", err)
	}
	if err := call(val, "/test.Blocking/Check"); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "storage does not answer validator") {
		t.Fatalf("the validator: %v", err)
	}
	if err := call(val, "/grpc.health.v1.Health/Check"); err != nil {
		t.Fatalf("the validator's health check: %v", err)
	}
	// Streams: the health watch for any verified caller, reflection for
	// the allowed callers only.
	for _, tc := range []struct {
		name string
		cc   *grpc.ClientConn
		code codes.Code
	}{{"gateway", gw, codes.OK}, {"validator", val, codes.PermissionDenied}} {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		w, err := healthpb.NewHealthClient(tc.cc).Watch(cctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if err != nil {
			t.Errorf("%s: health watch: %v", tc.name, err)
		}
		r, err := reflectionpb.NewServerReflectionClient(tc.cc).ServerReflectionInfo(cctx)
		if err == nil {
			err = r.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		}
		if err == nil {
			_, err = r.Recv()
		}
		ccancel()
		if got := status.Code(err); got != tc.code {
			t.Errorf("%s: reflection: %v, want %v", tc.name, err, tc.code)
		}
	}
	if code, body, err := get("http://" + httpAddr + "/readyz"); err != nil || code != 200 {
		t.Errorf("/readyz over plain HTTP: %d %q %v", code, body, err)
	}
}

func TestBinaryTLSFlags(t *testing.T) {
	b := Binary{Name: "storage", GRPCAddr: "127.0.0.1:0", Callers: []string{"registry", "gateway"}}
	f := b.FlagSet().Lookup(FlagAllowedCallers)
	if f == nil || f.DefValue != "registry,gateway" {
		t.Fatalf("--%s: %+v", FlagAllowedCallers, f)
	}
	if err := b.Run([]string{"--check-flags", "--" + FlagTLSCert + "=a.crt"}); err == nil || !strings.Contains(err.Error(), "together") {
		t.Fatalf("a certificate without key and CA: %v", err)
	}
	if err := b.Run([]string{"--check-flags", "--" + FlagTLSCert + "=a", "--" + FlagTLSKey + "=b", "--" + FlagTLSCA + "=c"}); err != nil {
		t.Fatal(err)
	}
	// Another service's certificate is refused at start.
	dir := t.TempDir()
	if err := pki.Generate(pki.Config{Dir: dir, Services: []string{"gateway"}}); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "gateway")
	b.New = func(context.Context) (Service, error) {
		t.Fatal("built with another service's certificate")
		return nil, nil
	}
	err := b.Run([]string{"--http-listen=", "--" + FlagTLSCert + "=" + filepath.Join(d, "tls.crt"), "--" + FlagTLSKey + "=" + filepath.Join(d, "tls.key"), "--" + FlagTLSCA + "=" + filepath.Join(d, "ca.crt")})
	if err == nil || !strings.Contains(err.Error(), `names the service "gateway"`) {
		t.Fatalf("storage with the gateway's certificate: %v", err)
	}
	gw := Binary{Name: "gateway"}
	if gw.FlagSet().Lookup(FlagAllowedCallers) != nil || gw.FlagSet().Lookup(FlagTLSCert) == nil {
		t.Fatal("a runner (no gRPC server) has the client TLS flags, not the allow-list")
	}
}
