package app

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/telemetry"
)

// Service is what a crdplane gRPC service offers its binary.
type Service interface {
	Register(grpc.ServiceRegistrar)
	Ready() error
	Close() error
}

// Binary describes one service's command, crdplane-<Name>.
type Binary struct {
	// Name is the service name ("storage"); the binary is crdplane-<Name>.
	Name string
	// GRPCAddr and HTTPAddr are the default listen addresses.
	GRPCAddr, HTTPAddr string
	// RegisterFlags adds the service's own flags.
	RegisterFlags func(*flag.FlagSet)
	// New builds the service once flags are parsed and logging is set up;
	// ctx ends on SIGINT/SIGTERM.
	New func(ctx context.Context) (Service, error)
}

// Main runs b as a process and exits: flags (with --check-flags), logging,
// telemetry, the service served by Run until SIGINT/SIGTERM.
func Main(b Binary) {
	if err := b.run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "crdplane-%s: %v\n", b.Name, err)
		os.Exit(1)
	}
}

func (b Binary) run(args []string) error {
	fs := flag.NewFlagSet("crdplane-"+b.Name, flag.ExitOnError)
	grpcAddr := fs.String("grpc-listen", b.GRPCAddr, "gRPC listen address (host:port or inproc://name)")
	httpAddr := fs.String("http-listen", b.HTTPAddr, "HTTP listen address for /healthz, /readyz, /livez and /metrics (empty: off)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if b.RegisterFlags != nil {
		b.RegisterFlags(fs)
	}
	if ok, err := ParseFlags(fs, args); !ok {
		return err
	}
	SetupLogging(*logFormat, *logLevel)

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
	return Run(ctx, Config{
		Name:     b.Name,
		GRPCAddr: *grpcAddr,
		HTTPAddr: *httpAddr,
		Register: svc.Register,
		Ready:    svc.Ready,
	})
}
