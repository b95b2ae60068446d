package grpcx_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/enduser"
	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/grpcx/pki"
)

// genPKI writes an internal PKI for services into a temporary directory.
func genPKI(t testing.TB, services ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := pki.Generate(pki.Config{Dir: dir, Services: services}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadTLS(t testing.TB, dir, service string) *grpcx.TLS {
	t.Helper()
	d := filepath.Join(dir, service)
	tl, err := grpcx.LoadTLS(grpcx.TLSFiles{CertFile: filepath.Join(d, "tls.crt"), KeyFile: filepath.Join(d, "tls.key"), CAFile: filepath.Join(d, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func leaf(t testing.TB, dir, service string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, service, "tls.crt"), filepath.Join(dir, service, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf
}

func TestIdentity(t *testing.T) {
	dir := genPKI(t, "gateway")
	if got := grpcx.Identity(leaf(t, dir, "gateway")); got != "gateway" {
		t.Errorf("Identity = %q, want gateway", got)
	}
	if got := grpcx.Identity(&x509.Certificate{}); got != "" {
		t.Errorf("Identity of a certificate without URI SAN = %q", got)
	}
}

func TestAuthorize(t *testing.T) {
	dir := genPKI(t, "gateway", "registry", "validator")
	verified := func(c *x509.Certificate) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}}})
	}
	noURI := &x509.Certificate{}
	a := grpcx.NewAuthorizer("storage", []string{"gateway", "registry"})
	const method = "/crdplane.storage.v1.StorageService/Get"
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		method string
		code   codes.Code
		caller string
		msg    string
	}{
		{"gateway allowed", verified(leaf(t, dir, "gateway")), method, codes.OK, "gateway", ""},
		{"registry allowed", verified(leaf(t, dir, "registry")), method, codes.OK, "registry", ""},
		{"validator not allowed", verified(leaf(t, dir, "validator")), method, codes.PermissionDenied, "", "storage does not answer validator"},
		{"validator's health check", verified(leaf(t, dir, "validator")), "/grpc.health.v1.Health/Check", codes.OK, "validator", ""},
		{"no peer", context.Background(), method, codes.Unauthenticated, "", "storage requires mutual TLS"},
		{"plaintext peer", peer.NewContext(context.Background(), &peer.Peer{}), method, codes.Unauthenticated, "", "without a client certificate"},
		{"TLS without client certificate", peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{}}), method, codes.Unauthenticated, "", ""},
		{"health without client certificate", context.Background(), "/grpc.health.v1.Health/Check", codes.Unauthenticated, "", ""},
		{"certificate naming no service", verified(noURI), method, codes.PermissionDenied, "", "names no crdplane service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, err := a.Authorize(tc.ctx, tc.method)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("message %q lacks %q", err, tc.msg)
				}
				return
			}
			if got := grpcx.Caller(ctx); got != tc.caller {
				t.Errorf("Caller = %q, want %q", got, tc.caller)
			}
		})
	}
}

// echo is a test service: Check answers SERVING and reports what the
// handler saw.
type seen struct {
	user   enduser.User
	caller string
}

func echoDesc(seenc chan<- seen) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "crdplane.test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Check",
			Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				in := new(healthpb.HealthCheckRequest)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) {
					select {
					case seenc <- seen{user: enduser.FromIncomingContext(ctx), caller: grpcx.Caller(ctx)}:
					default:
					}
					return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
				}
				if interceptor == nil {
					return h(ctx, in)
				}
				return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/crdplane.test.Echo/Check"}, h)
			},
		}},
	}
}

const echoMethod = "/crdplane.test.Echo/Check"

