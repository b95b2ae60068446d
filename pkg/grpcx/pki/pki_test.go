package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/grpcx/pki"
)

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	cfg := pki.Config{Dir: dir, Services: []string{"storage", "gateway"}, Hosts: []string{"storage.example"}}
	if err := pki.Generate(cfg); err != nil {
		t.Fatal(err)
	}
	crt := filepath.Join(dir, "storage", "tls.crt")
	pair, err := tls.LoadX509KeyPair(crt, filepath.Join(dir, "storage", "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "storage", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	for _, host := range []string{"storage", "crdplane-storage", "crdplane-storage.crdplane.svc.cluster.local", "localhost", "127.0.0.1", "storage.example"} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	if len(pair.Leaf.URIs) != 1 || pair.Leaf.URIs[0].String() != "spiffe://crdplane/storage" {
		t.Errorf("URIs %v", pair.Leaf.URIs)
	}
	if fi, err := os.Stat(filepath.Join(dir, "storage", "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", fi.Mode(), err)
	}

	// A second run keeps what is valid.
	before, _ := os.ReadFile(crt)
	if err := pki.Generate(cfg); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(crt)
	if string(before) != string(after) {
		t.Errorf("a second run reissued a valid certificate")
	}
	// A new host reissues it, under the same CA.
	cfg.Hosts = append(cfg.Hosts, "other.example")
	if err := pki.Generate(cfg); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(crt); string(again) == string(after) {
		t.Errorf("a missing host did not reissue the certificate")
	}
	// Close to its expiry it is reissued too.
	cfg.Now = func() time.Time { return time.Now().Add(360 * 24 * time.Hour) }
	kept, _ := os.ReadFile(crt)
	if err := pki.Generate(cfg); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(crt); string(again) == string(kept) {
		t.Errorf("a certificate about to expire was kept")
	}
}
