package upstream

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Webhook conversion side by side (issue 18): the same conversion webhook
// (over TLS on loopback, 2 ms of work per review) serves upstream v1.33 and
// crdplane in the same run, each at its own path so that its calls are
// counted apart. Per iteration, on each server, in a namespace of its own:
//
//   - 500 objects created at the storage version (v1beta1);
//   - the read probe: 4,000 GETs from 64 concurrent readers (object i%500),
//     at the storage version, then at the other version (v1): webhook
//     calls per GET, p50/p99 of each, and what conversion adds to the p99;
//   - converted watches: a watch at v1 and one at v1beta1 while one object
//     is updated 100 times a second for 3 s (at v1beta1): each event's lag
//     from its update being sent, p50/p99 per watch.
//
// go test -run '^$' -bench ConversionProbe -benchtime 1x -count 5 .

const (
	probeObjects = 500
	probeGets    = 4000
	probeReaders = 64
	webhookWork  = 2 * time.Millisecond
	watchRate    = 100 // updates per second
	watchFor     = 3 * time.Second
)

var (
	convOnce    sync.Once
	convTargets []*Target
	convStop    func()
	convErr     error
	convHook    *probeWebhook
)

// conversionServers starts a pair of servers (without the CRD API
// benchmarks' thousand CRDs), the webhook, and the CRD on each.
func conversionServers(b *testing.B) ([]*Target, *probeWebhook) {
	b.Helper()
	convOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crdplane-bench-conversion-")
		if err != nil {
			convErr = err
			return
		}
		ctx := context.Background()
		if convHook, convErr = startProbeWebhook(); convErr != nil {
			return
		}
		if convTargets, convStop, convErr = Start(ctx, dir); convErr != nil {
			return
		}
		for _, t := range convTargets {
			if convErr = createProbeCRD(ctx, t, convHook); convErr != nil {
				return
			}
		}
	})
	if convErr != nil {
		b.Fatal(convErr)
	}
	return convTargets, convHook
}

// probeWebhook converts the CronTab of the Kubernetes versioning page
// (v1beta1 hostPort "h:p" ⇄ v1 host, port) and counts reviews per path.
type probeWebhook struct {
	url   string
	caPEM []byte
	mu    sync.Mutex
	calls map[string]int64
}

func (w *probeWebhook) callsOf(name string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[name]
}

