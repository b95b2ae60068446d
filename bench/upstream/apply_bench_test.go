package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Server-side apply and managedFields side by side (issue 14): apply that
// creates, apply that changes an object, an update (PUT) of an object with
// managedFields, and a LIST of 2,000 objects of about 1 KiB carrying their
// managedFields. Writes go to Widget0 (seeded with the CRDs: a dozen
// fields, a list-map, defaults), 8 concurrent clients on distinct objects.
// Each reports ops/s and the server process's CPU time per op (user +
// system from /proc, its embedded etcd included).

const (
	widgets   = "/apis/bench.example.com/v1/namespaces/%s/widget0s"
	applyType = "application/apply-patch+yaml"
)

var runID = fmt.Sprintf("r%d", time.Now().UnixNano()%1e6)

// nsSeq makes every benchmark run's namespace new (-count repeats b.N).
var nsSeq atomic.Int64

// freshNS is a namespace no earlier run of this process wrote to.
func freshNS(prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, runID, nsSeq.Add(1))
}

// widgetBody is a Widget0 of about 1 KiB (n varies the replicas).
func widgetBody(name string, n int) []byte {
	labels := map[string]string{}
	for i := range 8 {
		labels[fmt.Sprintf("label-%d", i)] = strings.Repeat("v", 40)
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "bench.example.com/v1", "kind": "Widget0",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"app": "bench"}},
		"spec": map[string]any{
			"replicas": n % 50, "image": "registry.example.com/team/app:" + strings.Repeat("1", 64), "mode": "Safe",
			"ports":  []any{map[string]any{"name": "http", "port": 80}, map[string]any{"name": "https", "port": 443}},
			"labels": labels, "schedule": "*/5 * * * *",
		},
	})
	return b
}

// waitServing retries a request until the freshly seeded CRD serves.
func waitServing(b *testing.B, t *Target, ns string) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body, err := t.Send(context.Background(), http.MethodGet, fmt.Sprintf(widgets, ns), "", nil)
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: widget0s not served: %d %v %s", t.Name, code, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchWrite runs op from 8 clients (worker w, its i-th op) and reports
// ops/s and server CPU per op.
func benchWrite(b *testing.B, t *Target, op func(ctx context.Context, w, i int) error) {
	ctx := context.Background()
	var workers atomic.Int64
	cpu0, err := t.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4) // 8 clients on 2 cores
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := int(workers.Add(1))
		for i := 0; pb.Next(); i++ {
			if err := op(ctx, w, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	cpu1, err := t.CPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

func expect(t *Target, code int, want int, body []byte, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", t.Name, what, err)
	}
	if code != want {
		return fmt.Errorf("%s %s: %d %s", t.Name, what, code, body)
	}
	return nil
}

// BenchmarkApplyCreate applies objects that do not exist yet (201).
func BenchmarkApplyCreate(b *testing.B) {
	for _, t := range servers(b) {
		b.Run(t.Name, func(b *testing.B) {
			ns := freshNS("applycreate")
			waitServing(b, t, ns)
			benchWrite(b, t, func(ctx context.Context, w, i int) error {
				name := fmt.Sprintf("w%d-%d", w, i)
				code, body, err := t.Send(ctx, http.MethodPatch, fmt.Sprintf(widgets, ns)+"/"+name+"?fieldManager=bench", applyType, widgetBody(name, i))
				return expect(t, code, http.StatusCreated, body, err, "apply create")
			})
		})
	}
}

// BenchmarkApplyUpdate applies a change of spec.replicas to an existing
// object (one per client), which the apply's manager owns.
func BenchmarkApplyUpdate(b *testing.B) {
	for _, t := range servers(b) {
		b.Run(t.Name, func(b *testing.B) {
			ns := freshNS("applyupdate")
			waitServing(b, t, ns)
			benchWrite(b, t, func(ctx context.Context, w, i int) error {
				name := fmt.Sprintf("w%d", w)
				want := http.StatusOK
				if i == 0 {
					want = http.StatusCreated
				}
				code, body, err := t.Send(ctx, http.MethodPatch, fmt.Sprintf(widgets, ns)+"/"+name+"?fieldManager=bench", applyType, widgetBody(name, i+1))
				return expect(t, code, want, body, err, "apply update")
			})
		})
	}
}

// BenchmarkUpdateManaged updates (PUT at the last resourceVersion) an
// object with managedFields, changing spec.replicas: the manager's Update
// entry is recomputed on every write.
func BenchmarkUpdateManaged(b *testing.B) {
	for _, t := range servers(b) {
		b.Run(t.Name, func(b *testing.B) {
			ns := freshNS("update")
			waitServing(b, t, ns)
			rvs := make([]string, 64)
			benchWrite(b, t, func(ctx context.Context, w, i int) error {
				name := fmt.Sprintf("w%d", w)
				if i == 0 {
					code, body, err := t.Send(ctx, http.MethodPost, fmt.Sprintf(widgets, ns)+"?fieldManager=creator", "application/json", widgetBody(name, 0))
					if err := expect(t, code, http.StatusCreated, body, err, "create"); err != nil {
						return err
					}
					rvs[w] = resourceVersionOf(body)
				}
				var obj map[string]any
				_ = json.Unmarshal(widgetBody(name, i+1), &obj)
				obj["metadata"].(map[string]any)["resourceVersion"] = rvs[w]
				data, _ := json.Marshal(obj)
				code, body, err := t.Send(ctx, http.MethodPut, fmt.Sprintf(widgets, ns)+"/"+name+"?fieldManager=editor", "application/json", data)
				if err := expect(t, code, http.StatusOK, body, err, "update"); err != nil {
					return err
				}
				rvs[w] = resourceVersionOf(body)
				return nil
			})
		})
	}
}

func resourceVersionOf(body []byte) string {
	var o struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &o)
	return o.Metadata.ResourceVersion
}

