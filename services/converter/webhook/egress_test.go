package webhook

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/pkg/egress/egresstest"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

// The private network of these tests: the webhook listens on 127.0.0.2
// and answers only connections from 127.0.0.3, the proxy's source
// address, under names only the proxy resolves.
const (
	privateURLHost = "conversion.private.invalid"
	privateService = "conversion.private.svc" // clientConfig.service conversion/private
)

var proxySource = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}

// privateWebhook serves fw on 127.0.0.2 over TLS for the private names,
// refusing (403, fw not called) every client but the proxy's address.
func privateWebhook(t *testing.T, fw http.Handler) (caPEM []byte, addr string) {
	t.Helper()
	caPEM, cert := servingCert(t, privateURLHost, privateService)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host, _, _ := net.SplitHostPort(r.RemoteAddr); host != proxySource.IP.String() {
			http.Error(w, "only the proxy may call", http.StatusForbidden)
			return
		}
		fw.ServeHTTP(w, r)
	}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return caPEM, ln.Addr().String()
}

// egressConfig is an EgressSelectorConfiguration with the cluster and
// controlplane selections through an HTTPConnect transport.
func egressConfig(t testing.TB, transport string) *egress.Selector {
	t.Helper()
	c := Config{EgressSelectorConfigFile: egresstest.WriteConfig(t, fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      %[1]s
- name: controlplane
  connection:
    proxyProtocol: HTTPConnect
    transport:
      %[1]s
`, transport))}
	if err := c.LoadEgress(); err != nil {
		t.Fatal(err)
	}
	return c.Egress
}

func TestEgressHTTPConnect(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, addr := privateWebhook(t, fw)
	_, port, _ := net.SplitHostPort(addr)
	hosts := map[string]string{privateURLHost + ":" + port: addr, privateService + ":" + port: addr}
	pki := etcdtlstest.New(t)
	plain := egresstest.Start(t, egresstest.Options{Hosts: hosts, LocalAddr: proxySource})
	secure := egresstest.Start(t, egresstest.Options{Hosts: hosts, LocalAddr: proxySource, TLS: egresstest.ServerTLS(t, pki)})
	uds := egresstest.Start(t, egresstest.Options{Hosts: hosts, LocalAddr: proxySource, Network: "unix", Addr: filepath.Join(t.TempDir(), "konnectivity.sock")})

	u := "https://" + privateURLHost + ":" + port + "/convert"
	byURL := crd(apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: caPEM})
	p, _ := net.LookupPort("tcp", port)
	path := "/convert"
	svcPort := int32(p)
	bySvc := crd(apiextensionsv1.WebhookClientConfig{CABundle: caPEM, Service: &apiextensionsv1.ServiceReference{Namespace: "private", Name: "conversion", Path: &path, Port: &svcPort}})

	// Direct, the webhook is out of reach: its name resolves nowhere but
	// at the proxy.
	_, err := New(Config{}).Convert(context.Background(), byURL, v1, [][]byte{cronTab(beta, "a")})
	if s := statusOf(t, err); s.Code != 500 || !strings.HasPrefix(s.Message, fmt.Sprintf(`conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post "%s?timeout=30s": dial tcp: lookup %s`, u, privateURLHost)) {
		t.Fatalf("direct: %d %s", s.Code, s.Message)
	}
	// Nor through its address, from the converter's.
	direct := "https://" + addr + "/convert"
	_, err = New(Config{}).Convert(context.Background(), crd(apiextensionsv1.WebhookClientConfig{URL: &direct, CABundle: caPEM}), v1, [][]byte{cronTab(beta, "a")})
	if s := statusOf(t, err); s.Code != 500 || !strings.Contains(s.Message, "only the proxy may call") {
		t.Fatalf("direct by address: %d %s", s.Code, s.Message)
	}
	if fw.reviews.Load() != 0 {
		t.Fatalf("%d reviews reached the webhook directly", fw.reviews.Load())
	}

	for _, tc := range []struct {
		name      string
		proxy     *egresstest.Proxy
		transport string
	}{
		{"tcp http", plain, "tcp:\n        url: " + plain.URL},
		{"tcp https", secure, fmt.Sprintf("tcp:\n        url: %s\n        tlsConfig:\n          caBundle: %s\n          clientKey: %s\n          clientCert: %s",
			secure.URL, pki.CAFile, pki.ClientKeyFile, pki.ClientCertFile)},
		{"uds", uds, "uds:\n        udsName: " + uds.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := egressConfig(t, tc.transport)
			for _, target := range []struct {
				crd  *apiextensionsv1.CustomResourceDefinition
				dial string // what the proxy is asked for
			}{{byURL, privateURLHost + ":" + port}, {bySvc, privateService + ":" + port}} {
				c := New(Config{Egress: sel})
				connects, reviews := tc.proxy.Connects(), fw.reviews.Load()
				for _, name := range []string{"a", "b", "c"} {
					out, err := c.Convert(context.Background(), target.crd, v1, [][]byte{cronTab(beta, name)})
					if err != nil {
						t.Fatal(err)
					}
					if !strings.Contains(string(out[0]), `"apiVersion":"example.com/v1"`) {
						t.Fatalf("not converted: %s", out[0])
					}
				}
				// Three reviews over one tunnel (keep-alive).
				if got := tc.proxy.Connects() - connects; got != 1 {
					t.Fatalf("%s: %d CONNECTs, want 1", target.dial, got)
				}
				if got := fw.reviews.Load() - reviews; got != 3 {
					t.Fatalf("%s: %d reviews, want 3", target.dial, got)
				}
				if ts := tc.proxy.Targets(); ts[len(ts)-1] != target.dial {
					t.Fatalf("CONNECT %v, want %s", ts, target.dial)
				}
				c.Close()
			}
		})
	}
}

// TestEgressKonnectivity: the GRPC proxy protocol (a konnectivity server
// on a Unix socket, one tunnel per connection) to the private webhook.
func TestEgressKonnectivity(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, addr := privateWebhook(t, fw)
	_, port, _ := net.SplitHostPort(addr)
	// The konnectivity server dials from the proxy's address.
	k := egresstest.StartKonnectivity(t, filepath.Join(t.TempDir(), "konnectivity.sock"), map[string]string{privateService + ":" + port: addr})
	k.LocalAddr = proxySource
	c := Config{EgressSelectorConfigFile: egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: GRPC
    transport:
      uds:
        udsName: `+k.Socket+`
`)}
	if err := c.LoadEgress(); err != nil {
		t.Fatal(err)
	}
	p, _ := net.LookupPort("tcp", port)
	path, svcPort := "/convert", int32(p)
	bySvc := crd(apiextensionsv1.WebhookClientConfig{CABundle: caPEM, Service: &apiextensionsv1.ServiceReference{Namespace: "private", Name: "conversion", Path: &path, Port: &svcPort}})
	conv := New(c)
	defer conv.Close()
	for _, name := range []string{"a", "b"} {
		if _, err := conv.Convert(context.Background(), bySvc, v1, [][]byte{cronTab(beta, name)}); err != nil {
			t.Fatal(err)
		}
	}
	if k.Dials() != 1 || fw.reviews.Load() != 2 || k.Targets()[0] != privateService+":"+port {
		t.Fatalf("%d dials (%v), %d reviews", k.Dials(), k.Targets(), fw.reviews.Load())
	}
}

