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
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/crdplane/crdplane/pkg/enduser"
)

// Message size limits. Objects travel as JSON bytes, so a message is about
// as large as the objects in it.
//
// A request carries at most a few objects: the gateway refuses bodies over
// 3 MiB (kube-apiserver's limit), etcd objects over 1.5 MiB (its default
// --max-request-bytes; storage's etcd client sends at most 2 MiB), and the
// largest request, the validator's Admit of an update, holds the new object,
// the request's own object and the stored one. Lists travel as requests
// only to the converter, and the gateway splits them to fit.
//
// A response can be a whole list: storage's List without a limit (and
// DeleteCollection) returns every object of a collection at once, as
// kube-apiserver does for a list without ?limit, and the converter returns
// a list it converted. Clients that page (informers, kubectl: 500 a page)
// stay far below the bound.
const (
	// MaxRequestMessageSize bounds a request: what a server receives and a
	// client sends.
	MaxRequestMessageSize = 16 << 20
	// MaxResponseMessageSize bounds a response (and a stream's message):
	// what a server sends and a client receives.
	MaxResponseMessageSize = 256 << 20
)

// NewServer returns a plaintext gRPC server (NewServerWith without TLS).
func NewServer(opts ...grpc.ServerOption) *grpc.Server {
	return NewServerWith(ServerConfig{}, opts...)
}

// ServerConfig says how NewServerWith serves.
type ServerConfig struct {
	// Service names the service served, in refusals and logs.
	Service string
	// TLS, when set, serves over mutual TLS and admits only the calls of
	// AllowedCallers (an Authorizer; the health service answers any caller
	// the CA verified). Without it the server is plaintext and admits
	// anyone.
	TLS *TLS
	// AllowedCallers are the services (identities) that may call.
	AllowedCallers []string
}

// NewServerWith returns a gRPC server with panic recovery (RecoverUnary,
// RecoverStream: a panicking handler fails its call with Internal), with
// cfg's mutual TLS and caller allow-list, tracing, the calling user on its
// span (package enduser; with TLS only from the callers admitted), a log
// line for every call failing with a server fault (Internal, Unknown,
// DataLoss) naming the caller and the user, Prometheus metrics
// (crdplane_grpc_server_*) and the message size limits
// (MaxRequestMessageSize received, MaxResponseMessageSize sent; a larger
// message fails its call with ResourceExhausted).
func NewServerWith(cfg ServerConfig, opts ...grpc.ServerOption) *grpc.Server {
	// Recovery first in the chains: panics of later interceptors are
	// caught too. The caller is checked before anything reads what it sent.
	unary := []grpc.UnaryServerInterceptor{RecoverUnary}
	stream := []grpc.StreamServerInterceptor{RecoverStream}
	base := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.StatsHandler(metricsHandler{serverMetrics}),
		grpc.MaxRecvMsgSize(MaxRequestMessageSize),
		grpc.MaxSendMsgSize(MaxResponseMessageSize),
	}
	if cfg.TLS != nil {
		a := NewAuthorizer(cfg.Service, cfg.AllowedCallers)
		base = append(base, grpc.Creds(cfg.TLS.ServerCredentials()))
		unary = append(unary, a.UnaryInterceptor)
		stream = append(stream, a.StreamInterceptor)
	}
	unary = append(unary, enduser.UnaryServerInterceptor, logFaultsUnary)
	stream = append(stream, enduser.StreamServerInterceptor, logFaultsStream)
	base = append(base, grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	return grpc.NewServer(append(base, opts...)...)
}

// connectParams make a broken connection retry within seconds: servers are
// replicas in the same cluster (or process), and one that comes back (a
// restarted pod, a recovered storage) should get traffic again soon, not
// after grpc's default backoff of up to two minutes.
var connectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
	MinConnectTimeout: 20 * time.Second,
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
// (crdplane_grpc_client_*). A network connection uses the process's
// internal TLS (SetClientTLS) when set: the server's certificate is
// verified for target's host name, the process's presented.
func Dial(target string, opts ...grpc.DialOption) (Conn, error) {
	creds := insecure.NewCredentials()
	if t := clientTLS.Load(); t != nil {
		creds = t.ClientCredentials()
	}
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithStatsHandler(metricsHandler{clientMetrics}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxResponseMessageSize), grpc.MaxCallSendMsgSize(MaxRequestMessageSize)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithConnectParams(connectParams),
		// The user of the call being served goes on to the calls it makes.
		grpc.WithChainUnaryInterceptor(enduser.UnaryClientInterceptor),
		grpc.WithChainStreamInterceptor(enduser.StreamClientInterceptor),
	}
	if name, ok := strings.CutPrefix(target, inprocScheme); ok {
		// Nothing crosses a network in one process: no TLS.
		base[0] = grpc.WithTransportCredentials(insecure.NewCredentials())
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
