package localpki

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files of a PKI kept in a directory.
const (
	caCertFile      = "ca.crt"
	caKeyFile       = "ca.key"
	servingCertFile = "serving.crt"
	servingKeyFile  = "serving.key"
)

// RenewBefore is how long before its expiry a kept serving certificate is
// reissued (by the same CA, so clients that trust the CA keep working).
const RenewBefore = 30 * 24 * time.Hour

// LoadOrGenerate returns the PKI kept in dir, or generates one and keeps it
// there, so that a restarted server presents certificates its clients
// already trust. A kept serving certificate that does not cover hosts and
// ips, or expires within RenewBefore, is reissued by the kept CA. rotate
// replaces everything (a new CA: clients need the new one).
func LoadOrGenerate(dir string, hosts []string, ips []net.IP, rotate bool) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localpki: %w", err)
	}
	if !rotate {
		p, err := load(dir)
		switch {
		case err == nil:
			caCert, caKey, err := p.ca()
			if err != nil {
				return nil, err
			}
			if p.covers(hosts, ips, time.Now()) {
				return p, nil
			}
			if err := p.issueServing(caCert, caKey, hosts, ips, time.Now().Add(-time.Minute)); err != nil {
				return nil, err
			}
			return p, p.save(dir)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	p, err := Generate(hosts, ips)
	if err != nil {
		return nil, err
	}
	return p, p.save(dir)
}

func load(dir string) (*PKI, error) {
	var p PKI
	for name, dst := range map[string]*[]byte{caCertFile: &p.CACertPEM, caKeyFile: &p.CAKeyPEM, servingCertFile: &p.ServingCertPEM, servingKeyFile: &p.ServingKeyPEM} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("localpki: %w", err)
		}
		*dst = b
	}
	return &p, nil
}

func (p *PKI) save(dir string) error {
	for name, b := range map[string][]byte{caCertFile: p.CACertPEM, caKeyFile: p.CAKeyPEM, servingCertFile: p.ServingCertPEM, servingKeyFile: p.ServingKeyPEM} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return fmt.Errorf("localpki: %w", err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("localpki: %w", err)
		}
	}
	return nil
}

// ca parses the kept CA certificate and key.
func (p *PKI) ca() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(p.CACertPEM)
	kb, _ := pem.Decode(p.CAKeyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("localpki: the kept CA is not PEM (remove it, or rotate)")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("localpki: kept CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("localpki: kept CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("localpki: kept CA key is not ECDSA")
	}
	return cert, key, nil
}

// covers reports whether the kept serving certificate names every host and
// IP and stays valid for longer than RenewBefore.
func (p *PKI) covers(hosts []string, ips []net.IP, now time.Time) bool {
	b, _ := pem.Decode(p.ServingCertPEM)
	if b == nil {
		return false
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil || now.Add(RenewBefore).After(cert.NotAfter) {
		return false
	}
	for _, h := range hosts {
		if !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}
