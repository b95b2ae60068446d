// Command crdplane-registry runs the registry service on its own: the
// RegistryService over gRPC, health endpoints over HTTP, and the CRD
// controllers.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/pkg/telemetry"
	"github.com/crdplane/crdplane/services/registry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane-registry:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg        registry.Config
		grpcListen = flag.String("grpc-listen", ":7002", "gRPC listen address (host:port or inproc://name)")
		httpListen = flag.String("http-listen", ":7102", "HTTP listen address for /healthz, /readyz and /livez (empty: off)")
		logFormat  = flag.String("log-format", "json", "log format: json or text")
		logLevel   = flag.String("log-level", "info", "log level: debug, info, warn or error")
	)
	cfg.RegisterFlags(flag.CommandLine)
	if ok, err := app.ParseFlags(flag.CommandLine, os.Args[1:]); !ok {
		return err
	}
	app.SetupLogging(*logFormat, *logLevel)
	cfg.Logger = slog.Default()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane-registry"})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}()

	svc, err := registry.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()

	return app.Run(ctx, app.Config{
		Name:     "registry",
		GRPCAddr: *grpcListen,
		HTTPAddr: *httpListen,
		Register: svc.Register,
		Ready:    svc.Ready,
	})
}
