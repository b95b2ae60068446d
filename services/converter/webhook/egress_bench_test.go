package webhook

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/egress/egresstest"
	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

// BenchmarkEgressPaired converts one object through the same webhook
// Direct and through an HTTPConnect proxy (plain TCP, or TLS with a
// client certificate), paired: every iteration converts once each way,
// in alternating order, so the machine's load hits both alike. The
// webhook cache and coalescing are off (every conversion is a review).
// "kept" reuses the connection (the tunnel is opened once), "new" closes
// it before every conversion (a dial, through the proxy a CONNECT, and a
// TLS handshake with the webhook each time). Reported: the medians of
// the per-conversion times and their difference.
func BenchmarkEgressPaired(b *testing.B) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(b, fw, privateURLHost)
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	hosts := map[string]string{privateURLHost + ":" + port: addr}
	pki := etcdtlstest.New(b)
	plain := egresstest.Start(b, egresstest.Options{Hosts: hosts})
	secure := egresstest.Start(b, egresstest.Options{Hosts: hosts, TLS: egresstest.ServerTLS(b, pki)})

	directURL := "https://" + addr + "/convert"
	proxiedURL := "https://" + privateURLHost + ":" + port + "/convert"
	direct := crd(apiextensionsv1.WebhookClientConfig{URL: &directURL, CABundle: caPEM})
	proxied := crd(apiextensionsv1.WebhookClientConfig{URL: &proxiedURL, CABundle: caPEM})
	obj := [][]byte{cronTab(beta, "a")}

	for _, p := range []struct{ name, transport string }{
		{"http", "tcp:\n        url: " + plain.URL},
		{"https", fmt.Sprintf("tcp:\n        url: %s\n        tlsConfig:\n          caBundle: %s\n          clientKey: %s\n          clientCert: %s",
			secure.URL, pki.CAFile, pki.ClientKeyFile, pki.ClientCertFile)},
	} {
		for _, conn := range []string{"kept", "new"} {
			b.Run(p.name+"/"+conn, func(b *testing.B) {
				cfg := Config{BatchWindow: -1, CacheBytes: -1, MaxBatch: -1}
				d := New(cfg)
				cfg.Egress = egressConfig(b, p.transport)
				e := New(cfg)
				defer d.Close()
				defer e.Close()
				one := func(c *Converter, crd *apiextensionsv1.CustomResourceDefinition) time.Duration {
					if conn == "new" {
						c.Close()
					}
					start := time.Now()
					if _, err := c.Convert(context.Background(), crd, v1, obj); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
				one(d, direct)
				one(e, proxied)
				ds, es := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := range b.N {
					if i%2 == 0 {
						ds = append(ds, one(d, direct))
						es = append(es, one(e, proxied))
					} else {
						es = append(es, one(e, proxied))
						ds = append(ds, one(d, direct))
					}
				}
				b.StopTimer()
				md, me := median(ds), median(es)
				b.ReportMetric(float64(md.Microseconds()), "direct-µs/op")
				b.ReportMetric(float64(me.Microseconds()), "proxied-µs/op")
				b.ReportMetric(float64((me - md).Microseconds()), "overhead-µs/op")
			})
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
