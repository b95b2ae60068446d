package grpcx

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Probe defaults.
var (
	// ProbeInterval is how often a Probe asks again.
	ProbeInterval = time.Second
	// ProbeTimeout bounds one check.
	ProbeTimeout = 2 * time.Second
)

// Probe follows whether the servers behind a connection can take calls,
// for the readiness of a service that depends on them: it asks their gRPC
// health service (the server's overall status, service "") every
// ProbeInterval and keeps the last answer. SERVING is healthy; so is a
// server that answers without a health service (Unimplemented). Anything
// else (NOT_SERVING, no connection, no answer within ProbeTimeout) is not.
// Over a "dns:///" connection the check goes to one of the connected
// replicas, as any call would.
type Probe struct {
	name   string
	client healthpb.HealthClient

	mu      sync.Mutex
	checked bool
	err     error
}

// NewProbe returns a Probe of the servers behind conn; name names them in
// its errors ("storage"). Run it to keep it current.
func NewProbe(name string, conn grpc.ClientConnInterface) *Probe {
	return &Probe{name: name, client: healthpb.NewHealthClient(conn)}
}

// Name is the probe's name.
func (p *Probe) Name() string { return p.name }

// Run checks at once, then every ProbeInterval until ctx ends.
func (p *Probe) Run(ctx context.Context) {
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	for {
		_ = p.Check(ctx) // the probe records its verdict; Run has no caller to tell
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks once, records and returns the answer (nil: healthy).
func (p *Probe) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	resp, err := p.client.Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		err = nil
	case err != nil:
		err = fmt.Errorf("%s: %s", p.name, status.Convert(err).Message())
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		err = fmt.Errorf("%s: %s", p.name, resp.GetStatus())
	}
	p.mu.Lock()
	p.checked, p.err = true, err
	p.mu.Unlock()
	return err
}

// Err is the last answer (nil: healthy). Before any, it checks at once.
func (p *Probe) Err() error {
	p.mu.Lock()
	checked, err := p.checked, p.err
	p.mu.Unlock()
	if !checked {
		return p.Check(context.Background())
	}
	return err
}
