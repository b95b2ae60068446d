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
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/grpcx"
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
	// Callers are the services allowed to call this one over mutual TLS,
	// the default of --grpc-allowed-callers: the modules of the component
	// table (platform/modules) that call it. A service's binary lists them
	// by hand (it cannot import the table); deploy/internal/wiring checks
	// that they equal the table's.
	Callers []string
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
	tls                                     grpcx.TLSFiles
	allowedCallers                          string
}

// Internal TLS flags.
const (
	FlagTLSCert        = "grpc-tls-cert-file"
	FlagTLSKey         = "grpc-tls-key-file"
	FlagTLSCA          = "grpc-tls-ca-file"
	FlagAllowedCallers = "grpc-allowed-callers"
)

func (b Binary) flagSet() (*flag.FlagSet, *processFlags) {
	fs := flag.NewFlagSet("crdplane-"+b.Name, flag.ExitOnError)
	p := &processFlags{}
	if b.GRPCAddr != "" {
		fs.StringVar(&p.grpcAddr, "grpc-listen", b.GRPCAddr, "gRPC listen address (host:port or inproc://name)")
	}
	fs.StringVar(&p.httpAddr, "http-listen", b.HTTPAddr, "HTTP listen address for /healthz, /readyz, /livez and /metrics (empty: off)")
	fs.BoolVar(&p.profiling, "profiling", false, "serve Go's profiles at /debug/pprof/ on --http-listen (no authentication there)")
	fs.StringVar(&p.tls.CertFile, FlagTLSCert, "", "internal mutual TLS: this service's certificate (PEM, identity in its URI SAN spiffe://crdplane/"+b.Name+"), presented to the services it calls"+serves(b)+"; with --"+FlagTLSKey+" and --"+FlagTLSCA+" (none of them: plaintext gRPC, with a warning)")
	fs.StringVar(&p.tls.KeyFile, FlagTLSKey, "", "internal mutual TLS: the key of --"+FlagTLSCert+" (PEM; both read again when they change)")
	fs.StringVar(&p.tls.CAFile, FlagTLSCA, "", "internal mutual TLS: the CA of every service's certificate, verifying the servers this one calls"+verifies(b))
	if b.GRPCAddr != "" {
		fs.StringVar(&p.allowedCallers, FlagAllowedCallers, strings.Join(b.Callers, ","), "internal mutual TLS: comma-separated services allowed to call this one (their certificates' identities); any other caller is PermissionDenied, the gRPC health service answers any caller the CA verified")
	}
	fs.StringVar(&p.logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&p.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if b.RegisterFlags != nil {
		b.RegisterFlags(fs)
	}
	return fs, p
}

func serves(b Binary) string {
	if b.GRPCAddr == "" {
		return ""
	}
	return " and served to its callers"
}

func verifies(b Binary) string {
	if b.GRPCAddr == "" {
		return ""
	}
	return " and its callers"
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
	if pf.tls.Enabled() && (pf.tls.CertFile == "" || pf.tls.KeyFile == "" || pf.tls.CAFile == "") {
		return fmt.Errorf("internal TLS needs --%s, --%s and --%s together", FlagTLSCert, FlagTLSKey, FlagTLSCA)
	}
	if !run {
		return nil
	}
	SetupLogging(pf.logFormat, pf.logLevel)
	var internalTLS *grpcx.TLS
	if pf.tls.Enabled() {
		if internalTLS, err = grpcx.LoadTLS(pf.tls); err != nil {
			return err
		}
		// Another service's certificate would make this one call as that
		// service: a mounting mistake, refused.
		if id := internalTLS.Identity(); id != b.Name {
			return fmt.Errorf("internal TLS: --%s %s names the service %q (URI SAN %s<service>), not %q", FlagTLSCert, pf.tls.CertFile, id, grpcx.IdentityPrefix, b.Name)
		}
		slog.Info("internal gRPC over mutual TLS", "service", b.Name, "identity", grpcx.IdentityPrefix+b.Name, "allowed_callers", pf.allowedCallers)
	} else {
		slog.Warn("internal gRPC is PLAINTEXT: no --"+FlagTLSCert+"/--"+FlagTLSKey+"/--"+FlagTLSCA+"; calls are neither encrypted nor authenticated, and anyone who reaches the gRPC port may call it", "service", b.Name)
	}
	// The connections this process opens present its certificate.
	grpcx.SetClientTLS(internalTLS)

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
			Name:           b.Name,
			GRPCAddr:       pf.grpcAddr,
			HTTPAddr:       pf.httpAddr,
			Profiling:      pf.profiling,
			Register:       s.Register,
			Ready:          s.Ready,
			TLS:            internalTLS,
			AllowedCallers: splitList(pf.allowedCallers),
		})
	default:
		return errors.New("the service neither registers on a gRPC server nor runs by itself")
	}
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
