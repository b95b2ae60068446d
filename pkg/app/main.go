package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/telemetry"
)

// Service is what a crdplane service offers its binary: readiness and a
// close. It is served either on a gRPC server (a GRPCService) or by itself
// (a Runner, the gateway's HTTPS).
type Service interface {
	Ready() error
	Close() error
}

// GRPCService is a service served on a gRPC server: storage, registry,
// validator, converter.
type GRPCService interface {
	Service
	Register(grpc.ServiceRegistrar)
}

// Runner is a service that serves by itself until ctx ends (the gateway:
// the Kubernetes API over HTTPS).
type Runner interface {
	Service
	Run(ctx context.Context) error
}

// Binary describes one service's command, crdplane-<Name> (or crdplane run
// --target=<Name>).
type Binary struct {
	// Name is the service name ("storage"); the binary is crdplane-<Name>.
	Name string
	// GRPCAddr and HTTPAddr are the default listen addresses. A Runner has
	// no gRPC server: leave GRPCAddr empty and it has no --grpc-listen.
	GRPCAddr, HTTPAddr string
	// RegisterFlags adds the service's own flags.
	RegisterFlags func(*flag.FlagSet)
	// Validate, when set, checks the parsed flags (a required address that
	// is missing): an error stops the binary before it starts, and fails
	// --check-flags.
	Validate func() error
	// New builds the service once flags are parsed and logging is set up;
	// ctx ends on SIGINT/SIGTERM.
	New func(ctx context.Context) (Service, error)
}

// Main runs b as a process and exits: flags (with --check-flags), logging,
// telemetry, the service served by Run until SIGINT/SIGTERM.
func Main(b Binary) {
	if err := b.Run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "crdplane-%s: %v\n", b.Name, err)
		os.Exit(1)
	}
}

// processFlags are the flags every service binary has besides its own.
type processFlags struct {
	grpcAddr, httpAddr, logFormat, logLevel string
	profiling                               bool
}

func (b Binary) flagSet() (*flag.FlagSet, *processFlags) {
	fs := flag.NewFlagSet("crdplane-"+b.Name, flag.ExitOnError)
	p := &processFlags{}
	if b.GRPCAddr != "" {
		fs.StringVar(&p.grpcAddr, "grpc-listen", b.GRPCAddr, "gRPC listen address (host:port or inproc://name)")
	}
	fs.StringVar(&p.httpAddr, "http-listen", b.HTTPAddr, "HTTP listen address for /healthz, /readyz, /livez and /metrics (empty: off)")
	fs.BoolVar(&p.profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on --http-listen (no authentication there)")
	fs.StringVar(&p.logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&p.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if b.RegisterFlags != nil {
		b.RegisterFlags(fs)
	}
	return fs, p
}

// FlagSet is b's command line, every flag the binary accepts (--check-flags
// too), for checks of deployments against the flags they pass.
func (b Binary) FlagSet() *flag.FlagSet {
	fs, _ := b.flagSet()
	fs.Bool(checkFlagsFlag, false, checkFlagsUsage)
	return fs
}

// Run runs b with the command line args (without the program name) until
// SIGINT/SIGTERM.
func (b Binary) Run(args []string) error {
	fs, pf := b.flagSet()
	run, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if b.Validate != nil {
		if err := b.Validate(); err != nil {
			return err
		}
	}
	if !run {
		return nil
	}
	SetupLogging(pf.logFormat, pf.logLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane-" + b.Name})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			slog.Warn("telemetry shutdown", "err", err)
		}
	}()

	svc, err := b.New(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			slog.Warn("close", "service", b.Name, "err", err)
		}
	}()
	switch s := svc.(type) {
	case Runner:
		return runSelf(ctx, s, pf.httpAddr, pf.profiling)
	case GRPCService:
		return Run(ctx, Config{
			Name:      b.Name,
			GRPCAddr:  pf.grpcAddr,
			HTTPAddr:  pf.httpAddr,
			Profiling: pf.profiling,
			Register:  s.Register,
			Ready:     s.Ready,
		})
	default:
		return errors.New("the service neither registers on a gRPC server nor runs by itself")
	}
}

// runSelf runs a Runner, with the operations endpoints on httpAddr when set
// (the gateway's HTTPS port serves them too).
func runSelf(ctx context.Context, r Runner, httpAddr string, profiling bool) error {
	if httpAddr != "" {
		hl, err := net.Listen("tcp", httpAddr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", httpAddr, err)
		}
		ops := &http.Server{Handler: OpsHandler(NewHealth(r.Ready), profiling), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ops.Serve(hl) }()
		defer func() { _ = ops.Close() }() // the ops endpoint goes with the process
	}
	return r.Run(ctx)
}
