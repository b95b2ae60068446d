package etcdtls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

// serveTLS serves the gRPC health service over TLS with pki's server
// certificate, requiring client certificates of pki's CA (as etcd with
// --client-cert-auth), and returns its https:// endpoint.
func serveTLS(t *testing.T, pki *etcdtlstest.PKI) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(pki.ServerCertFile, pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cas := x509.NewCertPool()
	cas.AppendCertsFromPEM(caPEM)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: cas, ClientAuth: tls.RequireAndVerifyClientCert,
	})))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "https://" + lis.Addr().String()
}

// closedEndpoint is an https:// endpoint nothing listens on.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return "https://" + addr
}

func TestCheckConnection(t *testing.T) {
	pki := etcdtlstest.New(t)
	other := etcdtlstest.New(t)
	endpoint := serveTLS(t, pki)
	tests := []struct {
		name     string
		tls      etcdtls.Config
		endpoint string
		wantErr  string // "": connected
	}{
		{name: "client certificate", tls: pki.ClientConfig()},
		{name: "no client certificate", tls: etcdtls.Config{CAFile: pki.CAFile}, wantErr: "remote error: tls: certificate required"},
		{name: "client certificate of another CA", tls: etcdtls.Config{CAFile: pki.CAFile, CertFile: other.ClientCertFile, KeyFile: other.ClientKeyFile},
			wantErr: "remote error: tls: unknown certificate authority"},
		{name: "another CA", tls: other.ClientConfig(), wantErr: "x509: certificate signed by unknown authority"},
		{name: "nothing listening", tls: pki.ClientConfig(), endpoint: closedEndpoint(t), wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ep := endpoint
			if tt.endpoint != "" {
				ep = tt.endpoint
			}
			cfg, err := tt.tls.Build()
			if err != nil {
				t.Fatal(err)
			}
			cc, err := grpc.NewClient(strings.TrimPrefix(ep, "https://"), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = etcdtls.CheckConnection(ctx, cc, cfg, []string{ep})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestProbe(t *testing.T) {
	pki := etcdtlstest.New(t)
	endpoint := serveTLS(t, pki)
	tests := []struct {
		name     string
		tls      etcdtls.Config
		endpoint string
		wantErr  string
	}{
		{name: "accepted", tls: pki.ClientConfig(), endpoint: endpoint},
		{name: "host:port", tls: pki.ClientConfig(), endpoint: strings.TrimPrefix(endpoint, "https://")},
		{name: "no client certificate", tls: etcdtls.Config{CAFile: pki.CAFile}, endpoint: endpoint, wantErr: "certificate required"},
		{name: "system roots", endpoint: endpoint, wantErr: "unknown authority"},
		{name: "no port", endpoint: "https://localhost", wantErr: "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.tls.Build()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = etcdtls.Probe(ctx, cfg, tt.endpoint)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}
