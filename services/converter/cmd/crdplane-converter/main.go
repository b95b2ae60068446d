// Command crdplane-converter runs the converter service as its own process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/pkg/telemetry"
	"github.com/crdplane/crdplane/services/converter"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane-converter:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg converter.Config
	fs := flag.NewFlagSet("crdplane-converter", flag.ExitOnError)
	grpcAddr := fs.String("grpc-listen", ":7004", "gRPC listen address")
	httpAddr := fs.String("http-listen", ":7104", "HTTP listen address for /healthz, /readyz, /livez (empty: none)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cfg.RegisterFlags(fs)
	if ok, err := app.ParseFlags(fs, os.Args[1:]); !ok {
		return err
	}
	app.SetupLogging(*logFormat, *logLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane-converter"})
	if err != nil {
		return err
	}
	defer shutdown(context.Background())

	svc, err := converter.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	return app.Run(ctx, app.Config{
		Name:     "converter",
		GRPCAddr: *grpcAddr,
		HTTPAddr: *httpAddr,
		Register: svc.Register,
		Ready:    svc.Ready,
	})
}
