package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/crdplane/crdplane/pkg/convcache"
	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/metrics"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/gateway/aggregator"
	"github.com/crdplane/crdplane/services/gateway/core"
	"github.com/crdplane/crdplane/services/gateway/cr"
	"github.com/crdplane/crdplane/services/gateway/crd"
	"github.com/crdplane/crdplane/services/gateway/discovery"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/localpki"
	"github.com/crdplane/crdplane/services/gateway/rbac"
	"github.com/crdplane/crdplane/services/gateway/rbacauthz"
	"github.com/crdplane/crdplane/services/gateway/watch"
)

// Service is one gateway: the HTTPS Kubernetes API in front of
// KubeAPIService, which grpc-gateway calls in-process.
type Service struct {
	cfg Config
	log *slog.Logger

	conns  []grpcx.Conn
	probes []*grpcx.Probe  // storage and registry: readiness
	crds   *crdcache.Cache // Config.CRDs, or the gateway's own (run by it)
	// rbacCache is the RBAC policy; rbacMode: the RBAC authorizer is
	// configured (readiness waits for the cache).
	rbacCache *rbacauthz.Cache
	rbacMode  bool
	// aggregator proxies the APIServices' group versions.
	aggregator *aggregator.Aggregator
	// converted keeps webhook-converted objects served (cr.Config.Converted).
	converted *convcache.Cache
	api       *kubeAPI
	handler   http.Handler
	auditor   *httpx.Auditor // nil: no audit

	lis    net.Listener // HTTPS, bound by New
	tlsCfg *tls.Config

	cancel      context.CancelFunc
	stopWatches context.CancelFunc
	done        chan struct{} // closed when background work has stopped
	draining    atomic.Bool
	closeOnce   sync.Once
}

