// Package storage is crdplane's storage service: Kubernetes objects (JSON) in
// etcd under /registry/<group>/<plural>/[<namespace>/]<name>, served as
// crdplane.storage.v1.StorageService.
//
// Objects are stored without metadata.resourceVersion; every object returned
// carries metadata.resourceVersion set to its etcd mod revision. etcd is
// embedded (single member, in Config.DataDir) unless Config.EtcdEndpoints
// names an external cluster, reached over TLS (with a client certificate)
// when Config.EtcdTLS names the files. Config.EtcdServersOverrides sends
// chosen groups or resources to clusters of their own (backends.go).
package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Config configures the storage service.
type Config struct {
	// EtcdEndpoints of an external etcd cluster; empty starts an embedded etcd.
	EtcdEndpoints []string
	// EtcdTLS are the CA, client certificate and key files of the TLS
	// connection to the external cluster (https:// endpoints; none set:
	// plain text, or the system roots for https://). Not for the embedded
	// etcd.
	EtcdTLS etcdtls.Config
	// DataDir is the embedded etcd's data directory (kept across restarts).
	DataDir string
	// EtcdServersOverrides route resources or groups to other etcd
	// clusters (kube-apiserver's --etcd-servers-overrides; EtcdTLS applies
	// to them too).
	EtcdServersOverrides []EtcdOverride
	// EtcdDialTimeout bounds connecting to etcd (default 5s).
	EtcdDialTimeout time.Duration
	// EtcdStartTimeout bounds the embedded etcd's start (default 60s).
	EtcdStartTimeout time.Duration
	// EtcdLogLevel is the zap level of etcd's own logs, embedded server and
	// client (default "warn").
	EtcdLogLevel string
	// EmbeddedClientURL and EmbeddedPeerURL are the embedded etcd's listen
	// URLs. Default: clients on a unix socket in DataDir (only this user
	// reaches it), the peer listener on a free loopback port that requires
	// a client certificate only this process has.
	EmbeddedClientURL string
	EmbeddedPeerURL   string
	// AutoCompactionRetention is the embedded etcd's periodic compaction
	// retention (default "5m", as kube-apiserver compacts; "0" disables).
	AutoCompactionRetention string
	// UnsafeNoFsync disables fsync in the embedded etcd (tests only).
	UnsafeNoFsync bool
	// BookmarkInterval is how often a watch with allow_bookmarks gets a
	// BOOKMARK event (default 1m).
	BookmarkInterval time.Duration
	// DisableWatchCache gives every watch its own etcd watch instead of
	// sharing one per resource.
	DisableWatchCache bool
	// WatchCacheSize is how many recent events of a resource the watch
	// cache keeps for watches that join late (default 1024).
	WatchCacheSize int
}

// RegisterFlags adds the configuration's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("etcd-endpoints", "comma-separated etcd endpoints of an external cluster (empty: run an embedded etcd)", func(s string) error {
		c.EtcdEndpoints = splitList(s)
		return nil
	})
	RegisterOverridesFlag(fs, &c.EtcdServersOverrides)
	c.EtcdTLS.RegisterFlags(fs)
	fs.StringVar(&c.DataDir, "data-dir", "crdplane-data", "data directory of the embedded etcd")
	fs.DurationVar(&c.EtcdDialTimeout, "etcd-dial-timeout", 5*time.Second, "timeout for connecting to etcd")
	fs.DurationVar(&c.EtcdStartTimeout, "etcd-start-timeout", 60*time.Second, "timeout for the embedded etcd to become ready")
	fs.StringVar(&c.EtcdLogLevel, "etcd-log-level", "warn", "log level of etcd's own logs (debug, info, warn, error)")
	fs.StringVar(&c.EmbeddedClientURL, "etcd-listen-client-url", "", "client URL of the embedded etcd (default: a unix socket in the data directory; http://127.0.0.1:0 opens an unauthenticated TCP port)")
	fs.StringVar(&c.EmbeddedPeerURL, "etcd-listen-peer-url", "", "peer URL of the embedded etcd (default: https on a free loopback port, with client-certificate authentication)")
	fs.StringVar(&c.AutoCompactionRetention, "etcd-auto-compaction-retention", "5m", "periodic compaction retention of the embedded etcd (0: never compact)")
	fs.DurationVar(&c.BookmarkInterval, "watch-bookmark-interval", time.Minute, "interval between BOOKMARK events of watches that allow them")
	fs.BoolFunc("watch-cache", "share one etcd watch among the watches of a resource (default true; --watch-cache=false disables)", func(s string) error {
		on, err := strconv.ParseBool(s)
		c.DisableWatchCache = !on
		return err
	})
	fs.IntVar(&c.WatchCacheSize, "watch-cache-size", 1024, "recent events per resource the watch cache keeps")
}

