// Package etcdtest starts, for tests, an etcd in the test process that
// serves its clients over TLS and requires client certificates, as
// production clusters do.
package etcdtest

import (
	"net"
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

// Member is a single-member etcd in the test process that serves plain-text
// clients on a fixed loopback port and that a test can stop and start again
// on the same port with its data: an etcd cluster that goes down and comes
// back.
type Member struct {
	// Endpoint is the http:// client endpoint, the same across restarts.
	Endpoint string

	tb  testing.TB
	cfg *embed.Config
	e   *embed.Etcd
}

// StartMember starts a member on free loopback ports; it stops when tb's
// test ends.
func StartMember(tb testing.TB) *Member {
	tb.Helper()
	client := freeURL(tb)
	peer := freeURL(tb)
	ec := embed.NewConfig()
	ec.Name = "member"
	ec.Dir = tb.TempDir()
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = true
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	m := &Member{Endpoint: client.String(), tb: tb, cfg: ec}
	m.Start()
	tb.Cleanup(m.Stop)
	return m
}

// Start starts the member again after Stop, with the data it had.
func (m *Member) Start() {
	m.tb.Helper()
	if m.e != nil {
		return
	}
	var e *embed.Etcd
	var err error
	// The port of the stopped member may take a moment to be free.
	for try := 0; ; try++ {
		if e, err = embed.StartEtcd(m.cfg); err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		m.tb.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		m.tb.Fatalf("etcd: %v", err)
	case <-time.After(30 * time.Second):
		m.tb.Fatal("etcd not ready after 30s")
	}
	m.e = e
}

// Stop stops the member; its clients find no server until Start.
func (m *Member) Stop() {
	if m.e == nil {
		return
	}
	m.e.Close()
	<-m.e.Server.StopNotify()
	m.e = nil
}

// freeURL is http:// on a loopback port free now.
func freeURL(tb testing.TB) url.URL {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return url.URL{Scheme: "http", Host: addr}
}
