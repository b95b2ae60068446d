// Package grpcx builds the gRPC servers and client connections crdplane
// services use: OpenTelemetry and Prometheus metrics on every hop,
// round-robin balancing across the addresses a DNS name resolves to, and
// in-process connections ("inproc://<name>": direct calls, see InProcess)
// when several services run in one process.
package grpcx

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// MaxMessageSize bounds one gRPC message (objects travel as JSON bytes; a
// large list can be tens of MiB).
const MaxMessageSize = 256 << 20

// NewServer returns a gRPC server with tracing, Prometheus metrics
// (crdplane_grpc_server_*) and the size limits crdplane uses.
func NewServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.StatsHandler(metricsHandler{serverMetrics}),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
	}
	return grpc.NewServer(append(base, opts...)...)
}

const inprocScheme = "inproc://"

var (
	inprocMu        sync.Mutex
	inprocListeners = map[string]*bufconn.Listener{}
	inprocDirect    = map[string]*InProcess{}
)

// ListenInProcess returns an in-memory listener that Dial reaches at
// "inproc://<name>". Listening twice on a name replaces the first listener.
func ListenInProcess(name string) net.Listener {
	inprocMu.Lock()
	defer inprocMu.Unlock()
	l := bufconn.Listen(4 << 20)
	inprocListeners[name] = l
	return l
}

// Listen opens addr: "inproc://<name>" for an in-process listener, else a TCP
// address.
func Listen(addr string) (net.Listener, error) {
	if name, ok := strings.CutPrefix(addr, inprocScheme); ok {
		return ListenInProcess(name), nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return l, nil
}

// Dial returns a client connection to target: "inproc://<name>" (direct
// calls to the InProcess published under name, else gRPC over the
// in-memory listener of that name), a "dns:///host:port" name (balanced
// round robin over its addresses, re-resolved every DNSRefreshInterval) or
// a plain host:port. Its calls are traced and measured
// (crdplane_grpc_client_*).
func Dial(target string, opts ...grpc.DialOption) (Conn, error) {
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithStatsHandler(metricsHandler{clientMetrics}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
	}
	if name, ok := strings.CutPrefix(target, inprocScheme); ok {
		base = append(base, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			inprocMu.Lock()
			l := inprocListeners[name]
			inprocMu.Unlock()
			if l == nil {
				return nil, fmt.Errorf("no in-process listener %q", name)
			}
			return l.DialContext(ctx)
		}))
		return &inprocConn{name: name, dialWire: func() (*grpc.ClientConn, error) {
			cc, err := grpc.NewClient("passthrough:///"+name, append(base, opts...)...)
			if err != nil {
				return nil, fmt.Errorf("dial %s: %w", target, err)
			}
			return cc, nil
		}}, nil
	}
	if strings.HasPrefix(target, "dns:") {
		base = append(base, grpc.WithResolvers(newRefreshingDNS(DNSRefreshInterval)))
	}
	cc, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return cc, nil
}
