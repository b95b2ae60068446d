package storage

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/storage/etcdtest"
)

// TestExternalEtcdTLS runs the service on an etcd that requires TLS client
// certificates: with the CA and a client certificate it serves; without the
// certificate, or trusting another CA, New fails within the dial timeout,
// saying why.
func TestExternalEtcdTLS(t *testing.T) {
	pki := etcdtlstest.New(t)
	endpoint := etcdtest.StartTLS(t, pki)
	other := etcdtlstest.New(t)
	tlsConfig := func(tls etcdtls.Config) Config {
		return Config{EtcdEndpoints: []string{endpoint}, EtcdTLS: tls, EtcdLogLevel: "error", EtcdDialTimeout: 500 * time.Millisecond}
	}

	t.Run("client certificate", func(t *testing.T) {
		e := startEnv(t, tlsConfig(pki.ClientConfig()))
		t.Cleanup(e.stop)
		ctx := ctxT(t)
		key := "/registry/" + testGroup() + "/crontabs/ns/x"
		cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object("x", "ns", nil, nil)})
		if err != nil {
			t.Fatal(err)
		}
		gr, err := e.client.Get(ctx, &storagev1.GetRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if gr.ResourceVersion != cr.ResourceVersion || meta(t, gr.Object).Name != "x" {
			t.Fatalf("get: %d %s, created %d", gr.ResourceVersion, gr.Object, cr.ResourceVersion)
		}
		if err := e.svc.Ready(); err != nil {
			t.Fatal(err)
		}
	})

	for _, tt := range []struct {
		name    string
		tls     etcdtls.Config
		wantErr string
	}{
		{"no client certificate", etcdtls.Config{CAFile: pki.CAFile}, "certificate required"},
		{"another CA", etcdtls.Config{CAFile: other.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile}, "certificate signed by unknown authority"},
		{"system roots", etcdtls.Config{CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile}, "certificate signed by unknown authority"},
		{"client certificate of another CA", etcdtls.Config{CAFile: pki.CAFile, CertFile: other.ClientCertFile, KeyFile: other.ClientKeyFile}, "remote error: tls: unknown certificate authority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tlsConfig(tt.tls)
			start := time.Now()
			svc, err := New(context.Background(), cfg)
			if err == nil {
				svc.Close()
				t.Fatal("New succeeded")
			}
			if took := time.Since(start); took > cfg.EtcdDialTimeout+2*time.Second {
				t.Errorf("New failed after %s, dial timeout %s", took, cfg.EtcdDialTimeout)
			}
			t.Log(err)
			for _, want := range []string{endpoint, "no connection within 500ms", tt.wantErr} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestEtcdTLSConfigErrors: misconfigured TLS fails New before any
// connection is attempted.
func TestEtcdTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.crt")
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{"embedded etcd", Config{DataDir: dir, EtcdTLS: etcdtls.Config{CAFile: missing}},
			[]string{"--etcd-cafile", "external etcd (--etcd-endpoints)"}},
		{"plain-text endpoint", Config{EtcdEndpoints: []string{"http://127.0.0.1:2379"}, EtcdTLS: etcdtls.Config{CAFile: missing}},
			[]string{"http://127.0.0.1:2379", "plain text", "https://"}},
		{"cert without key", Config{EtcdEndpoints: []string{"https://127.0.0.1:2379"}, EtcdTLS: etcdtls.Config{CertFile: missing}},
			[]string{"--etcd-certfile", "without --etcd-keyfile"}},
		{"missing CA file", Config{EtcdEndpoints: []string{"https://127.0.0.1:2379"}, EtcdTLS: etcdtls.Config{CAFile: missing}},
			[]string{"CA file", missing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.EtcdLogLevel = "error"
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
