package storage

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
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
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil { //nolint:gosec // G302: a directory, private (0700)
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	clientURL, err := embeddedClientURL(cfg)
	if err != nil {
		return nil, err
	}
	var peerTLS *transport.TLSInfo
	peerURL := &url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	if cfg.EmbeddedPeerURL != "" {
		if peerURL, err = url.Parse(cfg.EmbeddedPeerURL); err != nil {
			return nil, fmt.Errorf("embedded etcd peer URL: %w", err)
		}
	}
	if peerURL.Scheme == "https" {
		// A single member has no peers: its peer listener only needs to
		// refuse everyone, which client-certificate authentication with a
		// certificate nobody else has does.
		if peerTLS, err = peerTLSInfo(filepath.Join(cfg.DataDir, "peer-tls")); err != nil {
			return nil, fmt.Errorf("embedded etcd peer TLS: %w", err)
		}
	}

	ec := embed.NewConfig()
	ec.Name = "crdplane"
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	if peerTLS != nil {
		ec.PeerTLSInfo = *peerTLS
	}
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
	if clientURL.Scheme == "unix" {
		endpoint = "unix://" + e.Clients[0].Addr().String()
	}
	log.Info("embedded etcd ready", "dataDir", cfg.DataDir, "endpoint", endpoint)
	return &embeddedEtcd{etcd: e, endpoint: endpoint}, nil
}

// embeddedClientURL is where the embedded etcd serves clients: by default
// a unix socket in the (private) data directory, so only this user's
// processes can reach it; an explicit URL (http://127.0.0.1:0) opts into a
// TCP port.
func embeddedClientURL(cfg Config) (*url.URL, error) {
	if cfg.EmbeddedClientURL == "" || cfg.EmbeddedClientURL == "unix" {
		sock, err := filepath.Abs(filepath.Join(cfg.DataDir, "etcd.sock"))
		if err != nil {
			return nil, err
		}
		// sun_path holds 108 bytes on Linux.
		if len(sock) > 100 {
			return nil, fmt.Errorf("embedded etcd: the socket path %s is too long for a unix socket; use a shorter --data-dir or --etcd-listen-client-url=http://127.0.0.1:0", sock)
		}
		// etcd listens on the URL's host as a path; the URL is never
		// printed or parsed back.
		return &url.URL{Scheme: "unix", Host: sock}, nil
	}
	u, err := url.Parse(cfg.EmbeddedClientURL)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd client URL: %w", err)
	}
	return u, nil
}

// peerTLSInfo writes (once) a self-signed certificate for the peer listener
// and requires it of every peer.
func peerTLSInfo(dir string) (*transport.TLSInfo, error) {
	certFile, keyFile := filepath.Join(dir, "peer.crt"), filepath.Join(dir, "peer.key")
	if _, err := os.Stat(keyFile); err != nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
		if err != nil {
			return nil, err
		}
		now := time.Now().Add(-time.Minute)
		tmpl := &x509.Certificate{
			SerialNumber:          serial,
			Subject:               pkix.Name{CommonName: "crdplane-embedded-etcd-peer"},
			NotBefore:             now,
			NotAfter:              now.Add(100 * 365 * 24 * time.Hour),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
			IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			DNSNames:              []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
	}
	return &transport.TLSInfo{CertFile: certFile, KeyFile: keyFile, TrustedCAFile: certFile, ClientCertAuth: true}, nil
}

// close stops etcd and waits for it to release the data directory.
func (e *embeddedEtcd) close() {
	e.etcd.Close()
	<-e.etcd.Server.StopNotify()
}