// BenchmarkList2000Managed lists 2,000 objects of about 1 KiB, each
// created by apply and changed by a merge patch (two managedFields
// entries), in JSON; body-B is the decoded size of one answer (compare
// with upstream's: the same objects, the same bytes but for uids, times
// and resourceVersions).
func BenchmarkList2000Managed(b *testing.B) {
	const n = 2000
	for _, t := range servers(b) {
		b.Run(t.Name, func(b *testing.B) {
			ns := "list-" + runID
			waitServing(b, t, ns)
			ctx := context.Background()
			code, body, err := t.Send(ctx, http.MethodGet, fmt.Sprintf(widgets, ns)+"?limit=1", "", nil)
			if err != nil || code != http.StatusOK {
				b.Fatal(code, err)
			}
			if !strings.Contains(string(body), `"items":[{`) {
				seed := make(chan int)
				errs := make(chan error, 8)
				for range 8 {
					go func() {
						for i := range seed {
							name := fmt.Sprintf("o%04d", i)
							code, body, err := t.Send(ctx, http.MethodPatch, fmt.Sprintf(widgets, ns)+"/"+name+"?fieldManager=seed", applyType, widgetBody(name, i))
							if err := expect(t, code, http.StatusCreated, body, err, "seed"); err != nil {
								errs <- err
								continue
							}
							code, body, err = t.Send(ctx, http.MethodPatch, fmt.Sprintf(widgets, ns)+"/"+name+"?fieldManager=patcher", "application/merge-patch+json", []byte(`{"metadata":{"annotations":{"note":"patched"}}}`))
							if err := expect(t, code, http.StatusOK, body, err, "seed patch"); err != nil {
								errs <- err
							}
						}
						errs <- nil
					}()
				}
				for i := range n {
					seed <- i
				}
				close(seed)
				for range 8 {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			path := fmt.Sprintf(widgets, ns)
			first, err := t.Get(ctx, path, "application/json", true)
			if err != nil || first.Status != http.StatusOK || !strings.Contains(string(first.Body), `"managedFields"`) {
				b.Fatalf("%s list: %d %v", t.Name, first.Status, err)
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				if r, err := t.Get(ctx, path, "application/json", false); err != nil || r.Status != http.StatusOK {
					b.Fatalf("%s list: %v", t.Name, err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/list")
			b.ReportMetric(float64(len(first.Body)), "body-B")
			b.ReportMetric(float64(first.WireBytes), "wire-B")
		})
	}
}
