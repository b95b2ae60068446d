// Package etcdtest starts, for tests, an etcd in the test process that
// serves its clients over TLS and requires client certificates, as
// production clusters do.
package etcdtest

import (
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

// StartTLS starts a single-member etcd on a free loopback port, serving
// clients over TLS with pki's server certificate and accepting only client
// certificates of pki's CA. It returns the https:// client endpoint; etcd
// stops when tb's test ends.
func StartTLS(tb testing.TB, pki *etcdtlstest.PKI) string {
	tb.Helper()
	ec := embed.NewConfig()
	ec.Name = "etcdtest"
	ec.Dir = tb.TempDir()
	client, _ := url.Parse("https://127.0.0.1:0")
	peer, _ := url.Parse("http://127.0.0.1:0")
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClientTLSInfo = transport.TLSInfo{
		CertFile:       pki.ServerCertFile,
		KeyFile:        pki.ServerKeyFile,
		TrustedCAFile:  pki.CAFile,
		ClientCertAuth: true,
	}
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = true
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(ec)
	if err != nil {
		tb.Fatalf("start etcd: %v", err)
	}
	tb.Cleanup(func() {
		e.Close()
		<-e.Server.StopNotify()
	})
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		tb.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		tb.Fatal("etcd not ready after 30s")
	}
	return "https://" + e.Clients[0].Addr().String()
}
