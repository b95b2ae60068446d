// Package app runs one crdplane service as a process: its gRPC server, the
// gRPC health service, and an HTTP listener for /healthz, /readyz, /livez
// and /metrics, with graceful shutdown when the context ends.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// Config describes how a service is served.
type Config struct {
	// Name is the service name (logs, health).
	Name string
	// GRPCAddr is where the gRPC server listens: host:port or inproc://name.
	GRPCAddr string
	// HTTPAddr, when set, serves /healthz, /readyz, /livez and /metrics.
	HTTPAddr string
	// Profiling adds Go's profiles at /debug/pprof/ to HTTPAddr.
	Profiling bool
	// Register adds the service's implementations to the gRPC server (and,
	// for an inproc:// address, to the direct in-process table).
	Register func(grpc.ServiceRegistrar)
	// Ready reports whether the service can take traffic (nil: always).
	Ready func() error
	// TLS, when set, serves gRPC over mutual TLS, admitting only the calls
	// of AllowedCallers (grpcx.ServerConfig; the gRPC health service
	// answers any caller the CA verified). Not used on an inproc://
	// address: nothing crosses a network there.
	TLS *grpcx.TLS
	// AllowedCallers are the services that may call (with TLS).
	AllowedCallers []string
	// ShutdownGrace bounds the graceful stop (default 10s).
	ShutdownGrace time.Duration
}

// Health reports a process's liveness and readiness over HTTP.
type Health struct {
	ready    func() error
	draining atomic.Bool
}

// NewHealth returns a Health whose readiness is ready (nil: always ready).
func NewHealth(ready func() error) *Health { return &Health{ready: ready} }

// SetDraining makes readiness fail from now on (before shutdown).
func (h *Health) SetDraining() { h.draining.Store(true) }

// Ready reports readiness.
func (h *Health) Ready() error {
	if h.draining.Load() {
		return errors.New("shutting down")
	}
	if h.ready != nil {
		return h.ready()
	}
	return nil
}

// ServeHTTP answers /healthz, /livez (always ok while the process runs) and
// /readyz.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch r.URL.Path {
	case "/healthz", "/livez":
		_, _ = w.Write([]byte("ok"))
	case "/readyz":
		if err := h.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v", err)
			return
		}
		_, _ = w.Write([]byte("ok"))
	default:
		http.NotFound(w, r)
	}
}

// OpsHandler serves a process's operations endpoints: h's /healthz, /livez
// and /readyz, the Prometheus metrics of pkg/metrics at /metrics and, with
// profiling, Go's profiles at /debug/pprof/ (net/http/pprof: the index,
// cmdline, profile, symbol, trace and every named profile, heap and
// goroutine among them). The listener has no authentication, which is why
// profiling is off unless asked for (kube-apiserver's --profiling is on by
// default, behind its authorizer).
func OpsHandler(h *Health, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler())
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/", h)
	return mux
}