// New connects to the other services, starts following the registry's CRD
// watch and binds the HTTPS listener (serve it with Run). ctx only carries
// values: the gateway runs until Close.
func New(ctx context.Context, cfg Config) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Limits.check(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	for name, addr := range map[string]string{"registry": cfg.RegistryAddr, "validator": cfg.ValidatorAddr, "storage": cfg.StorageAddr} {
		if addr == "" {
			return nil, fmt.Errorf("gateway: %s address is required", name)
		}
	}
	log := slog.Default().With("service", "gateway")
	if err := cfg.LoadEgress(); err != nil {
		return nil, fmt.Errorf("gateway: --egress-selector-config-file: %w", err)
	}
	authnCfg, authzCfg := cfg.authConfigs()
	authn, err := httpx.NewAuthenticator(ctx, authnCfg)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	auditCfg := cfg.Audit.AuditConfig
	auditCfg.WebhookDial = cfg.egressDial(egress.ControlPlane)
	auditor, err := httpx.NewAuditor(auditCfg)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if auditor != nil {
		log.Info("audit", "policy", cfg.Audit.PolicyFile, "log", cfg.Audit.LogPath, "webhook", cfg.Audit.WebhookConfigFile)
	}
	if cfg.MaxRequestBodyBytes > grpcx.MaxRequestMessageSize/3 {
		// An update's admission carries up to three objects.
		log.Warn("request bodies this large may not fit in gRPC requests to the validator", "max-request-body-bytes", cfg.MaxRequestBodyBytes, "grpc-request-limit", grpcx.MaxRequestMessageSize)
	}
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}

	s := &Service{cfg: cfg, log: log, tlsCfg: tlsCfg, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.closeConns()
		}
	}()
	dial := func(addr string) (grpcx.Conn, error) {
		cc, err := grpcx.Dial(addr)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		s.conns = append(s.conns, cc)
		return cc, nil
	}
	regConn, err := dial(cfg.RegistryAddr)
	if err != nil {
		return nil, err
	}
	// The RBAC policy, in memory: the RBAC authorizer's and the
	// escalation checks' (which every mode runs on RBAC writes).
	rbacClient := registryv1.NewRBACServiceClient(regConn)
	s.rbacCache = rbacauthz.NewCache(rbacClient, log)
	rbacAuthz := rbacauthz.NewAuthorizer(s.rbacCache.Policy)
	authzCfg.RBAC = rbacAuthz
	authz, err := httpx.NewAuthorizer(authzCfg)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.rbacMode = authz.HasMode(httpx.ModeRBAC)
	log.Info("authorization", "mode", strings.Join(authz.Modes(), ","))
	valConn, err := dial(cfg.ValidatorAddr)
	if err != nil {
		return nil, err
	}
	stoConn, err := dial(cfg.StorageAddr)
	if err != nil {
		return nil, err
	}
	var converter converterv1.ConverterServiceClient
	if cfg.ConverterAddr != "" {
		cc, err := dial(cfg.ConverterAddr)
		if err != nil {
			return nil, err
		}
		converter = converterv1.NewConverterServiceClient(cc)
	}

	// Readiness follows the services every request needs.
	s.probes = []*grpcx.Probe{grpcx.NewProbe("storage", stoConn), grpcx.NewProbe("registry", regConn)}
	registry := registryv1.NewRegistryServiceClient(regConn)
	if s.crds = cfg.CRDs; s.crds == nil {
		s.crds = crdcache.New(registry, log)
	}
	apiRegClient := registryv1.NewAPIRegistrationServiceClient(regConn)
	if s.aggregator, err = newAggregator(cfg.Auth.Aggregation, cfg.egressDial(egress.Cluster), apiRegClient, log); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.converted = convcache.New(convcache.Config{MaxBytes: convcache.DefaultMaxBytes, Component: "gateway"})
	namespaces := registryv1.NewNamespaceServiceClient(regConn)
	var lifecycleNamespaces registryv1.NamespaceServiceClient
	if cfg.EnableNamespaceLifecycle {
		lifecycleNamespaces = namespaces
	}
	s.api = &kubeAPI{
		discovery: &discovery.Server{Registry: registry, OpenAPI: registryv1.NewOpenAPIServiceClient(regConn)},
		crdAPI:    crd.New(crd.Config{Registry: registry, MinRequestTimeout: cfg.MinRequestTimeout}),
		rbacAPI: rbac.New(rbac.Config{RBAC: rbacClient, APIRegistration: apiRegClient, MinRequestTimeout: cfg.MinRequestTimeout,
			Authorizer: authz, Policy: s.rbacCache.Policy}),
		crAPI: cr.New(cr.Config{
			Registry:            registry,
			Storage:             storagev1.NewStorageServiceClient(stoConn),
			Validator:           validatorv1.NewValidatorServiceClient(valConn),
			Converter:           converter,
			Converted:           s.converted,
			Namespaces:          lifecycleNamespaces,
			CRDs:                s.crds,
			MinRequestTimeout:   cfg.MinRequestTimeout,
			CRDWait:             cfg.CRDWait,
			CompiledMemoryLimit: cfg.CompiledMemoryLimit,
			Now:                 time.Now,
			Log:                 log,
		}),
		readyChecks: s.readyChecks,
		log:         log,
	}

	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	coreAPI := core.New(core.Config{Namespaces: namespaces, MinRequestTimeout: cfg.MinRequestTimeout, Lifecycle: cfg.EnableNamespaceLifecycle})
	mux, err := newKubeMux(bg, s.api, coreAPI)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	watchCtx, stopWatches := context.WithCancel(bg)
	s.stopWatches = stopWatches
	s.auditor = auditor
	s.handler = instrument(&httpx.Edge{Auth: authn, Authz: authz, Audit: auditor, MaxBody: cfg.MaxRequestBodyBytes, RequestTimeout: cfg.RequestTimeout, Next: s.aggregator.Handler(mux), StopWatches: watchCtx,
		Inflight: httpx.NewInflightLimiter(cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight),
		Watches:  httpx.NewWatchLimiter(cfg.MaxWatchesPerClient, cfg.MaxWatches)})

	if cfg.ListenAddr != "" {
		if s.lis, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			cancel()
			return nil, fmt.Errorf("gateway: listen %s: %w", cfg.ListenAddr, err)
		}
	}
	// The audit backends start last: nothing above can fail after them.
	if err := auditor.Run(); err != nil {
		cancel()
		if s.lis != nil {
			_ = s.lis.Close()
		}
		return nil, fmt.Errorf("gateway: %w", err)
	}

	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		for _, p := range s.probes {
			wg.Go(func() { p.Run(bg) })
		}
		wg.Go(func() { s.rbacCache.Run(bg) })
		authn.Run(bg)

		wg.Go(func() { s.aggregator.Run(bg) })
		if cfg.CRDs == nil {
			s.crds.Run(bg)
		}
		wg.Wait()
	}()
	ok = true
	return s, nil
}

