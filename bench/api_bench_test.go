package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
)

const crontabsURL = "/apis/stable.example.com/v1/namespaces/default/crontabs"

// benchPlatform is a platform with the CronTab CRD and an authenticated
// HTTP client.
type benchPlatform struct {
	p      *platform.Platform
	client *http.Client
}

func startBench(b *testing.B) *benchPlatform {
	b.Helper()
	p, cfg := platformtest.Start(b)
	platformtest.CreateCRD(b, dynamic.NewForConfigOrDie(cfg), platformtest.Object(b, []byte(platformtest.CronTabCRD)))
	return &benchPlatform{p: p, client: platformtest.HTTPClient(p)}
}

// do sends one request and returns the status and body.
func (bp *benchPlatform) do(b *testing.B, method, path, contentType string, body []byte) (int, []byte) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, bp.p.URL+path, r)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bp.p.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := bp.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return resp.StatusCode, data
}

// fill creates n ~1 KiB CronTabs named <prefix>-<i>, 32 at a time.
func (bp *benchPlatform) fill(b *testing.B, prefix string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if code, body := bp.do(b, http.MethodPost, crontabsURL, "application/json", object(fmt.Sprintf("%s-%d", prefix, i))); code != http.StatusCreated {
					b.Errorf("create: %d %s", code, body)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// storedObject is a ~1 KiB CronTab as the platform stores it (server
// metadata set, no resourceVersion).
func storedObject(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"annotations":{"note":"%0560d"},"creationTimestamp":"2026-01-01T00:00:00Z","generation":1,"labels":{"app":"bench","team":"platform","tier":"backend"},"name":%q,"namespace":"default","uid":"6f1d2c3e-0000-4000-8000-000000000000"},"spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/my-awesome-cron-image:v1.2.3","replicas":5}}`, 0, name)
}

// seed writes n CronTabs of ~1 KiB straight to etcd, as the platform
// stores them (server metadata set, no resourceVersion): quick to set up,
// and nothing of the setup shows in a profile of what is measured.
func (bp *benchPlatform) seed(b *testing.B, prefix string, n int) {
	b.Helper()
	etcd := bp.p.EtcdClient()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("%s-%04d", prefix, i)
				if _, err := etcd.Put(context.Background(), "/registry/stable.example.com/crontabs/default/"+name, string(storedObject(name))); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// BenchmarkList2000 lists 2,000 CronTabs of ~1 KiB through the whole
// platform: HTTPS, gateway, storage, etcd range read, JSON response (read
// to the end by the client).
func BenchmarkList2000(b *testing.B) {
	bp := startBench(b)
	bp.seed(b, "list", 2000)
	check := func() int {
		code, body := bp.do(b, http.MethodGet, crontabsURL, "", nil)
		if code != http.StatusOK {
			b.Fatalf("list: %d %s", code, body)
		}
		return len(body)
	}
	size := check()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		check()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
}

// BenchmarkGet, BenchmarkUpdate and BenchmarkDelete measure single-object
// operations through the platform, 8 clients in parallel.
func BenchmarkGet(b *testing.B) {
	bp := startBench(b)
	bp.fill(b, "get", 100)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := fmt.Sprintf("get-%d", seq.Add(1)%100)
			if code, body := bp.do(b, http.MethodGet, crontabsURL+"/"+name, "", nil); code != http.StatusOK {
				b.Fatalf("get: %d %s", code, body)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkUpdate(b *testing.B) {
	bp := startBench(b)
	bp.fill(b, "upd", 64)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine owns its objects: no conflicts.
		id := seq.Add(1)
		n := 0
		for pb.Next() {
			n++
			name := fmt.Sprintf("upd-%d", (id*8+int64(n%8))%64)
			patch := fmt.Appendf(nil, `{"spec":{"image":"registry.example.com/team/img:%d"}}`, n)
			if code, body := bp.do(b, http.MethodPatch, crontabsURL+"/"+name, "application/merge-patch+json", patch); code != http.StatusOK {
				b.Fatalf("patch: %d %s", code, body)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkDelete(b *testing.B) {
	bp := startBench(b)
	var seq atomic.Int64
	b.SetParallelism(8)
	for b.Loop() {
		b.StopTimer()
		prefix := fmt.Sprintf("del%d", seq.Add(1))
		bp.fill(b, prefix, 200)
		b.StartTimer()
		var wg sync.WaitGroup
		work := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range work {
					if code, body := bp.do(b, http.MethodDelete, fmt.Sprintf("%s/%s-%d", crontabsURL, prefix, i), "", nil); code != http.StatusOK {
						b.Errorf("delete: %d %s", code, body)
					}
				}
			})
		}
		for i := range 200 {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*200)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkWatchFanout: 100 watchers of the collection while b.N objects
// are written (straight to etcd, in transactions of up to 100 puts, so
// that etcd's fsync is not what is measured); it ends when every watcher has received every ADDED
// event. events/s counts deliveries (100 per object) through storage's
// shared watch, the gateway and HTTPS.
func BenchmarkWatchFanout(b *testing.B) {
	const watchers = 100
	bp := startBench(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var delivered atomic.Int64
	for range watchers {
		follow(b, ctx, bp.client, bp.p.Token, bp.p.URL+crontabsURL+"?watch=true", "1", func(*watchedObject) { delivered.Add(1) })
	}
	var seq atomic.Int64
	b.ResetTimer()
	start := delivered.Load()
	n := b.N
	etcd := bp.p.EtcdClient()
	for done := 0; done < n; {
		batch := min(100, n-done)
		ops := make([]clientv3.Op, batch)
		for i := range ops {
			name := fmt.Sprintf("fan-%d", seq.Add(1))
			ops[i] = clientv3.OpPut("/registry/stable.example.com/crontabs/default/"+name, string(storedObject(name)))
		}
		if _, err := etcd.Txn(context.Background()).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		done += batch
	}
	deadline := time.Now().Add(60 * time.Second)
	for delivered.Load()-start < int64(n*watchers) {
		if time.Now().After(deadline) {
			b.Fatalf("delivered %d of %d events", delivered.Load()-start, n*watchers)
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(n*watchers)/b.Elapsed().Seconds(), "events/s")
}
