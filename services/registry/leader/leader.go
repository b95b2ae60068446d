// Package leader elects the registry replica that runs the CRD controllers,
// through an etcd lease (go.etcd.io/etcd/client/v3/concurrency).
//
// Every replica campaigns on the same key prefix with a session whose lease
// it keeps alive; the replica whose key is oldest leads. A leader that stops
// gracefully resigns (revokes its lease) so that another replica takes over
// at once; one that dies keeps leadership until its lease expires
// (Config.LeaseTTL).
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// DefaultKey is the election's key prefix: outside /registry/, where the
// storage keeps objects.
const DefaultKey = "/crdplane/leader/registry"

// DefaultLeaseTTL is how long a dead leader keeps leadership.
const DefaultLeaseTTL = 15 * time.Second

// Config configures an Elector.
type Config struct {
	// Client is the etcd client (required). The Elector does not close it.
	Client *clientv3.Client
	// Key is the election's key prefix (default DefaultKey).
	Key string
	// LeaseTTL is the session lease's time to live, rounded up to whole
	// seconds (default DefaultLeaseTTL; etcd grants at least its minimum
	// TTL, about 2s with default timings).
	LeaseTTL time.Duration
	// Identity is this replica's value under the election key (default
	// <hostname>-<pid>-<random>).
	Identity string
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// RetryInterval is the pause after a failed campaign (default 1s).
	RetryInterval time.Duration
}

// Elector implements the registry's Elector on etcd.
type Elector struct {
	cfg     Config
	leading atomic.Bool
}

// New returns an Elector for cfg.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, errors.New("leader: etcd client is required")
	}
	if cfg.Key == "" {
		cfg.Key = DefaultKey
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Identity == "" {
		cfg.Identity = defaultIdentity()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	return &Elector{cfg: cfg}, nil
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "registry"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Identity is the value this replica campaigns with.
func (e *Elector) Identity() string { return e.cfg.Identity }

// IsLeader reports whether lead is running.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Run campaigns until ctx ends, calling lead for as long as this replica
// leads; lead's context ends when leadership is lost.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) {
	log := e.cfg.Logger.With("identity", e.cfg.Identity, "key", e.cfg.Key)
	for ctx.Err() == nil {
		err := e.term(ctx, lead, log)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("leader election failed; retrying", "err", err, "retry", e.cfg.RetryInterval)
			select {
			case <-ctx.Done():
				return
			case <-time.After(e.cfg.RetryInterval):
			}
		}
	}
}

// term is one session: campaign, lead until the session or ctx ends, then
// give the lease back.
func (e *Elector) term(ctx context.Context, lead func(ctx context.Context), log *slog.Logger) error {
	// The session outlives ctx just long enough to revoke its lease on the
	// way out (a revoke under a cancelled context would leave followers
	// waiting for the lease to expire).
	sessCtx, sessCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer sessCancel()
	ttl := int((e.cfg.LeaseTTL + time.Second - 1) / time.Second)
	session, err := concurrency.NewSession(e.cfg.Client, concurrency.WithTTL(ttl), concurrency.WithContext(sessCtx))
	if err != nil {
		return fmt.Errorf("leader: session: %w", err)
	}
	defer func() {
		if err := session.Close(); err != nil && ctx.Err() == nil {
			log.Debug("revoking the leader election lease", "err", err)
		}
	}()

	// Campaign and lead only while the session lives.
	termCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-session.Done():
			cancel()
		case <-termCtx.Done():
		}
	}()

	election := concurrency.NewElection(session, e.cfg.Key)
	if err := election.Campaign(termCtx, e.cfg.Identity); err != nil {
		if termCtx.Err() != nil && ctx.Err() == nil {
			return errors.New("leader: session lost while campaigning")
		}
		return fmt.Errorf("leader: campaign: %w", err)
	}
	if termCtx.Err() != nil {
		return nil
	}
	log.Info("leading")
	e.leading.Store(true)
	lead(termCtx)
	e.leading.Store(false)
	lost := termCtx.Err() != nil && ctx.Err() == nil
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := election.Resign(rctx); err != nil {
		log.Debug("resigning leadership", "err", err)
	}
	if lost {
		log.Warn("lost leadership")
	} else {
		log.Info("stopped leading")
	}
	return nil
}
