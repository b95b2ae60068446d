package localpki

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadOrGenerateKeepsThePKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	hosts, ips := []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	first, err := LoadOrGenerate(dir, hosts, ips, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{caKeyFile, servingKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}

	again, err := LoadOrGenerate(dir, hosts, ips, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CACertPEM, again.CACertPEM) || !bytes.Equal(first.ServingCertPEM, again.ServingCertPEM) {
		t.Error("a restart with the same hosts changed the certificates")
	}

	// A new host: the same CA signs a new serving certificate.
	wider, err := LoadOrGenerate(dir, append(hosts, "crdplane.example"), ips, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CACertPEM, wider.CACertPEM) {
		t.Error("a new host replaced the CA")
	}
	if bytes.Equal(first.ServingCertPEM, wider.ServingCertPEM) {
		t.Fatal("a new host kept the old serving certificate")
	}
	verify(t, wider, "crdplane.example")
	verify(t, wider, "localhost")

	rotated, err := LoadOrGenerate(dir, hosts, ips, true)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first.CACertPEM, rotated.CACertPEM) {
		t.Error("rotate kept the CA")
	}
}

func TestLoadOrGenerateRefusesABrokenCA(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrGenerate(dir, []string{"localhost"}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrGenerate(dir, []string{"other"}, nil, false); err == nil {
		t.Error("a broken kept CA key was accepted")
	}
}

func verify(t *testing.T, p *PKI, host string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CACertPEM)
	b, _ := pem.Decode(p.ServingCertPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
		t.Errorf("serving certificate for %s: %v", host, err)
	}
}
