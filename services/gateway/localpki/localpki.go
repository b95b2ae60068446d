// Package localpki generates a small local PKI for a crdplane gateway: a
// self-signed CA and a serving certificate it signs for the given hosts and
// IPs (ECDSA P-256), as PEM. "crdplane run" uses it to serve TLS and to
// write a kubeconfig that trusts the CA.
package localpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Validity of the generated certificates.
const (
	CAValidity      = 10 * 365 * 24 * time.Hour
	ServingValidity = 365 * 24 * time.Hour
)

// PKI is a generated CA and serving certificate, PEM encoded.
type PKI struct {
	// CACertPEM is the CA certificate (the kubeconfig's
	// certificate-authority-data).
	CACertPEM []byte
	// CAKeyPEM is the CA's private key (PKCS#8).
	CAKeyPEM []byte
	// ServingCertPEM is the serving certificate followed by the CA
	// certificate (a chain for tls.X509KeyPair).
	ServingCertPEM []byte
	// ServingKeyPEM is the serving private key (PKCS#8).
	ServingKeyPEM []byte
}

// Generate creates a CA and a serving certificate valid for hosts (DNS
// names) and ips. At least one host or IP is required.
func Generate(hosts []string, ips []net.IP) (*PKI, error) {
	if len(hosts) == 0 && len(ips) == 0 {
		return nil, errors.New("localpki: at least one host or IP is required")
	}
	now := time.Now().Add(-time.Minute) // tolerate small clock skew
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("localpki: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("crdplane-ca@%d", now.Unix())},
		NotBefore:             now,
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("localpki: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("localpki: CA certificate: %w", err)
	}

	caKeyPEM, err := keyPEM(caKey)
	if err != nil {
		return nil, err
	}
	p := &PKI{
		CACertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CAKeyPEM:  caKeyPEM,
	}
	if err := p.issueServing(caCert, caKey, hosts, ips, now); err != nil {
		return nil, err
	}
	return p, nil
}

// issueServing signs a new serving certificate and key for hosts and ips.
func (p *PKI) issueServing(caCert *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, ips []net.IP, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("localpki: serving key: %w", err)
	}
	cn := "crdplane"
	if len(hosts) > 0 {
		cn = hosts[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now,
		NotAfter:     now.Add(ServingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     hosts,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("localpki: serving certificate: %w", err)
	}
	servingKeyPEM, err := keyPEM(key)
	if err != nil {
		return err
	}
	p.ServingCertPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), p.CACertPEM...)
	p.ServingKeyPEM = servingKeyPEM
	return nil
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("localpki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}
