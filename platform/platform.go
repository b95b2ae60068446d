// Package platform runs every crdplane service in one process: embedded etcd
// (or an external cluster), storage, registry, validator, converter and the
// gateway, connected by in-process gRPC: the modules of the component table
// (platform/modules), built in its dependency order. `crdplane run`
// (--target=all), the end-to-end tests and the cross-service benchmarks
// start it.
package platform

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/pkg/budgetcache"
	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/platform/modules"
	"github.com/crdplane/crdplane/services/converter"
	"github.com/crdplane/crdplane/services/converter/webhook"
	"github.com/crdplane/crdplane/services/gateway"
	"github.com/crdplane/crdplane/services/gateway/localpki"
	"github.com/crdplane/crdplane/services/registry"
	"github.com/crdplane/crdplane/services/storage"
	"github.com/crdplane/crdplane/services/validator"
)

// Config configures an in-process platform.
type Config struct {
	// DataDir holds the embedded etcd's data (kept across restarts).
	DataDir string
	// EtcdEndpoints, when set, uses an external etcd cluster instead.
	EtcdEndpoints []string
	// EtcdOverrides route groups or resources to etcd clusters of their own
	// (--etcd-servers-overrides).
	EtcdOverrides []storage.EtcdOverride
	// EtcdTLS are the CA, client certificate and key files of the TLS
	// connection to the external cluster (storage and the registry's leader
	// election share its client).
	EtcdTLS etcdtls.Config
	// ListenAddr is the gateway's HTTPS address (host:port; port 0 picks one).
	ListenAddr string
	// KubeconfigPath, when set, receives a kubeconfig for the platform.
	KubeconfigPath string
	// Token is the bearer token clients use; when empty, the one kept in
	// CredentialsDir, else a generated one.
	Token string
	// CredentialsDir, when set, keeps the CA, the serving certificate and
	// the generated token across restarts, so a kubeconfig written once
	// stays valid. Empty: new ones each start.
	CredentialsDir string
	// RotateCredentials replaces the kept CA, certificate and token.
	RotateCredentials bool
	// Hosts are extra names and IPs for the serving certificate.
	Hosts []string
	// Conversion configures webhook conversion (coalescing, chunking,
	// service endpoints for clientConfig.service webhooks).
	Conversion webhook.Config
	// Limits are the gateway's overload protection limits (0: no limit;
	// crdplane run's flags default to the gateway's).
	Limits gateway.Limits
	// Auth configures the gateway's authentication (besides Token) and
	// authorization (default AlwaysAllow).
	Auth gateway.Auth
	// Audit configures the gateway's audit log (default: none).
	Audit gateway.Audit
	// CompiledMemoryLimit is the process's budget of compiled CRDs
	// (estimated bytes), split evenly between the validator's and the
	// gateway's caches of them (--compiled-crd-memory-limit of each).
	// Zero: budgetcache.DefaultLimit() (half of GOMEMLIMIT when set, else
	// 512 MiB; at least 128 MiB).
	CompiledMemoryLimit int64
	// OpsAddr, when set, serves the process's operations endpoints over
	// plain HTTP (/metrics of every service in the process, /healthz,
	// /livez, /readyz following the gateway's readiness), for Prometheus
	// and profiling. Keep it on loopback: it has no authentication.
	OpsAddr string
	// Profiling adds Go's profiles at /debug/pprof/ to OpsAddr.
	Profiling bool
}

// Platform is a running in-process crdplane.
type Platform struct {
	// URL is the gateway's https URL.
	URL string
	// CAPEM is the CA that signed the serving certificate.
	CAPEM []byte
	// Token is the bearer token the gateway accepts.
	Token string
	// OpsURL is where the operations endpoints are served (Config.OpsAddr;
	// "" without).
	OpsURL string

	storage *storage.Service
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func() error
	errs    chan error
}

var instances atomic.Int64

// registryLeaseTTL is the registry leader election's lease TTL.
const registryLeaseTTL = 5 * time.Second

