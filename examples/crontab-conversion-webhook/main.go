// Command crontab-conversion-webhook is an example conversion webhook for
// the CronTab CRD of the Kubernetes documentation (v1beta1 hostPort ⇄ v1
// host + port), served over TLS. See README.md; use it as the template of
// your own webhook.
//
//	crontab-conversion-webhook --tls-cert-file tls.crt --tls-private-key-file tls.key [--listen :9443] [--path /convert]
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crdplane/crdplane/examples/crontab-conversion-webhook/conversion"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crontab-conversion-webhook:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("crontab-conversion-webhook", flag.ExitOnError)
	listen := fs.String("listen", ":9443", "HTTPS listen address")
	path := fs.String("path", "/convert", "path ConversionReviews are POSTed to (the CRD's clientConfig path)")
	certFile := fs.String("tls-cert-file", "", "PEM serving certificate (with its chain); must be valid for the name the API server calls, <service>.<namespace>.svc for a clientConfig.service")
	keyFile := fs.String("tls-private-key-file", "", "PEM private key of the serving certificate")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *certFile == "" || *keyFile == "" {
		return errors.New("--tls-cert-file and --tls-private-key-file are required: the API server only calls webhooks over TLS")
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return err
	}

	h := &conversion.Handler{}
	srv := &http.Server{
		Addr:              *listen,
		Handler:           h.Mux(*path),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	slog.Info("serving CronTab conversions", "addr", *listen, "path", *path)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