// instrument wraps the edge in what every request goes through: metrics,
// tracing and panic recovery (innermost, so that a recovered panic's 500
// is traced and counted).
func instrument(h http.Handler) http.Handler {
	return metrics.InstrumentHTTP("kube-api", otelhttp.NewHandler(httpx.RecoverPanics(h), "kube-api",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path })))
}

// newMux builds a grpc-gateway mux: raw HttpBody bodies both ways,
// Accept/Content-Type forwarded as metadata, Warning headers and HTTP
// status codes from response metadata, and Kubernetes Status errors.
func newMux() *runtime.ServeMux {
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, httpx.RawMarshaler{}),
		runtime.WithIncomingHeaderMatcher(httpx.IncomingHeader),
		runtime.WithOutgoingHeaderMatcher(httpx.OutgoingHeader),
		runtime.WithOutgoingTrailerMatcher(httpx.NoTrailers),
		runtime.WithForwardResponseOption(httpx.ForwardHTTPCode),
		runtime.WithErrorHandler(httpx.ErrorHandler),
		runtime.WithRoutingErrorHandler(httpx.RoutingErrorHandler),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithDisableHTTPMethodOverride(),
		runtime.SetQueryParameterParser(httpx.KubeQueryParser{}),
	)
}

// newKubeMux builds the routes of KubeAPIService: the unary methods
// through grpc-gateway's in-process HandlerServer registration (a direct
// call, no gRPC hop), the watches streamed straight into the response;
// kubeRouter in front routes what upstream routes by verb, not by path.
func newKubeMux(ctx context.Context, a *kubeAPI, coreAPI *core.Server) (http.Handler, error) {
	mux := newMux()
	api := newTracedAPI(a)
	if err := gatewayv1.RegisterKubeAPIServiceHandlerServer(ctx, mux, api); err != nil {
		return nil, fmt.Errorf("register KubeAPIService routes: %w", err)
	}
	if err := watch.Register(mux, api); err != nil {
		return nil, fmt.Errorf("register watch routes: %w", err)
	}
	// the core group's namespaces (/api/v1)
	if err := gatewayv1.RegisterCoreAPIServiceHandlerServer(ctx, mux, coreAPI); err != nil {
		return nil, fmt.Errorf("register CoreAPIService routes: %w", err)
	}
	if err := watch.RegisterCore(mux, coreAPI); err != nil {
		return nil, fmt.Errorf("register core watch routes: %w", err)
	}
	return &kubeRouter{mux: mux, api: a}, nil
}

// Handler is the gateway's HTTP handler (authentication, the Kubernetes
// REST routes), for serving it elsewhere or in tests.
func (s *Service) Handler() http.Handler { return s.handler }