// Start starts every service and returns once the gateway serves.
func Start(ctx context.Context, cfg Config) (_ *Platform, err error) {
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:6443"
	}
	if cfg.Token == "" {
		t, err := keptToken(cfg.CredentialsDir, cfg.RotateCredentials)
		if err != nil {
			return nil, err
		}
		cfg.Token = t
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Platform{Token: cfg.Token, cancel: cancel, errs: make(chan error, 8)}
	defer func() {
		if err != nil {
			_ = p.Close() // the start error is the one to report
		}
	}()

	// In-process addresses are unique per platform, so tests can run several.
	n := instances.Add(1)
	addr := func(name string) string { return fmt.Sprintf("inproc://%s-%d", name, n) }

	dnsNames, ips := []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range cfg.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, h)
		}
	}
	var pki *localpki.PKI
	if cfg.CredentialsDir != "" {
		pki, err = localpki.LoadOrGenerate(cfg.CredentialsDir, dnsNames, ips, cfg.RotateCredentials)
	} else {
		pki, err = localpki.Generate(dnsNames, ips)
	}
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	p.CAPEM = pki.CACertPEM

	compiledLimit := cfg.CompiledMemoryLimit
	if compiledLimit <= 0 {
		compiledLimit = budgetcache.DefaultLimit()
	}
	// Every module of the component table, its dependencies wired to their
	// in-process addresses.
	mc := modules.Config{
		Target:    modules.All,
		Storage:   storage.Config{DataDir: cfg.DataDir, EtcdEndpoints: cfg.EtcdEndpoints, EtcdServersOverrides: cfg.EtcdOverrides, EtcdTLS: cfg.EtcdTLS},
		Registry:  registry.Config{LeaderLeaseDuration: registryLeaseTTL},
		Validator: validator.Config{CompiledMemoryLimit: compiledLimit / 2},
		Converter: converter.Config{Webhook: cfg.Conversion},
		Gateway: gateway.Config{
			ListenAddr: cfg.ListenAddr,
			TLSCert:    &cert,
			Tokens:     []string{cfg.Token},
			Limits:     cfg.Limits,
			Auth:       cfg.Auth,
			Audit:      cfg.Audit,
			// one egress configuration for the converter's webhooks and
			// the gateway's (webhooks, aggregation proxy), as
			// kube-apiserver's one flag
			EgressSelectorConfigFile: cfg.Conversion.EgressSelectorConfigFile,
			Egress:                   cfg.Conversion.Egress,
			// the two caches share one process's memory
			CompiledMemoryLimit: compiledLimit - compiledLimit/2,
		},
	}
	mc.Wire(addr)
	if err := mc.Validate(); err != nil {
		return nil, err
	}
	order, err := modules.Modules.Order(modules.All)
	if err != nil {
		return nil, err
	}
	proc := &modules.Process{Cfg: mc, ShareCRDs: true}
	for _, m := range order {
		svc, err := m.Build(runCtx, proc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		p.closers = append(p.closers, svc.Close)
		switch s := svc.(type) {
		case app.GRPCService:
			p.serve(runCtx, m.Name, addr(m.Name), s.Register, s.Ready)
		case app.Runner:
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				if err := s.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
					p.errs <- fmt.Errorf("%s: %w", m.Name, err)
				}
			}()
		default:
			return nil, fmt.Errorf("%s: neither a gRPC service nor a runner", m.Name)
		}
	}
	p.storage = proc.Storage
	gw := proc.Gateway
	if err := waitReady(ctx, gw); err != nil {
		return nil, err
	}
	p.URL = "https://" + gw.Addr()
	if cfg.OpsAddr != "" {
		if err := p.serveOps(cfg.OpsAddr, app.OpsHandler(app.NewHealth(gw.Ready), cfg.Profiling)); err != nil {
			return nil, err
		}
	}

	if cfg.KubeconfigPath != "" {
		if err := p.WriteKubeconfig(cfg.KubeconfigPath); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *Platform) serve(ctx context.Context, name, addr string, register func(grpc.ServiceRegistrar), ready func() error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := app.Run(ctx, app.Config{Name: name, GRPCAddr: addr, Register: register, Ready: ready, ShutdownGrace: 2 * time.Second}); err != nil {
			p.errs <- fmt.Errorf("%s: %w", name, err)
		}
	}()
}

// serveOps serves h on addr until Close; OpsURL tells where.
func (p *Platform) serveOps(addr string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ops listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	p.OpsURL = "http://" + lis.Addr().String()
	go func() { _ = srv.Serve(lis) }() // ends with Close
	p.closers = append(p.closers, srv.Close)
	return nil
}

func waitReady(ctx context.Context, gw *gateway.Service) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		err := gw.Ready()
		if err == nil && gw.Addr() != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway not ready: %v: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// EtcdClient is the storage service's etcd client (benchmarks compare
// against raw etcd writes on the same cluster).
func (p *Platform) EtcdClient() *clientv3.Client { return p.storage.Client() }

// Errors reports a service that stopped on its own.
func (p *Platform) Errors() <-chan error { return p.errs }

// WriteKubeconfig writes a kubeconfig (server URL, CA, token) to path.
func (p *Platform) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["crdplane"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAPEM}
	kc.AuthInfos["crdplane"] = &clientcmdapi.AuthInfo{Token: p.Token}
	kc.Contexts["crdplane"] = &clientcmdapi.Context{Cluster: "crdplane", AuthInfo: "crdplane", Namespace: "default"}
	kc.CurrentContext = "crdplane"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return nil
}

// Close stops every service (the gateway first) and waits for them.
func (p *Platform) Close() error {
	p.cancel()
	var errs []error
	for i := len(p.closers) - 1; i >= 0; i-- {
		if err := p.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	p.wg.Wait()
	if len(errs) > 0 {
		slog.Debug("platform close", "errors", errs)
	}
	return errors.Join(errs...)
}

// keptToken returns the token kept in dir (written on first use), or a new
// one when dir is empty or rotate is set.
func keptToken(dir string, rotate bool) (string, error) {
	if dir == "" {
		return randomToken(), nil
	}
	path := filepath.Join(dir, "token")
	if !rotate {
		b, err := os.ReadFile(path)
		if err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return strings.TrimSpace(string(b)), nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("token: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	t := randomToken()
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return t, nil
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
