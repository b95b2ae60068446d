package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/examples/crontab-conversion-webhook/conversion"
	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/converter/webhook"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// conversionCRD is the reference's CronTab with webhook conversion
// (v1beta1 hostPort ⇄ v1 host + port), stored at v1beta1.
const conversionCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          hostPort: {type: string}
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          host: {type: string}
          port: {type: string}
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig:
        url: WEBHOOK_URL
        caBundle: CA_BUNDLE
`

// benchWebhook is the example webhook over TLS, timing its own work.
type benchWebhook struct {
	url     string
	caPEM   []byte
	handler *conversion.Handler
	mu      sync.Mutex
	own     []time.Duration // time spent converting, per review
}

func startBenchWebhook(b *testing.B) *benchWebhook {
	b.Helper()
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		b.Fatal(err)
	}
	w := &benchWebhook{caPEM: pki.CACertPEM}
	w.handler = &conversion.Handler{Observe: func(d time.Duration, _ int) {
		w.mu.Lock()
		w.own = append(w.own, d)
		w.mu.Unlock()
	}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: w.handler.Mux("/convert")}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	w.url = "https://" + ln.Addr().String() + "/convert"
	return w
}

// reset forgets the recorded review times.
func (w *benchWebhook) reset() {
	w.mu.Lock()
	w.own = w.own[:0]
	w.mu.Unlock()
}

func (w *benchWebhook) ownP99() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return percentile(w.own, 0.99)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cronTabJSON is a ~700-byte CronTab at v1beta1.
func cronTabJSON(name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":%q,"namespace":"default","labels":{"app":"bench","tier":"backend"},"annotations":{"note":"%0300d"}},"hostPort":"%s.example.com:8080","spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/my-awesome-cron-image:v1.2.3","replicas":5}}`, name, 0, name)
}

// startConversionPlatform starts crdplane, the webhook and the CRD, and
// creates n CronTabs at v1beta1 (the storage version).
func startConversionPlatform(b *testing.B, n int) (*platform.Platform, *http.Client, *benchWebhook) {
	b.Helper()
	w := startBenchWebhook(b)
	p, client := startConversionPlatformWith(b, platform.Config{}, w, n)
	return p, client, w
}

