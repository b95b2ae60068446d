package etcdtls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

func TestBuild(t *testing.T) {
	pki := etcdtlstest.New(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name    string
		cfg     etcdtls.Config
		wantNil bool     // no TLS configuration
		roots   bool     // RootCAs set
		cert    bool     // a client certificate
		wantErr []string // substrings of the error
	}{
		{name: "none", wantNil: true},
		{name: "CA only", cfg: etcdtls.Config{CAFile: pki.CAFile}, roots: true},
		{name: "client certificate, system roots", cfg: etcdtls.Config{CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile}, cert: true},
		{name: "all", cfg: pki.ClientConfig(), roots: true, cert: true},
		{name: "cert without key", cfg: etcdtls.Config{CAFile: pki.CAFile, CertFile: pki.ClientCertFile},
			wantErr: []string{"--etcd-certfile", pki.ClientCertFile, "without --etcd-keyfile"}},
		{name: "key without cert", cfg: etcdtls.Config{KeyFile: pki.ClientKeyFile},
			wantErr: []string{"--etcd-keyfile", pki.ClientKeyFile, "without --etcd-certfile"}},
		{name: "missing CA file", cfg: etcdtls.Config{CAFile: missing}, wantErr: []string{"CA file", missing, "no such file"}},
		{name: "CA file without PEM", cfg: etcdtls.Config{CAFile: notPEM}, wantErr: []string{"CA file", notPEM, "no PEM certificate"}},
		{name: "missing cert file", cfg: etcdtls.Config{CertFile: missing, KeyFile: pki.ClientKeyFile}, wantErr: []string{"client certificate", missing}},
		{name: "missing key file", cfg: etcdtls.Config{CertFile: pki.ClientCertFile, KeyFile: missing}, wantErr: []string{"client key", missing}},
		{name: "invalid cert", cfg: etcdtls.Config{CertFile: notPEM, KeyFile: pki.ClientKeyFile}, wantErr: []string{notPEM, pki.ClientKeyFile}},
		{name: "key of another certificate", cfg: etcdtls.Config{CertFile: pki.ClientCertFile, KeyFile: pki.ServerKeyFile},
			wantErr: []string{pki.ClientCertFile, pki.ServerKeyFile, "does not match"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.cfg.Build()
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.cfg.Enabled() == tt.wantNil {
				t.Errorf("Enabled() = %v", tt.cfg.Enabled())
			}
			if (cfg == nil) != tt.wantNil {
				t.Fatalf("config %v, want nil: %v", cfg, tt.wantNil)
			}
			if cfg == nil {
				return
			}
			if (cfg.RootCAs != nil) != tt.roots {
				t.Errorf("RootCAs set: %v, want %v", cfg.RootCAs != nil, tt.roots)
			}
			if (cfg.GetClientCertificate != nil) != tt.cert {
				t.Errorf("client certificate set: %v, want %v", cfg.GetClientCertificate != nil, tt.cert)
			}
			if cfg.MinVersion < tls.VersionTLS12 {
				t.Errorf("MinVersion %x", cfg.MinVersion)
			}
		})
	}
}

func TestCheckEndpoints(t *testing.T) {
	withTLS := etcdtls.Config{CAFile: "ca.crt"}
	tests := []struct {
		name      string
		cfg       etcdtls.Config
		endpoints []string
		wantErr   string
	}{
		{name: "plain text without TLS", endpoints: []string{"http://a:2379", "unix:///run/etcd.sock"}},
		{name: "https with TLS", cfg: withTLS, endpoints: []string{"https://a:2379", "https://b:2379"}},
		{name: "host:port with TLS", cfg: withTLS, endpoints: []string{"a:2379", "unixs:///run/etcd.sock"}},
		{name: "http with TLS", cfg: withTLS, endpoints: []string{"https://a:2379", "http://b:2379"}, wantErr: "http://b:2379 are plain text"},
		{name: "unix with TLS", cfg: withTLS, endpoints: []string{"unix:///run/etcd.sock"}, wantErr: "unix:///run/etcd.sock are plain text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.CheckEndpoints(tt.endpoints)
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestRegisterFlags(t *testing.T) {
	var c etcdtls.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--etcd-cafile", "/pki/ca.crt", "--etcd-certfile=/pki/tls.crt", "--etcd-keyfile", "/pki/tls.key"}); err != nil {
		t.Fatal(err)
	}
	if want := (etcdtls.Config{CAFile: "/pki/ca.crt", CertFile: "/pki/tls.crt", KeyFile: "/pki/tls.key"}); c != want {
		t.Fatalf("%+v, want %+v", c, want)
	}
}

// TestHandshake: a server that requires a client certificate of the CA
// accepts the built configuration, and a rotated certificate is presented
// by the next handshake; one that fails to load leaves the previous one.
func TestHandshake(t *testing.T) {
	pki := etcdtlstest.New(t)
	cfg, err := pki.ClientConfig().Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := handshake(t, pki, cfg); got != "crdplane" {
		t.Fatalf("client certificate %q, want crdplane", got)
	}

	certPEM, keyPEM := pki.IssueClient(t, "rotated")
	writeFile(t, pki.ClientKeyFile, keyPEM)
	writeFile(t, pki.ClientCertFile, certPEM)
	if got := handshake(t, pki, cfg); got != "rotated" {
		t.Fatalf("after rotation: client certificate %q, want rotated", got)
	}

	writeFile(t, pki.ClientCertFile, []byte("garbage"))
	if got := handshake(t, pki, cfg); got != "rotated" {
		t.Fatalf("with an unreadable pair: client certificate %q, want the last good one", got)
	}
}

// handshake runs a TLS handshake of a client with cfg against a server with
// pki's server certificate that requires a client certificate, and returns
// the client certificate's common name.
func handshake(t *testing.T, pki *etcdtlstest.PKI, cfg *tls.Config) string {
	t.Helper()
	serverCert, err := tls.LoadX509KeyPair(pki.ServerCertFile, pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(caPEM)
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	server := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert})
	client := tls.Client(cc, withServerName(cfg, "localhost"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- server.HandshakeContext(ctx) }()
	if err := client.HandshakeContext(ctx); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	peers := server.ConnectionState().PeerCertificates
	if len(peers) == 0 {
		t.Fatal("no client certificate")
	}
	return peers[0].Subject.CommonName
}

func withServerName(cfg *tls.Config, name string) *tls.Config {
	c := cfg.Clone()
	c.ServerName = name
	return c
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