// Validate checks the configuration of a storage process: each resource
// overridden once, etcd TLS files for external clusters.
func (c *Config) Validate() error {
	if err := checkOverrides(c.EtcdServersOverrides); err != nil {
		return err
	}
	if !c.EtcdTLS.Enabled() {
		return nil
	}
	if len(c.EtcdEndpoints) == 0 && len(c.EtcdServersOverrides) == 0 {
		return fmt.Errorf("etcd TLS files (--%s, --%s, --%s) are for an external etcd (--etcd-endpoints): the embedded etcd serves its clients in plain text",
			etcdtls.CAFileFlag, etcdtls.CertFileFlag, etcdtls.KeyFileFlag)
	}
	endpoints := slices.Clone(c.EtcdEndpoints)
	for _, o := range c.EtcdServersOverrides {
		endpoints = append(endpoints, o.Endpoints...)
	}
	return c.EtcdTLS.CheckEndpoints(endpoints)
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
	if c.EtcdDialTimeout <= 0 {
		c.EtcdDialTimeout = 5 * time.Second
	}
	if c.EtcdStartTimeout <= 0 {
		c.EtcdStartTimeout = 60 * time.Second
	}
	if c.EtcdLogLevel == "" {
		c.EtcdLogLevel = "warn"
	}
	if c.BookmarkInterval <= 0 {
		c.BookmarkInterval = time.Minute
	}
	if c.AutoCompactionRetention == "" {
		c.AutoCompactionRetention = "5m"
	}
	if c.WatchCacheSize <= 0 {
		c.WatchCacheSize = 1024
	}
}

// Service implements crdplane.storage.v1.StorageService on etcd.
type Service struct {
	storagev1.UnimplementedStorageServiceServer

	cfg     Config
	log     *slog.Logger
	router  router        // the etcd clusters: main, and overrides
	embed   *embeddedEtcd // nil with an external cluster
	etcdLog etcdLogger

	hubs        hubs // the watch cache
	watchBuffer int  // hub batches a watch may lag behind

	corruptLog corruptLog // when corrupt objects were last logged
}

// defaultWatchBuffer is how many etcd responses a watch may lag behind its
// hub before it is ended.
const defaultWatchBuffer = 1024

// New connects to etcd, first starting the embedded one when cfg names no
// endpoints.
func New(ctx context.Context, cfg Config) (*Service, error) {
	cfg.setDefaults()
	log := slog.Default().With("service", "storage")
	etcdLog, err := newEtcdLogger(cfg.EtcdLogLevel)
	if err != nil {
		return nil, err
	}
	if err := checkOverrides(cfg.EtcdServersOverrides); err != nil {
		return nil, err
	}
	tlsCfg, err := cfg.etcdTLS()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, log: log, etcdLog: etcdLog, watchBuffer: defaultWatchBuffer}
	endpoints := cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		e, err := startEmbedded(ctx, cfg, etcdLog.Logger, log)
		if err != nil {
			return nil, err
		}
		s.embed = e
		endpoints = []string{e.endpoint}
	}
	mainTLS := tlsCfg
	if s.embed != nil {
		mainTLS = nil // plain text on its private socket; the TLS files are the overrides'
	}
	client, err := s.newEtcdClient("main", endpoints, mainTLS)
	if err != nil {
		s.closeEmbedded()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	s.router.main = &backend{name: "main", endpoints: endpoints, client: client}
	if s.embed == nil {
		// The client connects lazily: a cluster that cannot be reached (or
		// refuses the certificates) fails here, saying why.
		if err := s.checkEtcd(ctx, client, mainTLS, endpoints); err != nil {
			_ = client.Close()
			return nil, err
		}
	}
	if err := s.connectOverrides(ctx, tlsCfg); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// etcdTLS is the TLS configuration of the external etcd's client (nil:
// none configured).
func (c *Config) etcdTLS() (*tls.Config, error) {
	if !c.EtcdTLS.Enabled() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.EtcdTLS.Build()
}

// Register adds StorageService to srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	storagev1.RegisterStorageServiceServer(srv, s)
}

// Ready reports whether the main etcd answers a read (overrides' clusters
// are not asked: backends.go).
func (s *Service) Ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.router.main.client.Get(ctx, keyRoot+"health", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

// Client is the etcd client the service uses (for leader election and the
// like in the same process).
func (s *Service) Client() *clientv3.Client { return s.router.main.client }

// Close closes the etcd client and stops the embedded etcd.
func (s *Service) Close() error {
	s.etcdLog.silence()
	errs := s.closeBackends()
	s.closeEmbedded()
	return errors.Join(errs...)
}

func (s *Service) closeEmbedded() {
	s.etcdLog.silence()
	if s.embed != nil {
		s.embed.close()
		s.embed = nil
	}
}
