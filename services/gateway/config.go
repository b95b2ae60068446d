// Package gateway is crdplane's Kubernetes REST edge: grpc-gateway
// translates kube-apiserver's REST surface into calls on
// crdplane.gateway.v1.KubeAPIService, which this package implements by
// orchestrating the registry (CRDs), validator (admission), converter
// (versions) and storage (objects) services.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/crdplane/crdplane/pkg/budgetcache"
	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Config configures the gateway.
type Config struct {
	// ListenAddr is where HTTPS is served (host:port; ":0" picks a port).
	ListenAddr string
	// RegistryAddr, ValidatorAddr, ConverterAddr and StorageAddr are the
	// gRPC addresses of the other services (host:port, dns:///host:port or
	// inproc://name).
	RegistryAddr  string
	ValidatorAddr string
	ConverterAddr string
	StorageAddr   string

	// TLSCertFile and TLSKeyFile are the PEM serving certificate and key.
	TLSCertFile string
	TLSKeyFile  string
	// TLSCert is an in-memory alternative to the files. With neither, the
	// gateway serves a self-signed certificate for localhost.
	TLSCert *tls.Certificate

	// Tokens are accepted bearer tokens, of the user admin in
	// system:masters.
	Tokens []string
	// Auth configures the other authenticators (token file, client
	// certificates, token webhook, front proxy) and authorization.
	Auth
	// Audit configures the audit log (policy, log file, webhook).
	Audit Audit

	// MaxRequestBodyBytes bounds a request body (default 3 MiB).
	MaxRequestBodyBytes int64
	// RequestTimeout bounds every request but watches; a request's
	// ?timeout can only shorten it (default 1m, as kube-apiserver).
	RequestTimeout time.Duration
	// MinRequestTimeout is the watch duration bound when the client gives
	// no timeoutSeconds: a watch then lasts a random time between it and
	// twice it (default 30m, as kube-apiserver).
	MinRequestTimeout time.Duration
	// CRDWait bounds how long a request for a resource the CRD cache does
	// not know yet waits for the cache when the registry has the CRD
	// (default 5s).
	CRDWait time.Duration
	// CRDs, when set, is a CRD cache shared with other services of the
	// process, run by its owner; nil: the gateway follows the registry's
	// CRD watch with a cache of its own.
	CRDs *crdcache.Cache
	// EnableNamespaceLifecycle turns on kube-apiserver's NamespaceLifecycle
	// admission: creates of custom resources in a namespace that does not
	// exist (404) or is being deleted (403) are refused, and the default,
	// kube-system and kube-public namespaces cannot be deleted. Off by
	// default, as the standalone apiextensions-apiserver.
	EnableNamespaceLifecycle bool
	// ShutdownGrace bounds the graceful stop of Run (default 10s).
	ShutdownGrace time.Duration
	// CompiledMemoryLimit bounds the estimated bytes of the compiled
	// structural schemas the gateway keeps to prune and default
	// (crdlimits.EstimateStructuralSize); least recently used CRDs are
	// evicted beyond it. Zero: budgetcache.DefaultLimit() (half of
	// GOMEMLIMIT when set, else 512 MiB; at least 128 MiB).
	CompiledMemoryLimit int64

	// Limits are the overload protection limits.
	Limits

	// EgressSelectorConfigFile is kube-apiserver's
	// --egress-selector-config-file (an EgressSelectorConfiguration): the
	// gateway's own webhooks (token authentication, authorization, audit)
	// dial through its controlplane selection, and the aggregation
	// layer's proxy and availability checks through its cluster
	// selection, as kube-apiserver's do (Direct when absent). Read by
	// LoadEgress into Egress.
	EgressSelectorConfigFile string
	// Egress routes those connections (nil: every one Direct).
	Egress *egress.Selector
}

// LoadEgress reads EgressSelectorConfigFile into Egress (nothing without
// a file, or when Egress is already set), with kube-apiserver's checks
// and wording.
func (c *Config) LoadEgress() error {
	if c.EgressSelectorConfigFile == "" || c.Egress != nil {
		return nil
	}
	sel, err := egress.Load(c.EgressSelectorConfigFile)
	c.Egress = sel
	return err
}

// egressDial is selection's dial function, nil when it dials directly (the
// clients then keep their own default dialers).
func (c *Config) egressDial(selection egress.Name) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d := c.Egress.Dialer(selection); !d.Direct() {
		return d.DialContext
	}
	return nil
}

// Limits protect the gateway from overload (overload.go).
type Limits struct {
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight bound the GET
	// requests and the requests of other verbs being served at once, as
	// kube-apiserver's flags of the same names (watches are not counted);
	// beyond them a request is answered 429 with Retry-After: 1. 0: no
	// limit (the flags default to kube-apiserver's 400 and 200).
	MaxRequestsInFlight         int
	MaxMutatingRequestsInFlight int
	// MaxWatchesPerClient and MaxWatches bound the watches open for one
	// client (a token file's user, or a token without one) and in all;
	// beyond them a watch is answered 429 with Retry-After: 1. 0: no limit
	// (the flags default to 1000 and 10000).
	MaxWatchesPerClient int
	MaxWatches          int
}

