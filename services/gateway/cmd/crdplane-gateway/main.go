// Command crdplane-gateway serves the Kubernetes API (HTTPS) in front of
// the registry, validator, converter and storage services.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/pkg/telemetry"
	"github.com/crdplane/crdplane/services/gateway"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane-gateway:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg gateway.Config
	fs := flag.NewFlagSet("crdplane-gateway", flag.ExitOnError)
	httpAddr := fs.String("http-listen", "", "plain HTTP listen address for /healthz, /readyz, /livez (empty: none; the HTTPS port serves them too)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	cfg.RegisterFlags(fs)
	if ok, err := app.ParseFlags(fs, os.Args[1:]); !ok {
		return err
	}
	app.SetupLogging(*logFormat, *logLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane-gateway"})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}()

	svc, err := gateway.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer svc.Close()

	if *httpAddr != "" {
		hl, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", *httpAddr, err)
		}
		health := &http.Server{Handler: app.OpsHandler(app.NewHealth(svc.Ready)), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = health.Serve(hl) }()
		defer health.Close()
	}
	return svc.Run(ctx)
}