func TestEgressProxyDown(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, addr := privateWebhook(t, fw)
	_, port, _ := net.SplitHostPort(addr)
	// A proxy that cannot reach the webhook: upstream's proxy error.
	proxy := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{privateURLHost + ":" + port: "127.0.0.2:1"}, LocalAddr: proxySource})
	sel := egressConfig(t, "tcp:\n        url: "+proxy.URL)
	u := "https://" + privateURLHost + ":" + port + "/convert"
	crd := crd(apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: caPEM})
	_, err := New(Config{Egress: sel}).Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, "a")})
	want := fmt.Sprintf(`conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post "%s?timeout=30s": proxy error from %s while dialing %s:%s, code 502: 502 Bad Gateway`, u, proxy.Addr, privateURLHost, port)
	if s := statusOf(t, err); s.Code != 500 || s.Message != want {
		t.Fatalf("got  %d %s\nwant %s", s.Code, s.Message, want)
	}
	// The proxy down.
	proxy.Close()
	_, err = New(Config{Egress: sel}).Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, "a")})
	want = fmt.Sprintf(`conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post "%s?timeout=30s": dial tcp %s: connect: connection refused`, u, proxy.Addr)
	if s := statusOf(t, err); s.Code != 500 || s.Message != want {
		t.Fatalf("got  %d %s\nwant %s", s.Code, s.Message, want)
	}
	if fw.reviews.Load() != 0 {
		t.Fatalf("%d reviews", fw.reviews.Load())
	}
}

func TestEgressFlag(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("converter", flag.ContinueOnError)
	c.RegisterFlags(fs)
	path := egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: /run/konnectivity.sock
`)
	if err := fs.Parse([]string{"--egress-selector-config-file", path}); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadEgress(); err != nil {
		t.Fatal(err)
	}
	if d := c.Egress.Dialer(egress.Cluster); d.Protocol() != "HTTPConnect" {
		t.Fatalf("cluster: %s", d.Protocol())
	}
	if d := c.Egress.Dialer(egress.ControlPlane); !d.Direct() {
		t.Fatalf("controlplane: %s", d.Protocol())
	}
	bad := Config{EgressSelectorConfigFile: egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: Direct
    transport:
      uds:
        udsName: /run/konnectivity.sock
`)}
	err := bad.LoadEgress()
	if want := `failed to validate egress selector configuration: service.connection.transport: Invalid value: "direct": config must be absent for direct connect`; err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