// Run serves cfg until ctx ends, then drains: readiness goes false (HTTP
// /readyz and the gRPC health service), server-streaming calls (watches) end
// so that their clients move to another replica, in-flight unary calls
// finish (bounded by ShutdownGrace), and the HTTP listener closes.
func Run(ctx context.Context, cfg Config) error {
	log := slog.Default().With("service", cfg.Name)
	drainCtx, drain := context.WithCancel(context.Background())
	defer drain()
	sc := grpcx.ServerConfig{Service: cfg.Name}
	if _, inproc := grpcx.IsInProcess(cfg.GRPCAddr); !inproc {
		sc.TLS, sc.AllowedCallers = cfg.TLS, cfg.AllowedCallers
	}
	srv := grpcx.NewServerWith(sc, grpc.ChainStreamInterceptor(drainStreams(drainCtx)))
	// In one process, callers reach the service by direct calls (the gRPC
	// server behind the in-memory listener stays, for anything dialling it).
	var direct *grpcx.InProcess
	if _, ok := grpcx.IsInProcess(cfg.GRPCAddr); ok {
		direct = grpcx.NewInProcess(grpcx.InProcessConfig{StreamInterceptor: drainStreams(drainCtx)})
		cfg.Register(grpcx.Registrars(srv, direct))
	} else {
		cfg.Register(srv)
	}
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	if direct != nil {
		// Dependants probe readiness (grpcx.Probe) by direct calls too.
		healthpb.RegisterHealthServer(direct, hs)
	}
	reflection.Register(srv)

	lis, err := grpcx.Listen(cfg.GRPCAddr)
	if err != nil {
		return err
	}
	h := NewHealth(cfg.Ready)
	var httpSrv *http.Server
	if cfg.HTTPAddr != "" {
		hl, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			_ = lis.Close() // the listen error is the one to report
			return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
		}
		httpSrv = &http.Server{Handler: OpsHandler(h, cfg.Profiling), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = httpSrv.Serve(hl) }()
		log.Info("health and metrics endpoints", "addr", hl.Addr().String())
	}

	// Mirror readiness into the gRPC health service.
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			st := healthpb.HealthCheckResponse_SERVING
			if h.Ready() != nil {
				st = healthpb.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("", st)
			hs.SetServingStatus(cfg.Name, st)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	if direct != nil {
		name, _ := grpcx.IsInProcess(cfg.GRPCAddr)
		direct.Publish(name)
	}
	log.Info("serving gRPC", "addr", lis.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("%s gRPC server: %w", cfg.Name, err)
	case <-ctx.Done():
	}
	log.Info("draining")
	h.SetDraining()
	hs.Shutdown()
	grace := cfg.ShutdownGrace
	if grace == 0 {
		grace = 10 * time.Second
	}
	deadline := time.After(grace)
	// No new calls from here on; health watchers are told NOT_SERVING,
	// then the remaining streams (watches) end.
	stopped := make(chan struct{})
	go func() {
		directStopped := make(chan struct{})
		go func() {
			if direct != nil {
				direct.GracefulStop()
			}
			close(directStopped)
		}()
		srv.GracefulStop()
		<-directStopped
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(streamDrainDelay):
	}
	drain()
	select {
	case <-stopped:
	case <-deadline:
		srv.Stop()
		if direct != nil {
			direct.Stop()
		}
	}
	if httpSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(sctx)
	}
	log.Info("stopped")
	return nil
}

// SetupLogging installs a JSON (or text, when format is "text") slog handler
// on stderr at the given level ("debug", "info", "warn", "error").
func SetupLogging(format, level string) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewJSONHandler(os.Stderr, opts)
	if format == "text" {
		h = slog.NewTextHandler(os.Stderr, opts)
	}
	slog.SetDefault(slog.New(h))
}

// ParseFlags parses a service binary's command line into fs, adding
// --check-flags (parse the flags, then exit: deployment manifests are tested
// with it). It reports whether the service should run: false with a nil error
// after --check-flags. Positional arguments are refused (no crdplane binary
// takes any, so one is a mistyped flag).
func ParseFlags(fs *flag.FlagSet, args []string) (run bool, err error) {
	check := fs.Bool(checkFlagsFlag, false, checkFlagsUsage)
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	return !*check, nil
}

const (
	checkFlagsFlag  = "check-flags"
	checkFlagsUsage = "parse and check the flags, then exit without starting"
)

// streamDrainDelay is how long streams keep going after readiness fails, so
// that health watchers receive NOT_SERVING before their stream ends.
const streamDrainDelay = 100 * time.Millisecond

// drainStreams ends the server-streaming calls (watches) once drain is
// cancelled: their handlers see their context cancelled and return, and the
// clients, which re-watch on any end, pick another replica. Without it a
// watch would hold the graceful stop until ShutdownGrace.
func drainStreams(drain context.Context) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.IsClientStream || !info.IsServerStream {
			return handler(srv, ss)
		}
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		stop := context.AfterFunc(drain, cancel)
		defer stop()
		return handler(srv, drainingStream{ServerStream: ss, ctx: ctx})
	}
}

type drainingStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s drainingStream) Context() context.Context { return s.ctx }
