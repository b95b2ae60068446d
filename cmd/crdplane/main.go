// Command crdplane runs the whole platform in one process:
//
//	crdplane run [--listen 127.0.0.1:6443] [--data-dir .run/etcd] [--kubeconfig .run/kubeconfig]
//
// Embedded etcd, the five services connected in-process, HTTPS with a
// generated CA and bearer token, and a kubeconfig that kubectl uses as is.
//
//	crdplane run --target=registry [--storage-addr ...] [--validator-addr ...]
//
// runs one service of the component table (platform/modules) instead, with
// the flags of its binary (crdplane-registry), dialing the others.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/pkg/budgetcache"
	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/pkg/telemetry"
	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/modules"
	"github.com/crdplane/crdplane/services/converter/webhook"
	"github.com/crdplane/crdplane/services/gateway"
	"github.com/crdplane/crdplane/services/storage"
)

const usage = `crdplane: a Kubernetes-compatible API server for CustomResourceDefinitions.

Usage:
  crdplane run [flags]    run every service in one process (embedded etcd)
  crdplane run --target=<service> [flags]
                          run one service (gateway, registry, validator,
                          converter or storage) with the flags of its binary,
                          dialing the others at the addresses they give
  crdplane internal-pki [--dir .run/etcd/pki/internal] [--hosts ...]
                          write an internal CA and a certificate for each
                          service, for --target=<service> over mutual TLS
                          (--grpc-tls-cert-file, --grpc-tls-key-file,
                          --grpc-tls-ca-file, --grpc-allowed-callers)
  crdplane migrate-storage --kubeconfig <path> [--crd <name>]
                          rewrite stored objects at their CRD's storage version,
                          then trim status.storedVersions

Each service also has its own binary (crdplane-gateway, crdplane-registry,
crdplane-validator, crdplane-converter, crdplane-storage).

crdplane run (--target=all) connects the services in-process: nothing
crosses a network, so there is no internal TLS to set up. Services run
apart (--target=<service>, the binaries) call each other over gRPC:
plaintext (with a warning at start) unless given the internal TLS flags.
`

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "migrate-storage" {
		if err := migrateStorage(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "crdplane migrate-storage:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "internal-pki" {
		if err := internalPKI(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "crdplane internal-pki:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "run" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := modules.Config{Target: targetOf(args)}
	if cfg.Target != modules.All {
		m := modules.Modules.Lookup(cfg.Target)
		if m == nil {
			_, err := modules.Modules.Order(cfg.Target) // names the targets
			return err
		}
		b := m.Binary(&cfg)
		b.RegisterFlags = cfg.RegisterFlags // and --target
		return b.Run(args)
	}
	fs := flag.NewFlagSet("crdplane run", flag.ExitOnError)
	cfg.RegisterFlags(fs) // --target
	listen := fs.String("listen", "127.0.0.1:6443", "HTTPS listen address of the Kubernetes API (port 0 picks a free port)")
	dataDir := fs.String("data-dir", ".run/etcd", "embedded etcd data directory (kept across restarts)")
	etcd := fs.String("etcd-endpoints", "", "comma-separated external etcd endpoints (instead of the embedded etcd)")
	var overrides []storage.EtcdOverride
	storage.RegisterOverridesFlag(fs, &overrides)
	var etcdTLS etcdtls.Config
	etcdTLS.RegisterFlags(fs)
	kubeconfig := fs.String("kubeconfig", ".run/kubeconfig", "where to write a kubeconfig for this server")
	token := fs.String("token", "", "bearer token to accept (default: the one kept in the credentials directory, generated on first start)")
	credentials := fs.String("credentials-dir", "", "where the CA, serving certificate and generated token are kept across restarts (default: <data-dir>/pki)")
	rotate := fs.Bool("rotate-credentials", false, "replace the kept CA, serving certificate and token (clients need the new kubeconfig)")
	hosts := fs.String("hosts", "", "extra comma-separated DNS names/IPs for the serving certificate")
	ops := fs.String("ops-listen", "", "plain-HTTP address for /metrics, /healthz, /livez and /readyz (empty: off; no authentication: keep it on loopback)")
	profiling := fs.Bool("profiling", false, "serve Go's profiles at /debug/pprof/ on --ops-listen")
	logFormat := fs.String("log-format", "text", "log format: json or text")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	var conversion webhook.Config
	conversion.RegisterFlags(fs)
	var limits gateway.Limits
	limits.RegisterFlags(fs)
	var auth gateway.Auth
	auth.RegisterFlags(fs)
	var audit gateway.Audit
	audit.RegisterFlags(fs)
	var compiledLimit int64
	fs.Var(budgetcache.QuantityFlag{V: &compiledLimit}, budgetcache.FlagName,
		"memory budget of the compiled CRDs (estimated, e.g. 512Mi), split evenly between the validator's and the gateway's caches; least recently used CRDs are evicted beyond it and compile again on demand; 0: half of GOMEMLIMIT, else 512Mi")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := auth.Validate(); err != nil {
		return err
	}
	if err := audit.Validate(); err != nil {
		return err
	}
	app.SetupLogging(*logFormat, *logLevel)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "crdplane"})
	if err != nil {
		return err
	}
	defer func() { _ = shutdown(context.Background()) }() // flushes spans at exit; nothing to report to

	if *credentials == "" {
		*credentials = filepath.Join(*dataDir, "pki")
	}
	p, err := platform.Start(ctx, platform.Config{
		DataDir:             *dataDir,
		EtcdEndpoints:       splitList(*etcd),
		EtcdOverrides:       overrides,
		EtcdTLS:             etcdTLS,
		ListenAddr:          *listen,
		KubeconfigPath:      *kubeconfig,
		Token:               *token,
		CredentialsDir:      *credentials,
		RotateCredentials:   *rotate,
		Hosts:               splitList(*hosts),
		Conversion:          conversion,
		Limits:              limits,
		Auth:                auth,
		CompiledMemoryLimit: compiledLimit,
		Audit:               audit,
		OpsAddr:             *ops,
		Profiling:           *profiling,
	})
	if err != nil {
		return err
	}
	defer func() { _ = p.Close() }() // run's answer is how it ended, not how it closed
	fmt.Printf("crdplane is serving the Kubernetes API at %s\n", p.URL)
	if p.OpsURL != "" {
		fmt.Printf("metrics and health at %s\n", p.OpsURL)
	}
	fmt.Printf("authorization mode: %s\n", strings.Join(auth.AuthorizationModes, ","))
	if audit.Enabled() {
		fmt.Printf("audit log: policy %s, log %s\n", audit.PolicyFile, audit.LogPath)
	}
	fmt.Printf("kubeconfig written to %s; try:\n  kubectl --kubeconfig %s api-resources\n", *kubeconfig, *kubeconfig)

	select {
	case <-ctx.Done():
		return nil
	case err := <-p.Errors():
		return err
	}
}

// targetOf is the value of --target in args (modules.All without one): the
// flags to parse depend on it.
func targetOf(args []string) string {
	target := modules.All
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "target" {
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		target = value
	}
	return target
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
