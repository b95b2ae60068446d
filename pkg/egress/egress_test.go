package egress_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/pkg/egress/egresstest"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

// privateName is a backend name only the proxies resolve.
const privateName = "backend.private.invalid:7"

// echo serves an echo on 127.0.0.1 and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr through d and checks an echo through the connection.
func roundTrip(t *testing.T, d *egress.Dialer, addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo through %s: %q, %v", d.Name(), buf, err)
	}
	return nil
}

func selector(t *testing.T, config string) *egress.Selector {
	t.Helper()
	cfg, err := egress.ReadConfigFile(egresstest.WriteConfig(t, config))
	if err != nil {
		t.Fatal(err)
	}
	s, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDirectWithoutConfig(t *testing.T) {
	backend := echo(t)
	for _, s := range []*egress.Selector{nil, selector(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: Direct
`)} {
		for _, n := range []egress.Name{egress.Cluster, egress.ControlPlane, egress.Etcd} {
			d := s.Dialer(n)
			if !d.Direct() || d.Name() != n {
				t.Fatalf("%s: direct %v, name %s", n, d.Direct(), d.Name())
			}
			if err := roundTrip(t, d, backend); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg, err := egress.ReadConfigFile("")
	if cfg != nil || err != nil {
		t.Fatalf("no file: %v, %v", cfg, err)
	}
}

func TestHTTPConnect(t *testing.T) {
	backend := echo(t)
	pki := etcdtlstest.New(t)
	hosts := map[string]string{privateName: backend}
	plain := egresstest.Start(t, egresstest.Options{Hosts: hosts})
	secure := egresstest.Start(t, egresstest.Options{Hosts: hosts, TLS: egresstest.ServerTLS(t, pki)})
	uds := egresstest.Start(t, egresstest.Options{Hosts: hosts, Network: "unix", Addr: filepath.Join(t.TempDir(), "proxy.sock")})
	for _, tc := range []struct {
		name      string
		proxy     *egresstest.Proxy
		transport string
	}{
		{"tcp http", plain, fmt.Sprintf("tcp:\n        url: %s", plain.URL)},
		{"tcp https", secure, fmt.Sprintf("tcp:\n        url: %s\n        tlsConfig:\n          caBundle: %s\n          clientKey: %s\n          clientCert: %s",
			secure.URL, pki.CAFile, pki.ClientKeyFile, pki.ClientCertFile)},
		{"uds", uds, "uds:\n        udsName: " + uds.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := selector(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      `+tc.transport+`
- name: controlplane
  connection:
    proxyProtocol: Direct
`)
			before := tc.proxy.Connects()
			d := s.Dialer(egress.Cluster)
			if d.Direct() || d.Protocol() != "HTTPConnect" {
				t.Fatalf("protocol %s", d.Protocol())
			}
			if err := roundTrip(t, d, privateName); err != nil {
				t.Fatal(err)
			}
			if got := tc.proxy.Connects() - before; got != 1 {
				t.Fatalf("%d CONNECTs, want 1", got)
			}
			if got := tc.proxy.Targets(); got[len(got)-1] != privateName {
				t.Fatalf("CONNECT targets %v", got)
			}
			// The name is the proxy's: a direct dial does not reach it.
			if err := roundTrip(t, s.Dialer(egress.ControlPlane), privateName); err == nil {
				t.Fatal("the private name was reached directly")
			}
		})
	}
}

