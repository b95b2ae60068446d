package registry

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
	"github.com/crdplane/crdplane/services/registry/leader"
	"github.com/crdplane/crdplane/services/storage/etcdtest"
)

// TestLeaderElectionOverTLS: a registry given an etcd that requires client
// certificates, with the CA and a client certificate, becomes the leader.
func TestLeaderElectionOverTLS(t *testing.T) {
	pki := etcdtlstest.New(t)
	endpoint := etcdtest.StartTLS(t, pki)
	ctx := testCtx(t)
	// Leadership, not the controllers' work, is under test: the registry's
	// storage is one that does not exist, so they wait for it while leading.
	svc, err := New(ctx, Config{
		StorageAddr:         "inproc://registry-tls-test-no-storage",
		EtcdEndpoints:       []string{endpoint},
		EtcdTLS:             pki.ClientConfig(),
		LeaderLeaseDuration: 2 * time.Second,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	tlsCfg, err := pki.ClientConfig().Build()
	if err != nil {
		t.Fatal(err)
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The leader is the candidate with the oldest key under the election's
	// prefix, each key holding its candidate's identity.
	var leaderID string
	eventually(t, 5*time.Second, "a leader", func() bool {
		resp, err := client.Get(ctx, leader.DefaultKey+"/", clientv3.WithFirstCreate()...)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			leaderID = string(resp.Kvs[0].Value)
		}
		return leaderID != ""
	})
	elector, ok := svc.cfg.Elector.(*leader.Elector)
	if !ok {
		t.Fatalf("elector %T, want the etcd election", svc.cfg.Elector)
	}
	if leaderID != elector.Identity() {
		t.Fatalf("leader %q, want the registry (%q)", leaderID, elector.Identity())
	}
	eventually(t, 5*time.Second, "the registry leading", elector.IsLeader)
}

// TestEtcdTLSConfigErrors: misconfigured leader election TLS fails New
// before any connection is attempted.
func TestEtcdTLSConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{"TLS without endpoints", Config{EtcdTLS: etcdtls.Config{CAFile: "ca.crt"}},
			[]string{"--etcd-cafile", "(--etcd-endpoints)"}},
		{"plain-text endpoint", Config{EtcdEndpoints: []string{"http://127.0.0.1:2379"}, EtcdTLS: etcdtls.Config{CAFile: "ca.crt"}},
			[]string{"http://127.0.0.1:2379", "plain text"}},
		{"key without cert", Config{EtcdEndpoints: []string{"https://127.0.0.1:2379"}, EtcdTLS: etcdtls.Config{KeyFile: "tls.key"}},
			[]string{"--etcd-keyfile", "without --etcd-certfile"}},
		{"missing CA file", Config{EtcdEndpoints: []string{"https://127.0.0.1:2379"}, EtcdTLS: etcdtls.Config{CAFile: "/nonexistent/ca.crt"}},
			[]string{"CA file", "/nonexistent/ca.crt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.StorageAddr = "inproc://registry-tls-test-no-storage"
			svc, err := New(context.Background(), tt.cfg)
			if err == nil {
				svc.Close()
				t.Fatal("New succeeded")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestEtcdTLSFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--etcd-endpoints=https://a:2379", "--etcd-cafile=/tls/ca.crt", "--etcd-certfile=/tls/tls.crt", "--etcd-keyfile=/tls/tls.key"}); err != nil {
		t.Fatal(err)
	}
	if want := (etcdtls.Config{CAFile: "/tls/ca.crt", CertFile: "/tls/tls.crt", KeyFile: "/tls/tls.key"}); c.EtcdTLS != want {
		t.Fatalf("EtcdTLS %+v, want %+v", c.EtcdTLS, want)
	}
}
