package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func TestGenerateThenKeep(t *testing.T) {
	dir := t.TempDir()
	pki, kc := filepath.Join(dir, "pki"), filepath.Join(dir, "out", "kubeconfig")
	if err := os.Mkdir(filepath.Dir(kc), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dir", pki, "--kubeconfig", kc, "--server", "https://127.0.0.1:16443", "--hosts", "gateway,localhost"}
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	ca1, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := os.ReadFile(filepath.Join(pki, "tokens.csv"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Split(strings.TrimSpace(string(tokens)), ",")
	if len(fields) != 4 || len(fields[0]) < 32 || fields[1] != "crdplane-admin" || fields[3] != "system:masters" {
		t.Fatalf("tokens.csv: %q", tokens)
	}
	for name, mode := range map[string]os.FileMode{"tls.key": 0o600, "tokens.csv": 0o600, "tls.crt": 0o644} {
		st, err := os.Stat(filepath.Join(pki, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want mode %v", name, st.Mode(), err, mode)
		}
	}

	// The serving certificate covers the hosts and the --server host and
	// chains to the CA.
	pair, err := tls.LoadX509KeyPair(filepath.Join(pki, "tls.crt"), filepath.Join(pki, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca1)
	for _, h := range []string{"gateway", "localhost", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: h}); err != nil {
			t.Errorf("serving certificate for %s: %v", h, err)
		}
	}

	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if cl := cfg.Clusters[ctx.Cluster]; cl.Server != "https://127.0.0.1:16443" || !bytes.Equal(cl.CertificateAuthorityData, ca1) {
		t.Errorf("kubeconfig cluster: %+v", cl)
	}
	if tok := cfg.AuthInfos[ctx.AuthInfo].Token; tok != fields[0] {
		t.Errorf("kubeconfig token %q, want %q", tok, fields[0])
	}

	// A second run keeps the PKI and the token; a new server port only
	// rewrites the kubeconfig.
	args[5] = "https://127.0.0.1:26443"
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(filepath.Join(pki, "ca.crt"))
	tokens2, _ := os.ReadFile(filepath.Join(pki, "tokens.csv"))
	if !bytes.Equal(ca1, ca2) || !bytes.Equal(tokens, tokens2) {
		t.Error("a second run replaced the CA or the token")
	}
	if cfg, err := clientcmd.LoadFromFile(kc); err != nil || cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server != "https://127.0.0.1:26443" {
		t.Errorf("kubeconfig not rewritten: %v", err)
	}

	// A new host regenerates.
	args[7] = "gateway,localhost,crdplane.example.com"
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	if ca3, _ := os.ReadFile(filepath.Join(pki, "ca.crt")); bytes.Equal(ca1, ca3) {
		t.Error("a new host did not regenerate the serving certificate")
	}
}

func TestParseServer(t *testing.T) {
	for in, want := range map[string]string{
		"https://127.0.0.1:6443":    "127.0.0.1",
		"https://[::1]:6443/":       "::1",
		"https://crdplane.example":  "crdplane.example",
		"https://crdplane.example/": "crdplane.example",
	} {
		if got, err := parseServer(in); err != nil || got != want {
			t.Errorf("parseServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseServer("http://x"); err == nil {
		t.Error("http:// accepted")
	}
}
