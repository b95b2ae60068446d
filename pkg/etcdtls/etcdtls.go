// Package etcdtls builds the TLS configuration of a client of an external
// etcd cluster from PEM files, as kube-apiserver's --etcd-cafile,
// --etcd-certfile and --etcd-keyfile do: the CA that signed the etcd
// servers' certificates (default: the system roots) and a client
// certificate for clusters that require one (--client-cert-auth).
//
// The client certificate and key are read again at every TLS handshake, so a
// rotated pair (a Kubernetes Secret updated in place, say) is used by the
// next connection without a restart; a pair that cannot be read then keeps
// the last good one.
package etcdtls

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// Config names the PEM files of the TLS connection to etcd. The zero Config
// is plain text (or, for https:// endpoints, TLS with the system roots and
// no client certificate).
type Config struct {
	// CAFile is the CA bundle that verifies the etcd servers' certificates
	// (empty: the system roots).
	CAFile string
	// CertFile and KeyFile are the client certificate (with its
	// intermediates, if any) and its private key; both or neither.
	CertFile string
	KeyFile  string
}

// Flag names, as kube-apiserver's.
const (
	CAFileFlag   = "etcd-cafile"
	CertFileFlag = "etcd-certfile"
	KeyFileFlag  = "etcd-keyfile"
)

// RegisterFlags adds --etcd-cafile, --etcd-certfile and --etcd-keyfile to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.CAFile, CAFileFlag, c.CAFile, "PEM CA bundle that verifies the etcd servers' certificates (default with https:// endpoints: the system roots)")
	fs.StringVar(&c.CertFile, CertFileFlag, c.CertFile, "PEM client certificate for etcd (needs --etcd-keyfile; reloaded at every new connection)")
	fs.StringVar(&c.KeyFile, KeyFileFlag, c.KeyFile, "PEM private key of --etcd-certfile")
}

// Enabled reports whether any file is set.
func (c Config) Enabled() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
}

// Validate checks that the certificate and key come together.
func (c Config) Validate() error {
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		return fmt.Errorf("etcd TLS: --%s %q is set without --%s", CertFileFlag, c.CertFile, KeyFileFlag)
	case c.KeyFile != "" && c.CertFile == "":
		return fmt.Errorf("etcd TLS: --%s %q is set without --%s", KeyFileFlag, c.KeyFile, CertFileFlag)
	}
	return nil
}

// CheckEndpoints refuses plain-text endpoints (http://, unix://) when TLS
// files are set: the etcd client would silently ignore the TLS settings for
// them.
func (c Config) CheckEndpoints(endpoints []string) error {
	if !c.Enabled() {
		return nil
	}
	var plain []string
	for _, ep := range endpoints {
		if scheme, _, ok := strings.Cut(ep, ":"); ok && (scheme == "http" || scheme == "unix") {
			plain = append(plain, ep)
		}
	}
	if len(plain) > 0 {
		return fmt.Errorf("etcd TLS: endpoints %s are plain text although TLS files are set: use https:// (or unixs://)", strings.Join(plain, ", "))
	}
	return nil
}

// Build returns the client TLS configuration, or nil when no file is set.
// Files that cannot be read or parsed are errors naming them.
func (c Config) Build() (*tls.Config, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pool, err := loadCAs(c.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		kp, err := newKeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = kp.get
	}
	return cfg, nil
}

func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("etcd TLS: CA file %s: no PEM certificate found", file)
	}
	return pool, nil
}

// keyPair is the client certificate, read again at every handshake.
type keyPair struct {
	certFile, keyFile string

	mu   sync.Mutex
	last *tls.Certificate // the last pair that loaded
}

func newKeyPair(certFile, keyFile string) (*keyPair, error) {
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	cert, err := kp.load()
	if err != nil {
		return nil, err
	}
	kp.last = cert
	return kp, nil
}

func (kp *keyPair) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(kp.certFile)
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: client certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(kp.keyFile)
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: client key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("etcd TLS: client certificate %s and key %s: %w", kp.certFile, kp.keyFile, err)
	}
	return &cert, nil
}

// get is tls.Config.GetClientCertificate: the pair on disk now, else the
// last good one.
func (kp *keyPair) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	cert, err := kp.load()
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if err != nil {
		slog.Warn("reloading the etcd client certificate failed; using the previous one", "err", err)
		return kp.last, nil
	}
	kp.last = cert
	return cert, nil
}
