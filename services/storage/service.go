// Package storage is crdplane's storage service: Kubernetes objects (JSON) in
// etcd under /registry/<group>/<plural>/[<namespace>/]<name>, served as
// crdplane.storage.v1.StorageService.
//
// Objects are stored without metadata.resourceVersion; every object returned
// carries metadata.resourceVersion set to its etcd mod revision. etcd is
// embedded (single member, in Config.DataDir) unless Config.EtcdEndpoints
// names an external cluster, reached over TLS (with a client certificate)
// when Config.EtcdTLS names the files.
package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
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

// Validate checks the configuration of a storage process: etcd TLS files
// are for an external cluster.
func (c *Config) Validate() error {
	if !c.EtcdTLS.Enabled() {
		return nil
	}
	if len(c.EtcdEndpoints) == 0 {
		return fmt.Errorf("etcd TLS files (--%s, --%s, --%s) are for an external etcd (--etcd-endpoints): the embedded etcd serves its clients in plain text",
			etcdtls.CAFileFlag, etcdtls.CertFileFlag, etcdtls.KeyFileFlag)
	}
	return c.EtcdTLS.CheckEndpoints(c.EtcdEndpoints)
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
	client  *clientv3.Client
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
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsCfg,
		DialTimeout: cfg.EtcdDialTimeout,
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler()), etcdMetricsDialOption()},
		Logger:      etcdLog.Logger,
		// Watches and leases detect a dead connection.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		// etcd's default request limit is 1.5 MiB; lists can be much larger.
		MaxCallSendMsgSize: 2 << 20,
		MaxCallRecvMsgSize: 1 << 30,
	})
	if err != nil {
		s.closeEmbedded()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	s.client = client
	if s.embed == nil {
		// The client connects lazily: a cluster that cannot be reached (or
		// refuses the certificates) fails here, saying why.
		cctx, cancel := context.WithTimeout(ctx, cfg.EtcdDialTimeout)
		err := etcdtls.CheckConnection(cctx, client.ActiveConnection(), tlsCfg, endpoints)
		cancel()
		if err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("etcd %s: no connection within %s: %w", strings.Join(endpoints, ","), cfg.EtcdDialTimeout, err)
		}
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

// Ready reports whether etcd answers a read.
func (s *Service) Ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.client.Get(ctx, keyRoot+"health", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	return nil
}

// Client is the etcd client the service uses (for leader election and the
// like in the same process).
func (s *Service) Client() *clientv3.Client { return s.client }

// Close closes the etcd client and stops the embedded etcd.
func (s *Service) Close() error {
	s.etcdLog.silence()
	var errs []error
	if s.client != nil {
		if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("close etcd client: %w", err))
		}
	}
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