// RegisterFlags adds the gateway's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.ListenAddr, "listen", ":6443", "HTTPS listen address of the Kubernetes API")
	fs.StringVar(&c.RegistryAddr, "registry-addr", "localhost:7002", "registry gRPC address")
	fs.StringVar(&c.ValidatorAddr, "validator-addr", "localhost:7003", "validator gRPC address")
	fs.StringVar(&c.ConverterAddr, "converter-addr", "localhost:7004", "converter gRPC address (webhook conversion)")
	fs.StringVar(&c.StorageAddr, "storage-addr", "localhost:7001", "storage gRPC address")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM serving certificate (default: a self-signed certificate for localhost)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "PEM serving key")
	c.Auth.RegisterFlags(fs)
	c.Audit.RegisterFlags(fs)
	fs.Func("token", "an accepted bearer token, of the user admin in system:masters (repeatable)", func(s string) error {
		if s = strings.TrimSpace(s); s != "" {
			c.Tokens = append(c.Tokens, s)
		}
		return nil
	})
	fs.Int64Var(&c.MaxRequestBodyBytes, "max-request-body-bytes", httpx.DefaultMaxRequestBodyBytes, "largest accepted request body")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", httpx.DefaultRequestTimeout, "deadline of every request but watches (?timeout may shorten it)")
	fs.DurationVar(&c.MinRequestTimeout, "min-request-timeout", 30*time.Minute, "watch duration when the client sets no timeoutSeconds (randomised up to twice this)")
	fs.DurationVar(&c.CRDWait, "crd-wait", 5*time.Second, "how long a request waits for the CRD cache to catch up with the registry")
	fs.BoolVar(&c.EnableNamespaceLifecycle, "enable-namespace-lifecycle", false, "NamespaceLifecycle admission: refuse creates of custom resources in namespaces that do not exist (404) or are terminating (403), and deletes of default, kube-system and kube-public")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 10*time.Second, "bound on graceful shutdown")
	fs.Var(budgetcache.QuantityFlag{V: &c.CompiledMemoryLimit}, budgetcache.FlagName,
		"memory budget of the compiled CRD structural schemas (estimated, e.g. 512Mi); least recently used CRDs are evicted beyond it and compile again on demand; 0: half of GOMEMLIMIT, else 512Mi")
	c.Limits.RegisterFlags(fs)
	fs.StringVar(&c.EgressSelectorConfigFile, "egress-selector-config-file", "", "File with apiserver egress selector configuration (kube-apiserver's EgressSelectorConfiguration, apiserver.k8s.io/v1beta1): the token, authorization and audit webhooks are dialled through its controlplane selection, APIService backends (proxy and availability checks) through its cluster selection (Direct, HTTPConnect over TCP or a Unix socket, GRPC over a Unix socket); none: direct")
}

// Validate checks the configuration of a gateway process: the addresses of
// the four services it calls are required (New still accepts no converter,
// for tests without webhook conversion), the authorization modes, and the
// limits.
func (c *Config) Validate() error {
	for _, a := range []struct{ flag, addr, why string }{
		{"registry-addr", c.RegistryAddr, "CRDs, discovery, OpenAPI"},
		{"validator-addr", c.ValidatorAddr, "admission of every write"},
		{"converter-addr", c.ConverterAddr, "webhook conversion"},
		{"storage-addr", c.StorageAddr, "every object"},
	} {
		if a.addr == "" {
			return fmt.Errorf("--%s is required (%s)", a.flag, a.why)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if err := c.Auth.Validate(); err != nil {
		return err
	}
	if err := c.Audit.Validate(); err != nil {
		return err
	}
	if err := c.LoadEgress(); err != nil {
		return fmt.Errorf("--egress-selector-config-file: %w", err)
	}
	return c.Limits.check()
}

// RegisterFlags adds the overload protection flags to fs, with their
// defaults (crdplane run has them too).
func (c *Limits) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxRequestsInFlight, "max-requests-inflight", httpx.DefaultMaxRequestsInFlight,
		"the maximum number of non-mutating (GET) requests in flight, watches not counted; beyond it 429 (0: no limit)")
	fs.IntVar(&c.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", httpx.DefaultMaxMutatingRequestsInFlight,
		"the maximum number of mutating requests in flight; beyond it 429 (0: no limit)")
	fs.IntVar(&c.MaxWatchesPerClient, "max-watches-per-client", httpx.DefaultMaxWatchesPerClient,
		"the maximum number of watches one client (user or token) holds open; beyond it 429 (0: no limit)")
	fs.IntVar(&c.MaxWatches, "max-watches", httpx.DefaultMaxWatches,
		"the maximum number of watches open on the gateway; beyond it 429 (0: no limit)")
}

// check refuses negative limits, as kube-apiserver's flag validation.
func (c *Limits) check() error {
	for _, l := range []struct {
		flag string
		v    int
	}{
		{"max-requests-inflight", c.MaxRequestsInFlight},
		{"max-mutating-requests-inflight", c.MaxMutatingRequestsInFlight},
		{"max-watches-per-client", c.MaxWatchesPerClient},
		{"max-watches", c.MaxWatches},
	} {
		if l.v < 0 {
			return fmt.Errorf("--%s can not be negative value", l.flag)
		}
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.MaxRequestBodyBytes <= 0 {
		c.MaxRequestBodyBytes = httpx.DefaultMaxRequestBodyBytes
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = httpx.DefaultRequestTimeout
	}
	if c.MinRequestTimeout <= 0 {
		c.MinRequestTimeout = 30 * time.Minute
	}
	if c.CRDWait <= 0 {
		c.CRDWait = 5 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 10 * time.Second
	}
}
