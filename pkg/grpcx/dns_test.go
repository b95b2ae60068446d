package grpcx

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
)

type fakeResolver struct{ resolveNow, closed atomic.Int32 }

func (r *fakeResolver) ResolveNow(resolver.ResolveNowOptions) { r.resolveNow.Add(1) }
func (r *fakeResolver) Close()                                { r.closed.Add(1) }

type fakeBuilder struct{ r *fakeResolver }

func (b fakeBuilder) Build(resolver.Target, resolver.ClientConn, resolver.BuildOptions) (resolver.Resolver, error) {
	return b.r, nil
}
func (fakeBuilder) Scheme() string { return "dns" }

func TestRefreshingDNSResolvesPeriodically(t *testing.T) {
	fake := &fakeResolver{}
	b := refreshingDNS{Builder: fakeBuilder{fake}, interval: 10 * time.Millisecond}
	if b.Scheme() != "dns" {
		t.Fatalf("scheme %q", b.Scheme())
	}
	r, err := b.Build(resolver.Target{}, nil, resolver.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fake.resolveNow.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the resolver was not asked to re-resolve")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	r.Close()
	n := fake.resolveNow.Load()
	time.Sleep(50 * time.Millisecond)
	if fake.resolveNow.Load() != n || fake.closed.Load() != 2 {
		t.Fatalf("after Close: %d re-resolutions (was %d), %d closes", fake.resolveNow.Load(), n, fake.closed.Load())
	}
}

// A dns:/// target dials through the refreshing resolver and works.
func TestDialDNS(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	cc, err := Dial("dns:///localhost:" + port)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
}