// startConversionPlatformWith is startConversionPlatform with cfg and an
// existing webhook.
func startConversionPlatformWith(b *testing.B, pc platform.Config, w *benchWebhook, n int) (*platform.Platform, *http.Client) {
	b.Helper()
	p, cfg := platformtest.StartConfig(b, pc)
	doc := strings.NewReplacer("WEBHOOK_URL", w.url, "CA_BUNDLE", base64.StdEncoding.EncodeToString(w.caPEM)).Replace(conversionCRD)
	platformtest.CreateCRD(b, dynamic.NewForConfigOrDie(cfg), platformtest.Object(b, []byte(doc)))
	client := platformtest.HTTPClient(p)
	url := p.URL + "/apis/example.com/v1beta1/namespaces/default/crontabs"
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if code := do(b, client, p, http.MethodPost, url, cronTabJSON(fmt.Sprintf("ct-%05d", i))); code != http.StatusCreated {
					b.Errorf("create: HTTP %d", code)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return p, client
}

func do(b testing.TB, client *http.Client, p *platform.Platform, method, url string, body []byte) int {
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := client.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	var sink bytes.Buffer
	_, _ = sink.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// readAll runs total GETs of single objects from clients concurrent
// clients at version and returns each request's latency.
func readAll(b *testing.B, client *http.Client, p *platform.Platform, version string, clients, objects, total int) []time.Duration {
	lat := make([]time.Duration, total)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(total); i = next.Add(1) - 1 {
				url := fmt.Sprintf("%s/apis/example.com/%s/namespaces/default/crontabs/ct-%05d", p.URL, version, i%int64(objects))
				start := time.Now()
				if code := do(b, client, p, http.MethodGet, url, nil); code != http.StatusOK {
					b.Errorf("get: HTTP %d", code)
					return
				}
				lat[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	return lat
}

// BenchmarkConversionReads has 64 concurrent clients read single objects
// through crdplane, in three phases of b.N reads each, in the same run:
//
//   - stored: at the storage version (no conversion);
//   - per-request: at the other version, on a second crdplane whose
//     converter sends one review per read (upstream's behaviour,
//     --batch-window=-1 --conversion-cache-bytes=-1);
//   - coalesced: at the other version, with the default batch window.
//
// The metrics are the reads per webhook call of each converted phase, the
// read latencies, what coalescing adds to the p99 over upstream's one call
// per read (batching-added-p99-ms: coalesced p99 - per-request p99, both
// paying the webhook's own time) and over no conversion at all
// (conversion-added-p99-ms), the longest 1% of waits for a review to leave
// (wait-p99-ms, bounded by the window), and the webhook's own p99 (its time
// converting one review).
func BenchmarkConversionReads(b *testing.B) {
	const clients, objects = 64, 256
	var mu sync.Mutex
	var waits []time.Duration
	var cfg platform.Config
	// CRDPLANE_BENCH_BATCH_WINDOW tries another --batch-window.
	if v := os.Getenv("CRDPLANE_BENCH_BATCH_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Conversion.BatchWindow = d
	}
	cfg.Conversion.Observe = func(ws []time.Duration, _ time.Duration) {
		mu.Lock()
		waits = append(waits, ws...)
		mu.Unlock()
	}
	w := startBenchWebhook(b)
	p, client := startConversionPlatformWith(b, cfg, w, objects)
	up, upClient := startConversionPlatformWith(b, platform.Config{Conversion: webhook.Config{BatchWindow: -1, CacheBytes: -1}}, w, objects)
	for _, pc := range []struct {
		p *platform.Platform
		c *http.Client
	}{{p, client}, {up, upClient}} {
		readAll(b, pc.c, pc.p, "v1", clients, objects, 2*clients) // warm up connections
	}
	b.Run("64-clients", func(b *testing.B) {
		stored := readAll(b, client, p, "v1beta1", clients, objects, b.N)
		calls0 := w.handler.Reviews()
		perRequest := readAll(b, upClient, up, "v1", clients, objects, b.N)
		calls1 := w.handler.Reviews()
		w.reset()
		mu.Lock()
		waits = waits[:0]
		mu.Unlock()
		coalesced := readAll(b, client, p, "v1", clients, objects, b.N)
		calls2 := w.handler.Reviews()
		b.StopTimer()

		p99 := func(ds []time.Duration) time.Duration { return percentile(ds, 0.99) }
		b.ReportMetric(float64(b.N)/float64(max(calls2-calls1, 1)), "reads/webhook-call")
		b.ReportMetric(float64(b.N)/float64(max(calls1-calls0, 1)), "per-request-reads/webhook-call")
		b.ReportMetric(ms(percentile(stored, 0.5)), "stored-p50-ms")
		b.ReportMetric(ms(p99(stored)), "stored-p99-ms")
		b.ReportMetric(ms(percentile(perRequest, 0.5)), "per-request-p50-ms")
		b.ReportMetric(ms(p99(perRequest)), "per-request-p99-ms")
		b.ReportMetric(ms(percentile(coalesced, 0.5)), "coalesced-p50-ms")
		b.ReportMetric(ms(p99(coalesced)), "coalesced-p99-ms")
		b.ReportMetric(ms(p99(coalesced)-p99(perRequest)), "batching-added-p99-ms")
		b.ReportMetric(ms(p99(coalesced)-p99(stored)), "conversion-added-p99-ms")
		mu.Lock()
		b.ReportMetric(ms(p99(waits)), "wait-p99-ms")
		mu.Unlock()
		b.ReportMetric(ms(w.ownP99()), "webhook-own-p99-ms")
	})
}

// converterCRD is conversionCRD as the converter sees it.
func converterCRD(w *benchWebhook) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name, crd.UID, crd.Generation = "crontabs.example.com", "bench", 1
	crd.Spec.Group = "example.com"
	crd.Spec.Names.Kind = "CronTab"
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true}, {Name: "v1", Served: true}}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &w.url, CABundle: w.caPEM}, ConversionReviewVersions: []string{"v1"},
	}}
	return crd
}

// BenchmarkConverterCoalescing isolates the converter: 64 goroutines
// convert single objects, coalesced (the default) or one review per
// request (upstream's behaviour). wait-p99-ms is what coalescing adds to a
// conversion (the time from its arrival to its review being sent);
// review-p99-ms is the review's round trip, the webhook's own latency as
// the converter sees it.
func BenchmarkConverterCoalescing(b *testing.B) {
	w := startBenchWebhook(b)
	crd := converterCRD(w)
	for _, bc := range []struct {
		name   string
		window time.Duration
	}{{"coalesced", 0}, {"per-request", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			var mu sync.Mutex
			var waits, rtts []time.Duration
			c := webhook.New(webhook.Config{BatchWindow: bc.window, Observe: func(ws []time.Duration, rtt time.Duration) {
				mu.Lock()
				waits = append(waits, ws...)
				rtts = append(rtts, rtt)
				mu.Unlock()
			}})
			defer c.Close()
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			w.reset()
			b.ResetTimer()
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						start := time.Now()
						if _, err := c.Convert(context.Background(), crd, "example.com/v1", [][]byte{cronTabJSON(fmt.Sprintf("ct-%d", i))}); err != nil {
							b.Error(err)
							return
						}
						lat[i] = time.Since(start)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/float64(max(c.Stats().Calls, 1)), "requests/webhook-call")
			b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
			if len(rtts) > 0 {
				b.ReportMetric(ms(percentile(waits, 0.99)), "wait-p99-ms")
				b.ReportMetric(ms(percentile(rtts, 0.99)), "review-p99-ms")
			}
			b.ReportMetric(ms(w.ownP99()), "webhook-own-p99-ms")
		})
	}
}

