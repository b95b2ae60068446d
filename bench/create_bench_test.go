// Package bench holds the cross-service benchmarks. They run with
// `make bench` (go test -bench), never in `make test`.
package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/platform/platformtest"
)

// object is a ~1 KiB CronTab; name is filled per request.
func object(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":%q,"namespace":"default","labels":{"app":"bench","tier":"backend","team":"platform"},"annotations":{"note":"%0600d"}},"spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/my-awesome-cron-image:v1.2.3","replicas":5}}`, name, 0)
}

// BenchmarkCreate compares, in one run, a custom-resource create through
// every service (HTTPS in, gateway, validator, storage, etcd write, response)
// with a raw etcd Put of the same object to the same embedded etcd.
func BenchmarkCreate(b *testing.B) {
	p, cfg := platformtest.Start(b)
	platformtest.CreateCRD(b, dynamic.NewForConfigOrDie(cfg), platformtest.Object(b, []byte(platformtest.CronTabCRD)))
	client := platformtest.HTTPClient(p)
	url := p.URL + "/apis/stable.example.com/v1/namespaces/default/crontabs"
	etcd := p.EtcdClient()
	var seq atomic.Int64

	create := func(b *testing.B) {
		name := fmt.Sprintf("bench-%d", seq.Add(1))
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(object(name)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+p.Token)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("create: HTTP %d", resp.StatusCode)
		}
	}
	put := func(b *testing.B) {
		name := fmt.Sprintf("raw-%d", seq.Add(1))
		if _, err := etcd.Put(context.Background(), "/bench/raw/default/"+name, string(object(name))); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		op   func(*testing.B)
	}{{"crdplane", create}, {"etcd-put", put}} {
		b.Run(bc.name+"/serial", func(b *testing.B) {
			for b.Loop() {
				bc.op(b)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bc.op(b)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
