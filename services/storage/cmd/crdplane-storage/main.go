// Command crdplane-storage serves crdplane's StorageService: Kubernetes
// objects in etcd (embedded, or an external cluster with --etcd-endpoints).
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
	"github.com/crdplane/crdplane/services/storage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane-storage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("crdplane-storage", flag.ExitOnError)
	grpcListen := fs.String("grpc-listen", ":7001", "gRPC listen address (host:port or inproc://name)")
	httpListen := fs.String("http-listen", ":7101", "HTTP listen address of /healthz, /readyz and /livez (empty: none)")
	logFormat := fs.String("log-format", "json", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	var cfg storage.Config
	cfg.RegisterFlags(fs)
	if ok, err := app.ParseFlags(fs, args); !ok {
		return err
	}
	app.SetupLogging(*logFormat, *logLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane-storage"})
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

	svc, err := storage.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := svc.Close(); err != nil {
			slog.Warn("close storage", "err", err)
		}
	}()
	return app.Run(ctx, app.Config{
		Name:     "crdplane-storage",
		GRPCAddr: *grpcListen,
		HTTPAddr: *httpListen,
		Register: svc.Register,
		Ready:    svc.Ready,
	})
}
