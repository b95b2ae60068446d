// Package etcdtlstest generates, for tests, the certificates of an etcd
// cluster with client certificate authentication: a CA, a server
// certificate for 127.0.0.1, ::1 and localhost, and a client certificate,
// as PEM files in a temporary directory.
package etcdtlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/etcdtls"
)

// PKI is a CA and the certificates it issued, as files.
type PKI struct {
	// CAFile is the CA certificate.
	CAFile string
	// ServerCertFile and ServerKeyFile are the etcd server's (127.0.0.1,
	// ::1, localhost).
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are a client's (CN "crdplane").
	ClientCertFile, ClientKeyFile string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	dir   string
}

// New generates a CA, a server and a client certificate in a new temporary
// directory of tb. Every PKI has its own CA.
func New(tb testing.TB) *PKI {
	tb.Helper()
	p := &PKI{dir: tb.TempDir()}
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "etcdtlstest CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		tb.Fatal(err)
	}
	p.caKey = key
	p.CAFile = p.write(tb, "ca.crt", pemBlock("CERTIFICATE", der))

	certPEM, keyPEM := p.issue(tb, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	p.ServerCertFile = p.write(tb, "server.crt", certPEM)
	p.ServerKeyFile = p.write(tb, "server.key", keyPEM)

	certPEM, keyPEM = p.IssueClient(tb, "crdplane")
	p.ClientCertFile = p.write(tb, "client.crt", certPEM)
	p.ClientKeyFile = p.write(tb, "client.key", keyPEM)
	return p
}

// ClientConfig is the etcdtls configuration of the client certificate and
// the CA.
func (p *PKI) ClientConfig() etcdtls.Config {
	return etcdtls.Config{CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}
}

// IssueClient issues another client certificate, for CN cn, and returns it
// and its key as PEM.
func (p *PKI) IssueClient(tb testing.TB, cn string) (certPEM, keyPEM []byte) {
	tb.Helper()
	return p.issue(tb, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (p *PKI) issue(tb testing.TB, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	tb.Helper()
	key := newKey(tb)
	tmpl.SerialNumber = serial(tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER)
}

func (p *PKI) write(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