// serve runs a storage-like server on loopback TCP: mutual TLS with tl
// (nil: plaintext), admitting the gateway and the registry.
func serve(t testing.TB, tl *grpcx.TLS, seenc chan<- seen) string {
	t.Helper()
	srv := grpcx.NewServerWith(grpcx.ServerConfig{Service: "storage", TLS: tl, AllowedCallers: []string{"gateway", "registry"}})
	srv.RegisterService(echoDesc(seenc), struct{}{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func call(t testing.TB, target string, creds credentials.TransportCredentials, method string, ctx context.Context) error {
	t.Helper()
	cc, err := grpcx.Dial(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cc.Invoke(ctx, method, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse))
}

// TestMutualTLS: a storage-like server over real mutual TLS on loopback.
func TestMutualTLS(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	dir := genPKI(t, "storage", "gateway", "validator")
	other := genPKI(t, "storage", "gateway") // another CA
	seenc := make(chan seen, 1)
	addr := serve(t, loadTLS(t, dir, "storage"), seenc)
	// The server's certificate names localhost and 127.0.0.1: dial both.
	byName := strings.Replace(addr, "127.0.0.1", "localhost", 1)
	ctx := context.Background()

	roots := x509.NewCertPool()
	roots.AddCert(leafCA(t, dir))
	noCert := credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13})

	t.Run("no client certificate: Unauthenticated", func(t *testing.T) {
		err := call(t, addr, noCert, echoMethod, ctx)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "storage requires mutual TLS") {
			t.Fatalf("got %v", err)
		}
		if err := call(t, addr, noCert, "/grpc.health.v1.Health/Check", ctx); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("health check without a certificate: %v", err)
		}
	})
	t.Run("plaintext: refused", func(t *testing.T) {
		if err := call(t, addr, insecure.NewCredentials(), echoMethod, ctx); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("client certificate of another CA: refused by the handshake", func(t *testing.T) {
		err := call(t, addr, loadTLS(t, other, "gateway").ClientCredentials(), echoMethod, ctx)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("server of another CA: refused by the client", func(t *testing.T) {
		evil := serve(t, loadTLS(t, other, "storage"), nil)
		err := call(t, evil, loadTLS(t, dir, "gateway").ClientCredentials(), echoMethod, ctx)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("server name not in its certificate: refused by the client", func(t *testing.T) {
		c := loadTLS(t, dir, "gateway").ClientConfig()
		c.ServerName = "registry"
		if err := call(t, addr, credentials.NewTLS(c), echoMethod, ctx); status.Code(err) != codes.Unavailable {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("caller not allowed: PermissionDenied", func(t *testing.T) {
		err := call(t, addr, loadTLS(t, dir, "validator").ClientCredentials(), echoMethod, ctx)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "storage does not answer validator") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("health check by any verified caller", func(t *testing.T) {
		if err := call(t, addr, loadTLS(t, dir, "validator").ClientCredentials(), "/grpc.health.v1.Health/Check", ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("allowed caller, with the user in metadata", func(t *testing.T) {
		u := enduser.User{Name: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"}}
		for _, target := range []string{addr, byName, "dns:///" + byName} {
			if err := call(t, target, loadTLS(t, dir, "gateway").ClientCredentials(), echoMethod, enduser.NewOutgoingContext(ctx, u)); err != nil {
				t.Fatalf("%s: %v", target, err)
			}
			got := <-seenc
			if got.caller != "gateway" || got.user.Name != "alice" || got.user.UID != "u-1" || len(got.user.Groups) != 2 {
				t.Fatalf("%s: the handler saw %+v", target, got)
			}
		}
		var found bool
		for _, s := range rec.Ended() {
			if s.Name() != "crdplane.test.Echo/Check" || s.SpanKind().String() != "server" {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["enduser.id"] == "alice" && attrs["crdplane.caller"] == "gateway" {
				found = true
			}
		}
		if !found {
			t.Errorf("no server span names enduser.id=alice and crdplane.caller=gateway")
		}
	})
	t.Run("process client TLS (SetClientTLS)", func(t *testing.T) {
		grpcx.SetClientTLS(loadTLS(t, dir, "gateway"))
		defer grpcx.SetClientTLS(nil)
		cc, err := grpcx.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cc.Close() }()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := cc.Invoke(cctx, echoMethod, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse)); err != nil {
			t.Fatal(err)
		}
		<-seenc
	})
}

func leafCA(t testing.TB, dir string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca", "ca.crt"), filepath.Join(dir, "ca", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf
}

// BenchmarkUnaryTLS: one unary call over loopback TCP, plaintext and
// mutual TLS (with the allow-list check), on one kept connection.
func BenchmarkUnaryTLS(b *testing.B) {
	dir := genPKI(b, "storage", "gateway")
	for _, bc := range []struct {
		name   string
		server *grpcx.TLS
		client credentials.TransportCredentials
	}{
		{"plaintext", nil, insecure.NewCredentials()},
		{"mtls", loadTLS(b, dir, "storage"), loadTLS(b, dir, "gateway").ClientCredentials()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := serve(b, bc.server, nil)
			cc, err := grpcx.Dial(addr, grpc.WithTransportCredentials(bc.client))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = cc.Close() }()
			ctx := context.Background()
			req, resp := &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse)
			if err := cc.Invoke(ctx, echoMethod, req, resp); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := cc.Invoke(ctx, echoMethod, req, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestUserPropagates: a service calling another while serving a user's
// call passes the user on (grpcx.Dial's interceptor), over mutual TLS:
// gateway → registry → storage, and storage sees the registry as caller
// and alice as user.
func TestUserPropagates(t *testing.T) {
	dir := genPKI(t, "storage", "registry", "gateway")
	seenc := make(chan seen, 1)
	storage := serve(t, loadTLS(t, dir, "storage"), seenc)
	toStorage, err := grpcx.Dial(storage, grpc.WithTransportCredentials(loadTLS(t, dir, "registry").ClientCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = toStorage.Close() }()
	registry := grpcx.NewServerWith(grpcx.ServerConfig{Service: "registry", TLS: loadTLS(t, dir, "registry"), AllowedCallers: []string{"gateway"}})
	registry.RegisterService(&grpc.ServiceDesc{
		ServiceName: "crdplane.test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Check",
			Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				in := new(healthpb.HealthCheckRequest)
				if err := dec(in); err != nil {
					return nil, err
				}
				return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: echoMethod}, func(ctx context.Context, req any) (any, error) {
					out := new(healthpb.HealthCheckResponse)
					return out, toStorage.Invoke(ctx, echoMethod, req, out)
				})
			},
		}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = registry.Serve(lis) }()
	defer registry.Stop()
	ctx := enduser.NewOutgoingContext(context.Background(), enduser.User{Name: "alice", Groups: []string{"devs"}})
	if err := call(t, lis.Addr().String(), loadTLS(t, dir, "gateway").ClientCredentials(), echoMethod, ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-seenc; got.caller != "registry" || got.user.Name != "alice" || len(got.user.Groups) != 1 {
		t.Fatalf("storage saw %+v", got)
	}
}

// BenchmarkUnaryTLSPaired measures the cost of mutual TLS on one unary
// call over loopback TCP as a paired comparison, robust to a loaded
// machine: each iteration makes one plaintext and one mutual TLS call (the
// allow-list checked), on kept connections, and the medians of each are
// reported (plaintext-p50-ns, mtls-p50-ns, and their difference).
// BenchmarkHandshakeTLS does the same for a new connection's first call.
func BenchmarkUnaryTLSPaired(b *testing.B) {
	dir := genPKI(b, "storage", "gateway")
	plain := dialBench(b, serve(b, nil, nil), insecure.NewCredentials())
	mtls := dialBench(b, serve(b, loadTLS(b, dir, "storage"), nil), loadTLS(b, dir, "gateway").ClientCredentials())
	ctx := context.Background()
	req, resp := &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse)
	var tp, tm []time.Duration
	b.ResetTimer()
	for b.Loop() {
		for _, c := range []struct {
			cc *grpc.ClientConn
			d  *[]time.Duration
		}{{plain, &tp}, {mtls, &tm}} {
			t0 := time.Now()
			if err := c.cc.Invoke(ctx, echoMethod, req, resp); err != nil {
				b.Fatal(err)
			}
			*c.d = append(*c.d, time.Since(t0))
		}
	}
	reportPaired(b, tp, tm)
}

func BenchmarkHandshakeTLS(b *testing.B) {
	dir := genPKI(b, "storage", "gateway")
	plainAddr, mtlsAddr := serve(b, nil, nil), serve(b, loadTLS(b, dir, "storage"), nil)
	client := loadTLS(b, dir, "gateway").ClientCredentials()
	ctx := context.Background()
	req, resp := &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse)
	var tp, tm []time.Duration
	b.ResetTimer()
	for b.Loop() {
		for _, c := range []struct {
			addr  string
			creds credentials.TransportCredentials
			d     *[]time.Duration
		}{{plainAddr, insecure.NewCredentials(), &tp}, {mtlsAddr, client, &tm}} {
			t0 := time.Now()
			cc, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(c.creds))
			if err != nil {
				b.Fatal(err)
			}
			if err := cc.Invoke(ctx, echoMethod, req, resp); err != nil {
				b.Fatal(err)
			}
			*c.d = append(*c.d, time.Since(t0))
			_ = cc.Close()
		}
	}
	reportPaired(b, tp, tm)
}

func dialBench(b *testing.B, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	b.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	if err := cc.Invoke(context.Background(), echoMethod, &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse)); err != nil {
		b.Fatal(err)
	}
	return cc
}

func reportPaired(b *testing.B, plain, mtls []time.Duration) {
	b.Helper()
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Nanoseconds())
	}
	p, m := med(plain), med(mtls)
	b.ReportMetric(p, "plaintext-p50-ns")
	b.ReportMetric(m, "mtls-p50-ns")
	b.ReportMetric(m-p, "overhead-p50-ns")
}
