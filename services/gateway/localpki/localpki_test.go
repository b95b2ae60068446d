package localpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
)

func TestGenerate(t *testing.T) {
	p, err := Generate([]string{"localhost", "crdplane.local"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(p.ServingCertPEM, p.ServingKeyPEM)
	if err != nil {
		t.Fatalf("serving pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("serving key is not ECDSA P-256: %T", leaf.PublicKey)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.CACertPEM) {
		t.Fatal("CA PEM")
	}
	for _, host := range []string{"localhost", "crdplane.local", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("verify %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Error("verified for a host it was not issued for")
	}
	if b, _ := pem.Decode(p.CAKeyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Error("CA key PEM")
	}
	if _, err := Generate(nil, nil); err == nil {
		t.Error("no hosts should fail")
	}
}
