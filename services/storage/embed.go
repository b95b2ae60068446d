package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// embeddedEtcd is a single-member etcd running inside the process.
type embeddedEtcd struct {
	etcd     *embed.Etcd
	endpoint string
}

// startEmbedded starts etcd in cfg.DataDir and waits until it serves
// clients. Client and peer listeners default to free loopback ports, so any
// number of instances can run in one process.
func startEmbedded(ctx context.Context, cfg Config, zl *zap.Logger, log *slog.Logger) (*embeddedEtcd, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("embedded etcd: a data directory is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	// etcd wants its data directory private; a pre-existing one (a test's
	// temporary directory, say) may have been created 0755.
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	clientURL, err := url.Parse(cfg.EmbeddedClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd client URL: %w", err)
	}
	peerURL, err := url.Parse(cfg.EmbeddedPeerURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd peer URL: %w", err)
	}

	ec := embed.NewConfig()
	ec.Name = "crdplane"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	// The HTTP/JSON gateway is not needed (and dials the configured address,
	// which is not a real one when the port is 0).
	ec.EnableGRPCGateway = false
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if cfg.AutoCompactionRetention != "0" {
		ec.AutoCompactionMode = embed.CompactorModePeriodic
		ec.AutoCompactionRetention = cfg.AutoCompactionRetention
	}

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	timeout := time.NewTimer(cfg.EtcdStartTimeout)
	defer timeout.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-timeout.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd: not ready after %s", cfg.EtcdStartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", ctx.Err())
	}
	if len(e.Clients) == 0 {
		e.Close()
		return nil, errors.New("embedded etcd: no client listener")
	}
	endpoint := "http://" + e.Clients[0].Addr().String()
	log.Info("embedded etcd ready", "dataDir", cfg.DataDir, "endpoint", endpoint)
	return &embeddedEtcd{etcd: e, endpoint: endpoint}, nil
}

// close stops etcd and waits for it to release the data directory.
func (e *embeddedEtcd) close() {
	e.etcd.Close()
	<-e.etcd.Server.StopNotify()
}
