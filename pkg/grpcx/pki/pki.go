// Package pki generates the internal PKI of a multi-process crdplane: one
// CA and, for each service, a certificate that identifies it to the
// others (mutual TLS, see grpcx.TLS).
//
// A service's identity is the URI SAN spiffe://crdplane/<service> of its
// certificate (grpcx.IdentityPrefix); its DNS SANs are the names it is
// dialed at (the service name as in docker compose, crdplane-<service>
// and its in-cluster names as in Kubernetes, localhost and the loopback
// addresses), which its callers verify as any TLS client does.
//
// The layout under Dir is that of cert-manager's Secrets (type
// kubernetes.io/tls), one directory per service:
//
//	ca/ca.crt, ca/ca.key                     the CA (ca.key is only needed to issue)
//	<service>/ca.crt, tls.crt, tls.key       a service's certificate, key and the CA
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// IdentityScheme and IdentityTrustDomain make a service's identity URI:
// spiffe://crdplane/<service>.
const (
	IdentityScheme      = "spiffe"
	IdentityTrustDomain = "crdplane"
)

// IdentityURI is the URI SAN that names service in its certificate.
func IdentityURI(service string) *url.URL {
	return &url.URL{Scheme: IdentityScheme, Host: IdentityTrustDomain, Path: "/" + service}
}

// Services are crdplane's services, the default of Config.Services.
var Services = []string{"storage", "registry", "validator", "converter", "gateway"}

// Config says what Generate writes.
type Config struct {
	// Dir receives ca/ and one directory per service.
	Dir string
	// Services to issue certificates for (default: Services).
	Services []string
	// Namespace is the Kubernetes namespace of the in-cluster DNS names
	// (crdplane-<service>.<namespace>.svc; default "crdplane").
	Namespace string
	// Hosts are extra DNS names or IPs put in every certificate.
	Hosts []string
	// Validity of the service certificates (default one year; the CA's is
	// ten years).
	Validity time.Duration
	// Now is the issue time (default time.Now).
	Now func() time.Time
	// Chown, when set, gives every file written to UID:GID (an init
	// container running as root preparing files for the services' user).
	Chown    bool
	UID, GID int
}

// renewBefore: a kept certificate this close to its expiry is reissued.
const renewBefore = 30 * 24 * time.Hour

// Generate writes the CA (kept when Dir already has one) and a
// certificate for each service (kept when it exists, was issued by that CA,
// names every host it should and is not about to expire; reissued
// otherwise). It is safe to run at every start.
func Generate(cfg Config) error {
	if cfg.Dir == "" {
		return errors.New("pki: no directory")
	}
	if len(cfg.Services) == 0 {
		cfg.Services = Services
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "crdplane"
	}
	if cfg.Validity == 0 {
		cfg.Validity = 365 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ca, caKey, caPEM, err := loadOrCreateCA(cfg, filepath.Join(cfg.Dir, "ca"), cfg.Now())
	if err != nil {
		return err
	}
	for _, svc := range cfg.Services {
		if err := issue(cfg, svc, ca, caKey, caPEM); err != nil {
			return fmt.Errorf("pki: %s: %w", svc, err)
		}
	}
	return nil
}

// Hosts are the DNS names and IPs of service's certificate.
func Hosts(service, namespace string, extra []string) []string {
	h := []string{
		service,
		"crdplane-" + service,
		"crdplane-" + service + "." + namespace,
		"crdplane-" + service + "." + namespace + ".svc",
		"crdplane-" + service + "." + namespace + ".svc.cluster.local",
		"localhost", "127.0.0.1", "::1",
	}
	for _, e := range extra {
		if !slices.Contains(h, e) {
			h = append(h, e)
		}
	}
	return h
}

func loadOrCreateCA(cfg Config, dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if pair, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if ok && now.Before(pair.Leaf.NotAfter.Add(-renewBefore)) {
			certPEM, err := os.ReadFile(certFile)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("pki: %w", err)
			}
			return pair.Leaf, key, certPEM, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("pki: the kept CA in %s: %w", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "crdplane internal CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFiles(cfg, dir, map[string][]byte{"ca.crt": certPEM, "ca.key": keyPEM(key)}); err != nil {
		return nil, nil, nil, err
	}
	return cert, key, certPEM, nil
}

func issue(cfg Config, svc string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, caPEM []byte) error {
	dir := filepath.Join(cfg.Dir, svc)
	hosts := Hosts(svc, cfg.Namespace, cfg.Hosts)
	now := cfg.Now()
	if keep(dir, ca, hosts, now) {
		// The CA file beside it may be older than a reissued CA's: rewrite.
		return writeFiles(cfg, dir, map[string][]byte{"ca.crt": caPEM})
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: svc, Organization: []string{"crdplane"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(cfg.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Every service is a server to its callers and a client of the
		// services it calls.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{IdentityURI(svc)},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return writeFiles(cfg, dir, map[string][]byte{
		"ca.crt":  caPEM,
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": keyPEM(key),
	})
}

// keep reports whether dir holds a certificate of ca for every host that
// does not expire soon.
func keep(dir string, ca *x509.Certificate, hosts []string, now time.Time) bool {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		return false
	}
	leaf := pair.Leaf
	if leaf.CheckSignatureFrom(ca) != nil || now.After(leaf.NotAfter.Add(-renewBefore)) {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // an ECDSA P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// writeFiles writes files into dir (created 0700), each 0600 through a
// temporary file and a rename, so a reader never sees half a key.
func writeFiles(cfg Config, dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if cfg.Chown {
		if err := os.Chown(dir, cfg.UID, cfg.GID); err != nil {
			return fmt.Errorf("pki: %w", err)
		}
	}
	for name, b := range files {
		tmp, err := os.CreateTemp(dir, "."+name+"-*")
		if err != nil {
			return fmt.Errorf("pki: %w", err)
		}
		_, werr := tmp.Write(b)
		cerr := tmp.Close()
		var oerr error
		if cfg.Chown {
			oerr = os.Chown(tmp.Name(), cfg.UID, cfg.GID)
		}
		if err := errors.Join(werr, cerr, oerr); err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("pki: %w", err)
		}
		if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("pki: %w", err)
		}
	}
	return nil
}