// Addr is the bound HTTPS address ("" without a ListenAddr).
func (s *Service) Addr() string {
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

var errNoCache = errors.New("CRD cache not synced")

// readyCheck is one check of /readyz.
type readyCheck struct {
	name  string
	check func() error
}

// readyChecks are the checks of readiness, in /readyz's order: the CRD
// cache has synced (as kube-apiserver's informer-sync), storage and the
// registry answer their health checks and are serving (as its etcd check:
// no request can be served without them), and the gateway is not shutting
// down. The validator and converter are left out: reads go on without
// them.
func (s *Service) readyChecks() []readyCheck {
	checks := []readyCheck{{"crd-cache", func() error {
		if !s.crds.Synced() {
			return errNoCache
		}
		return nil
	}}}
	if s.rbacMode {
		checks = append(checks, readyCheck{"rbac-cache", func() error {
			if !s.rbacCache.Synced() {
				return errors.New("the RBAC policy cache has not synced")
			}
			return nil
		}})
	}
	for _, p := range s.probes {
		checks = append(checks, readyCheck{p.Name(), p.Err})
	}
	return append(checks, readyCheck{"shutdown", func() error {
		if s.draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}})
}

// Ready reports readiness: every readyCheck passes.
func (s *Service) Ready() error {
	for _, c := range s.readyChecks() {
		if err := c.check(); err != nil {
			return err
		}
	}
	return nil
}

// Run serves HTTPS (HTTP/2 and HTTP/1.1) on the listener until ctx ends,
// then shuts down gracefully: readiness fails, new connections stop, and
// in-flight requests get ShutdownGrace to finish (watches are cut).
func (s *Service) Run(ctx context.Context) error {
	if s.lis == nil {
		return errors.New("gateway: no listen address")
	}
	srv := &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tlsCfg,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(s.lis, "", "") }()
	s.log.Info("serving the Kubernetes API", "addr", s.Addr())
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.stopWatches()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	s.log.Info("stopped serving")
	return nil
}

// Close ends the watches being served, stops the CRD watch and closes the
// connections.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.draining.Store(true)
		if s.lis != nil {
			_ = s.lis.Close()
		}
		s.stopWatches()
		s.cancel()
		<-s.done
		s.closeConns()
		s.auditor.Shutdown()
	})
	return nil
}

func (s *Service) closeConns() {
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// serverTLS builds the serving TLS configuration: the configured
// certificate, or a self-signed one for localhost.
func serverTLS(cfg Config) (*tls.Config, error) {
	var cert tls.Certificate
	switch {
	case cfg.TLSCert != nil:
		cert = *cfg.TLSCert
	case cfg.TLSCertFile != "" || cfg.TLSKeyFile != "":
		c, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS certificate: %w", err)
		}
		cert = c
	default:
		pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
		if err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		c, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		cert = c
	}
	tc := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
	// Client certificates are asked for, not required, and verified by
	// the authenticators (an unknown one is 401, as kube-apiserver
	// answers); the CAs are the handshake's hint.
	for _, f := range []string{cfg.ClientCAFile, cfg.RequestHeader.ClientCAFile} {
		if f == "" {
			continue
		}
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		if tc.ClientCAs == nil {
			tc.ClientCAs = x509.NewCertPool()
		}
		if !tc.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA %s: no PEM certificates", f)
		}
		tc.ClientAuth = tls.RequestClientCert
	}
	// Behind a front kube-apiserver the CAs may come from its ConfigMap
	// (and change): asked for, verified by the authenticators.
	if cfg.AuthenticationKubeconfig != "" && !cfg.AuthenticationSkipLookup {
		tc.ClientAuth = tls.RequestClientCert
	}
	return tc, nil
}

// newAggregator builds the aggregation layer from its configuration (the
// proxy client certificate read once, at start).
func newAggregator(cfg Aggregation, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	client registryv1.APIRegistrationServiceClient, log *slog.Logger) (*aggregator.Aggregator, error) {
	ac := aggregator.Config{Client: client, Resolver: aggregator.NewResolver(cfg.ServiceOverrides), ProbeInterval: cfg.ProbeInterval, Dial: dial, Log: log}
	if cfg.ProxyClientCertFile != "" {
		// followed and reloaded, as kube-apiserver's
		c, err := dynamiccertificates.NewDynamicServingContentFromFiles("aggregator-proxy-cert", cfg.ProxyClientCertFile, cfg.ProxyClientKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--proxy-client-cert-file: %w", err)
		}
		ac.ProxyClientCertKey = c
	}
	return aggregator.New(ac), nil
}

// CRDs is the CRD cache the gateway follows (for a process to share).
func (s *Service) CRDs() *crdcache.Cache { return s.crds }