func (w *probeWebhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    *struct {
			UID               string           `json:"uid"`
			DesiredAPIVersion string           `json:"desiredAPIVersion"`
			Objects           []map[string]any `json:"objects"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.calls[strings.TrimPrefix(r.URL.Path, "/convert/")]++
	w.mu.Unlock()
	time.Sleep(webhookWork)
	for _, o := range review.Request.Objects {
		to := review.Request.DesiredAPIVersion
		if strings.HasSuffix(to, "/v1") {
			if hp, ok := o["hostPort"].(string); ok {
				i := strings.LastIndexByte(hp, ':')
				if i >= 0 {
					o["host"], o["port"] = hp[:i], hp[i+1:]
				}
				delete(o, "hostPort")
			}
		} else if h, ok := o["host"].(string); ok {
			p, _ := o["port"].(string)
			o["hostPort"] = h + ":" + p
			delete(o, "host")
			delete(o, "port")
		}
		o["apiVersion"] = to
	}
	out := map[string]any{"apiVersion": review.APIVersion, "kind": "ConversionReview", "response": map[string]any{
		"uid": review.Request.UID, "result": map[string]any{"status": "Success"}, "convertedObjects": review.Request.Objects,
	}}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

func startProbeWebhook() (*probeWebhook, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
	})
	if err != nil {
		return nil, err
	}
	w := &probeWebhook{url: "https://" + ln.Addr().String() + "/convert/", caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), calls: map[string]int64{}}
	go func() { _ = (&http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	return w, nil
}

const probeCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"crontabs.example.com"},
"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"crontabs","singular":"crontab","kind":"CronTab"},
"versions":[
 {"name":"v1beta1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"hostPort":{"type":"string"},"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}},
 {"name":"v1","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"string"},"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}],
"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],"clientConfig":{"url":%q,"caBundle":%q}}}}}`

func createProbeCRD(ctx context.Context, t *Target, w *probeWebhook) error {
	body := fmt.Sprintf(probeCRD, w.url+t.Name, base64.StdEncoding.EncodeToString(w.caPEM))
	code, resp, err := t.Post(ctx, CRDCollection, []byte(body))
	if err != nil {
		return err
	}
	if code != http.StatusCreated {
		return fmt.Errorf("%s: create CRD: %d %s", t.Name, code, resp)
	}
	// Served once a list at each version answers.
	deadline := time.Now().Add(30 * time.Second)
	for _, v := range []string{"v1beta1", "v1"} {
		for {
			r, err := t.Get(ctx, "/apis/example.com/"+v+"/namespaces/default/crontabs", "application/json", false)
			if err == nil && r.Status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: CRD not served at %s: %v %d", t.Name, v, err, r.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func probeObject(run string, i int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"%s-%04d","namespace":"default","labels":{"app":"bench"}},"hostPort":"ct-%04d.example.com:8080","spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/cron:v1.2.3","replicas":5}}`, run, i, i)
}

// parallel runs n calls of fn (0..n-1) from k goroutines; the first error
// is returned.
func parallel(n, k int, fn func(i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// readProbe GETs object i%500 of run probeGets times at version.
func readProbe(ctx context.Context, t *Target, run, version string) ([]time.Duration, error) {
	lat := make([]time.Duration, probeGets)
	err := parallel(probeGets, probeReaders, func(i int) error {
		path := fmt.Sprintf("/apis/example.com/%s/namespaces/default/crontabs/%s-%04d", version, run, i%probeObjects)
		start := time.Now()
		r, err := t.Get(ctx, path, "application/json", false)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("%s GET %s: %d %s", t.Name, path, r.Status, r.Body)
		}
		lat[i] = time.Since(start)
		return nil
	})
	return lat, err
}

// watchLag watches the namespace default at each version while one object is updated
// watchRate times a second for watchFor, and returns each watch's event
// lags (arrival less the time its update was sent).
func watchLag(ctx context.Context, t *Target, run string, versions []string) (map[string][]time.Duration, error) {
	// The object updated, and where the watches start.
	code, body, err := t.Post(ctx, "/apis/example.com/v1beta1/namespaces/default/crontabs", fmt.Appendf(nil, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"%s-ticker","annotations":{"seq":"0"}},"hostPort":"t.example.com:1"}`, run))
	if err != nil || code != http.StatusCreated {
		return nil, fmt.Errorf("%s: create ticker: %v %d %s", t.Name, err, code, body)
	}
	var created struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &created)
	n := int(watchFor.Seconds() * watchRate)
	sent := make([]atomic.Int64, n+1) // unix nanos of each update's send
	lags := map[string][]time.Duration{}
	var mu sync.Mutex
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, v := range versions {
		req, _ := http.NewRequestWithContext(wctx, http.MethodGet, t.URL+"/apis/example.com/"+v+"/namespaces/default/crontabs?watch=true&resourceVersion="+created.Metadata.ResourceVersion, nil)
		req.Header.Set("Authorization", "Bearer "+t.Token)
		resp, err := t.Client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("%s: watch at %s: %d", t.Name, v, resp.StatusCode)
		}
		got := 0
		wg.Go(func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				now := time.Now()
				var ev struct {
					Type   string `json:"type"`
					Object struct {
						Metadata struct {
							Annotations map[string]string `json:"annotations"`
						} `json:"metadata"`
					} `json:"object"`
				}
				if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type != "MODIFIED" {
					if ev.Type != "" && ev.Type != "MODIFIED" {
						fmt.Fprintf(os.Stderr, "%s: watch at %s: %s\n", t.Name, v, sc.Bytes())
					}
					continue
				}
				seq, err := strconv.Atoi(ev.Object.Metadata.Annotations["seq"])
				if err != nil || seq <= 0 || seq > n {
					continue
				}
				mu.Lock()
				lags[v] = append(lags[v], now.Sub(time.Unix(0, sent[seq].Load())))
				mu.Unlock()
				if got++; got == n {
					return
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // the watches are open
	tick := time.NewTicker(time.Second / watchRate)
	path := "/apis/example.com/v1beta1/namespaces/default/crontabs/" + run + "-ticker"
	for seq := 1; seq <= n; seq++ {
		<-tick.C
		sent[seq].Store(time.Now().UnixNano())
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"seq":"%d"}}}`, seq)
		// One write at a time (concurrent patches of one object may
		// conflict); a write slower than the tick delays the next.
		code, body, err := t.Send(wctx, http.MethodPatch, path, "application/merge-patch+json", patch)
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("%s: patch: %v %d %s", t.Name, err, code, body)
		}
	}
	tick.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range versions {
		if len(lags[v]) < n {
			// Counted as lost (the lag percentiles are of what arrived).
			fmt.Fprintf(os.Stderr, "%s: the watch at %s saw %d of %d updates within 10 s\n", t.Name, v, len(lags[v]), n)
		}
	}
	return lags, nil
}

var probeRun atomic.Int64

// BenchmarkConversionProbe: see the top of this file.
func BenchmarkConversionProbe(b *testing.B) {
	targets, hook := conversionServers(b)
	ctx := context.Background()
	for _, t := range targets {
		b.Run(t.Name, func(b *testing.B) {
			var stored, converted []time.Duration
			var calls int64
			var storedCPU, convertedCPU time.Duration
			lags := map[string][]time.Duration{}
			for range b.N {
				b.StopTimer()
				ns := fmt.Sprintf("p%d", probeRun.Add(1))
				err := parallel(probeObjects, 16, func(i int) error {
					code, body, err := t.Post(ctx, "/apis/example.com/v1beta1/namespaces/default/crontabs", probeObject(ns, i))
					if err == nil && code != http.StatusCreated {
						err = fmt.Errorf("%s: create: %d %s", t.Name, code, body)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				cpu0, _ := t.CPU()
				s, err := readProbe(ctx, t, ns, "v1beta1")
				if err != nil {
					b.Fatal(err)
				}
				cpu1, _ := t.CPU()
				c0 := hook.callsOf(t.Name)
				c, err := readProbe(ctx, t, ns, "v1")
				if err != nil {
					b.Fatal(err)
				}
				cpu2, _ := t.CPU()
				storedCPU += cpu1 - cpu0
				convertedCPU += cpu2 - cpu1
				calls += hook.callsOf(t.Name) - c0
				stored, converted = append(stored, s...), append(converted, c...)
				l, err := watchLag(ctx, t, ns, []string{"v1", "v1beta1"})
				if err != nil {
					b.Fatal(err)
				}
				for v, d := range l {
					lags[v] = append(lags[v], d...)
				}
			}
			b.ReportMetric(float64(calls)/float64(b.N*probeGets), "webhook-calls/GET")
			b.ReportMetric(float64(storedCPU.Microseconds())/float64(b.N*probeGets), "stored-server-cpu-µs/GET")
			b.ReportMetric(float64(convertedCPU.Microseconds())/float64(b.N*probeGets), "converted-server-cpu-µs/GET")
			b.ReportMetric(msOf(pct(stored, 0.5)), "stored-p50-ms")
			b.ReportMetric(msOf(pct(stored, 0.99)), "stored-p99-ms")
			b.ReportMetric(msOf(pct(converted, 0.5)), "converted-p50-ms")
			b.ReportMetric(msOf(pct(converted, 0.99)), "converted-p99-ms")
			b.ReportMetric(msOf(pct(converted, 0.99)-pct(stored, 0.99)), "conversion-added-p99-ms")
			updates := float64(b.N) * watchFor.Seconds() * watchRate
			b.ReportMetric(100*float64(len(lags["v1"]))/updates, "watch-converted-delivered-%")
			b.ReportMetric(msOf(pct(lags["v1"], 0.5)), "watch-converted-lag-p50-ms")
			b.ReportMetric(msOf(pct(lags["v1"], 0.99)), "watch-converted-lag-p99-ms")
			b.ReportMetric(msOf(pct(lags["v1beta1"], 0.5)), "watch-stored-lag-p50-ms")
			b.ReportMetric(msOf(pct(lags["v1beta1"], 0.99)), "watch-stored-lag-p99-ms")
		})
	}
}