// BenchmarkConversionList5000 converts a 5,000-object list in the
// converter alone: chunked (the default: 256 objects per review, 8 at
// once) versus one ConversionReview (upstream's way).
func BenchmarkConversionList5000(b *testing.B) {
	const n = 5000
	w := startBenchWebhook(b)
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = cronTabJSON(fmt.Sprintf("ct-%05d", i))
	}
	crd := converterCRD(w)
	for _, bc := range []struct {
		name string
		cfg  webhook.Config
	}{{"converter/chunked", webhook.Config{}}, {"converter/single-call", webhook.Config{MaxBatch: -1}}} {
		b.Run(bc.name, func(b *testing.B) {
			c := webhook.New(bc.cfg)
			defer c.Close()
			for b.Loop() {
				out, err := c.Convert(context.Background(), crd, "example.com/v1", objs)
				if err != nil || len(out) != n {
					b.Fatalf("%v, %d objects", err, len(out))
				}
			}
			b.ReportMetric(float64(c.Stats().Calls)/float64(b.N), "webhook-calls/op")
		})
	}
}

// BenchmarkConversionList5000Crdplane lists 5,000 objects through crdplane
// at the non-storage version (webhook conversion, chunked) and at the
// storage version (no conversion).
func BenchmarkConversionList5000Crdplane(b *testing.B) {
	p, client, w := startConversionPlatform(b, 5000)
	for _, version := range []string{"v1", "v1beta1"} {
		b.Run("list-at-"+version, func(b *testing.B) {
			url := p.URL + "/apis/example.com/" + version + "/namespaces/default/crontabs"
			calls0 := w.handler.Reviews()
			for b.Loop() {
				if code := do(b, client, p, http.MethodGet, url, nil); code != http.StatusOK {
					b.Fatalf("list: HTTP %d", code)
				}
			}
			b.ReportMetric(float64(w.handler.Reviews()-calls0)/float64(b.N), "webhook-calls/op")
		})
	}
}

// BenchmarkConversionWatchFanout: 50 watches of the collection at v1 (the
// non-storage version) while b.N CronTabs are created at v1beta1, one
// after another. Upstream converts each event for each watch (one webhook
// call per watch per event: 50 per event); here the watches' conversions
// of one event coalesce and the event is sent once. The metrics are the
// webhook calls and the objects sent per event.
func BenchmarkConversionWatchFanout(b *testing.B) {
	const watchers = 50
	p, client, w := startConversionPlatform(b, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := p.URL + "/apis/example.com/v1/namespaces/default/crontabs"
	var delivered atomic.Int64
	for range watchers {
		follow(b, ctx, client, p.Token, base+"?watch=true&allowWatchBookmarks=false", "0", func(o *watchedObject) {
			if o.APIVersion == "example.com/v1" && o.Host != "" {
				delivered.Add(1)
			}
		})
	}
	var seq atomic.Int64
	b.ResetTimer()
	reviews0, objects0, start := w.handler.Reviews(), w.handler.Objects(), delivered.Load()
	createURL := p.URL + "/apis/example.com/v1beta1/namespaces/default/crontabs"
	for range b.N {
		if code := do(b, client, p, http.MethodPost, createURL, cronTabJSON(fmt.Sprintf("fan-%06d", seq.Add(1)))); code != http.StatusCreated {
			b.Fatalf("create: HTTP %d", code)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for delivered.Load()-start < int64(b.N*watchers) {
		if time.Now().After(deadline) {
			b.Fatalf("delivered %d of %d events", delivered.Load()-start, b.N*watchers)
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(w.handler.Reviews()-reviews0)/float64(b.N), "webhook-calls/event")
	b.ReportMetric(float64(w.handler.Objects()-objects0)/float64(b.N), "objects-sent/event")
	b.ReportMetric(float64(b.N*watchers)/b.Elapsed().Seconds(), "deliveries/s")
}
