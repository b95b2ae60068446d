package grpcx

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestProbe: a Probe follows the health service of the server behind a
// connection: SERVING, NOT_SERVING, the server gone and back; a server
// without a health service counts as healthy.
func TestProbe(t *testing.T) {
	name := fmt.Sprintf("probe-test-%d", probeSeq.Add(1))
	hs := health.NewServer()
	serve := func() func() {
		srv := NewServer()
		healthpb.RegisterHealthServer(srv, hs)
		lis := ListenInProcess(name)
		go func() { _ = srv.Serve(lis) }()
		return srv.Stop
	}
	stop := serve()
	defer func() { stop() }()
	cc, err := Dial("inproc://" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	p := NewProbe("storage", cc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Before Run, Err checks at once.
	if err := p.Err(); err != nil {
		t.Fatalf("serving: %v", err)
	}
	go p.Run(ctx)

	eventually := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(p.Err()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %v", what, p.Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	eventually("not serving", func(err error) bool { return err != nil && err.Error() == "storage: NOT_SERVING" })
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	eventually("serving again", func(err error) bool { return err == nil })

	stop()
	eventually("server stopped", func(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "storage: ") })
	stop = serve()
	eventually("server back", func(err error) bool { return err == nil })

	// No health service: healthy once it answers.
	bare := fmt.Sprintf("probe-bare-%d", probeSeq.Add(1))
	srv := NewServer()
	lis := ListenInProcess(bare)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	bc, err := Dial("inproc://" + bare)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	if err := NewProbe("bare", bc).Check(ctx); err != nil {
		t.Fatalf("server without a health service: %v", err)
	}
}
