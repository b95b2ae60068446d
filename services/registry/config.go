package registry

import (
	"context"
	"flag"
	"log/slog"
	"time"
)

// Config configures the registry service.
type Config struct {
	// StorageAddr is the StorageService address: host:port, dns:///host:port
	// or inproc://storage in the all-in-one process.
	StorageAddr string
	// Workers is the number of workers per controller (default 1).
	Workers int
	// Elector decides when this replica runs the controllers. nil: always
	// (a single replica, or until leader election is configured).
	Elector Elector
	// CleanupTimeout bounds how long the finalizer waits for a CRD's objects
	// to disappear before it reports InstanceDeletionCheck and retries
	// (default 1m, as upstream).
	CleanupTimeout time.Duration
	// Logger is the service's logger (nil: slog.Default()).
	Logger *slog.Logger
}

// RegisterFlags adds the configuration flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.StorageAddr, "storage-addr", "localhost:7001", "StorageService address (host:port, dns:///host:port or inproc://name)")
	fs.IntVar(&c.Workers, "controller-workers", 1, "workers per CRD controller")
	fs.DurationVar(&c.CleanupTimeout, "cleanup-timeout", time.Minute, "how long the CRD finalizer waits for a CRD's objects to be gone before retrying")
}

func (c *Config) setDefaults() {
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.CleanupTimeout <= 0 {
		c.CleanupTimeout = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Elector == nil {
		c.Elector = AlwaysLeader{}
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
