package registry

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/services/registry/leader"
	"github.com/crdplane/crdplane/services/registry/openapi"
)

// defaultWorkers is the default number of workers per CRD controller.
const defaultWorkers = 4

// Config configures the registry service.
type Config struct {
	// StorageAddr is the StorageService address: host:port, dns:///host:port
	// or inproc://storage in the all-in-one process.
	StorageAddr string
	// ValidatorAddr is the ValidatorService address, whose ValidateCRD
	// checks CEL rules (compilation, cost) and defaults of CRDs being
	// written. Required of a process (Validate); New accepts it empty
	// (those checks skipped) for tests of the registry alone.
	ValidatorAddr string
	// Workers is the number of workers per controller (default 4). Each
	// sync ends in a storage write; one worker waits for every write of
	// its controller in turn, so a burst of CRDs would be established at
	// the speed of etcd's fsyncs one after another.
	Workers int
	// Elector decides when this replica runs the controllers. nil: an
	// etcd election when EtcdEndpoints are set, else always (one replica).
	Elector Elector
	// EtcdEndpoints is the etcd cluster of the leader election (used when
	// Elector is nil). CRDs are still stored through the StorageService.
	EtcdEndpoints []string
	// EtcdTLS are the CA, client certificate and key files of the TLS
	// connection to EtcdEndpoints (https://; none set: plain text, or the
	// system roots for https://).
	EtcdTLS etcdtls.Config
	// LeaderLeaseDuration is the TTL of the leader's etcd lease: how long a
	// leader that died without resigning keeps leadership (default 15s).
	LeaderLeaseDuration time.Duration
	// CleanupTimeout bounds how long the finalizer waits for a CRD's objects
	// to disappear before it reports InstanceDeletionCheck and retries
	// (default 1m, as upstream).
	CleanupTimeout time.Duration
	// OpenAPICacheBytes bounds the rendered /openapi/v3 group-version
	// documents kept in memory (default 64 MiB); one not kept is rendered
	// again from its CRD parts when asked for.
	OpenAPICacheBytes int
	// Logger is the service's logger (nil: slog.Default()).
	Logger *slog.Logger
}

// RegisterFlags adds the configuration flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.StorageAddr, "storage-addr", "localhost:7001", "StorageService address (host:port, dns:///host:port or inproc://name)")
	fs.StringVar(&c.ValidatorAddr, "validator-addr", "localhost:7003", "ValidatorService address for the CEL and default checks of CRD writes (host:port, dns:///host:port or inproc://name; required)")
	fs.IntVar(&c.Workers, "controller-workers", defaultWorkers, "workers per CRD controller (the names controller runs one)")
	fs.IntVar(&c.OpenAPICacheBytes, "openapi-cache-bytes", openapi.DefaultDocumentCacheBytes, "bytes of rendered /openapi/v3 group-version documents kept in memory (one not kept is rendered again when asked for)")
	fs.DurationVar(&c.CleanupTimeout, "cleanup-timeout", time.Minute, "how long the CRD finalizer waits for a CRD's objects to be gone before retrying")
	fs.Func("etcd-endpoints", "comma-separated etcd endpoints for leader election among registry replicas (empty: this replica always runs the controllers)", func(s string) error {
		c.EtcdEndpoints = splitList(s)
		return nil
	})
	c.EtcdTLS.RegisterFlags(fs)
	fs.DurationVar(&c.LeaderLeaseDuration, "leader-elect-lease-duration", leader.DefaultLeaseTTL, "TTL of the leader election lease: how long a replica that died while leading keeps leadership")
}

// Validate checks the configuration of a registry process: the addresses
// of the services it calls are required (the validator's too: without it
// CRD writes would skip their CEL and default checks).
func (c *Config) Validate() error {
	if c.StorageAddr == "" {
		return errors.New("--storage-addr is required: CRDs are kept by the storage service")
	}
	if c.ValidatorAddr == "" {
		return errors.New("--validator-addr is required: the validator checks the CEL rules and defaults of CRD writes (ValidateCRD)")
	}
	if c.Elector == nil && len(c.EtcdEndpoints) == 0 && c.EtcdTLS.Enabled() {
		return fmt.Errorf("etcd TLS files (--%s, --%s, --%s) are for the leader election's etcd (--etcd-endpoints)",
			etcdtls.CAFileFlag, etcdtls.CertFileFlag, etcdtls.KeyFileFlag)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = defaultWorkers
	}
	if c.CleanupTimeout <= 0 {
		c.CleanupTimeout = time.Minute
	}
	if c.OpenAPICacheBytes <= 0 {
		c.OpenAPICacheBytes = openapi.DefaultDocumentCacheBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LeaderLeaseDuration <= 0 {
		c.LeaderLeaseDuration = leader.DefaultLeaseTTL
	}
}

// Elector runs lead whenever this replica should run the controllers: for as
// long as it holds leadership, cancelling lead's context when it loses it.
// Run returns when ctx ends.
type Elector interface {
	Run(ctx context.Context, lead func(ctx context.Context))
}

// AlwaysLeader is the Elector of a single replica: it leads until ctx ends.
type AlwaysLeader struct{}

// Run calls lead(ctx) and returns when it does.
func (AlwaysLeader) Run(ctx context.Context, lead func(ctx context.Context)) { lead(ctx) }