func TestHTTPConnectFailures(t *testing.T) {
	pki := etcdtlstest.New(t)
	// A proxy that answers but cannot reach the backend: upstream's
	// "proxy error" wording.
	proxy := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{privateName: "127.0.0.1:1"}})
	s := selector(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+proxy.URL+`
`)
	err := roundTrip(t, s.Dialer(egress.Cluster), privateName)
	want := fmt.Sprintf("proxy error from %s while dialing %s, code 502: 502 Bad Gateway", proxy.Addr, privateName)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}

	// The proxy down: the dial error, as upstream's (no wrapping).
	proxy.Close()
	err = roundTrip(t, s.Dialer(egress.Cluster), privateName)
	want = fmt.Sprintf("dial tcp %s: connect: connection refused", proxy.Addr)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}

	// A TLS proxy refuses a client certificate of another CA.
	secure := egresstest.Start(t, egresstest.Options{TLS: egresstest.ServerTLS(t, pki)})
	other := etcdtlstest.New(t)
	s = selector(t, fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: etcd
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: %s
        tlsConfig:
          caBundle: %s
          clientKey: %s
          clientCert: %s
`, secure.URL, pki.CAFile, other.ClientKeyFile, other.ClientCertFile))
	if err := roundTrip(t, s.Dialer(egress.Etcd), privateName); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client certificate of another CA: %v", err)
	}
	if secure.Connects() != 0 {
		t.Fatalf("%d CONNECTs with a refused certificate", secure.Connects())
	}
}

func TestReadConfigFileErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: https://127.0.0.1:8131
`, "failed to validate egress selector configuration: service.connection.tlsConfig: Required value: TLSConfig must be present when using HTTPS"},
		{`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: nodes
  connection:
    proxyProtocol: Direct
`, `failed to validate egress selector configuration: service.connection: Unsupported value: "nodes": supported values: "cluster", "controlplane", "etcd"`},
		{`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      tcp:
        url: http://127.0.0.1:8131
`, "failed to validate egress selector configuration: service.connection.uds: Required value: UDS must be set with GRPC"},
		{`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: Direct
    bogus: 1
`, `failed to read egress selector config: strict decoding error: unknown field "egressSelections[0].connection.bogus"`},
	} {
		_, err := egress.ReadConfigFile(egresstest.WriteConfig(t, tc.config))
		if err == nil || err.Error() != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
	_, err := egress.ReadConfigFile(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.HasPrefix(err.Error(), `failed to read egress selector config: unable to read egress selector configuration from "`) {
		t.Fatalf("absent file: %v", err)
	}
}

// TestGRPCKonnectivity: the GRPC proxy protocol (konnectivity, over a
// Unix socket) through upstream's dialer, against a konnectivity server.
func TestGRPCKonnectivity(t *testing.T) {
	backend := echo(t)
	k := egresstest.StartKonnectivity(t, filepath.Join(t.TempDir(), "konnectivity.sock"), map[string]string{privateName: backend})
	s := selector(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: `+k.Socket+`
`)
	d := s.Dialer(egress.Cluster)
	if d.Protocol() != "GRPC" {
		t.Fatalf("protocol %s", d.Protocol())
	}
	for range 2 {
		if err := roundTrip(t, d, privateName); err != nil {
			t.Fatal(err)
		}
	}
	if k.Dials() != 2 || strings.Join(k.Targets(), ",") != privateName+","+privateName {
		t.Fatalf("%d dials, targets %v", k.Dials(), k.Targets())
	}
	// The backend refusing: the server's dial error, through upstream's
	// client.
	k = egresstest.StartKonnectivity(t, filepath.Join(t.TempDir(), "down.sock"), map[string]string{privateName: "127.0.0.1:1"})
	s = selector(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: `+k.Socket+`
`)
	err := roundTrip(t, s.Dialer(egress.Cluster), privateName)
	if want := "dial tcp 127.0.0.1:1: connect: connection refused"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to contain %s", err, want)
	}
	// (With the server gone, upstream's GRPC dialer retries the socket
	// for 30s whatever the context: not tested here.)
}

// TestMasterIsControlPlane: the deprecated selection name "master" is
// controlplane (upstream's v1beta1 conversion).
func TestMasterIsControlPlane(t *testing.T) {
	backend := echo(t)
	proxy := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{privateName: backend}})
	s := selector(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: master
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+proxy.URL+`
`)
	if d := s.Dialer(egress.ControlPlane); d.Direct() {
		t.Fatal("controlplane is direct")
	}
	if err := roundTrip(t, s.Dialer(egress.ControlPlane), privateName); err != nil || proxy.Connects() != 1 {
		t.Fatalf("%v, %d CONNECTs", err, proxy.Connects())
	}
	if !s.Dialer(egress.Cluster).Direct() {
		t.Fatal("cluster is not direct")
	}
}
