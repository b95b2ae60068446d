// Command crdplane-validator serves crdplane's ValidatorService: admission
// (prune, default, validate) of custom resources against their CRD schemas.
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
	"github.com/crdplane/crdplane/services/validator"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane-validator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		grpcAddr  = flag.String("grpc-listen", ":7003", "gRPC listen address (host:port or inproc://name)")
		httpAddr  = flag.String("http-listen", ":7103", "HTTP listen address for /healthz, /readyz and /livez (empty: off)")
		logFormat = flag.String("log-format", "json", "log format: json or text")
		logLevel  = flag.String("log-level", "info", "log level: debug, info, warn or error")
		cfg       validator.Config
	)
	cfg.RegisterFlags(flag.CommandLine)
	if ok, err := app.ParseFlags(flag.CommandLine, os.Args[1:]); !ok {
		return err
	}
	app.SetupLogging(*logFormat, *logLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane-validator"})
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

	svc, err := validator.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()

	return app.Run(ctx, app.Config{
		Name:     "validator",
		GRPCAddr: *grpcAddr,
		HTTPAddr: *httpAddr,
		Register: svc.Register,
		Ready:    svc.Ready,
	})
}
