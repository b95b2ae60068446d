package upstream

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The CRD API side by side (issue 12): LIST of 1,000 CRDs and GET of one,
// in JSON and in protobuf, against upstream and crdplane started once for
// the whole run. Each benchmark reads with 8 concurrent clients and reports
// reads per second and the bytes of one answer on the wire (gzip accepted,
// as client-go does).

const seededCRDs = 1000

var (
	setupOnce sync.Once
	targets   []*Target
	stopAll   func()
	setupErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stopAll != nil {
		stopAll()
	}
	if convStop != nil {
		convStop()
	}
	os.Exit(code)
}

func servers(b *testing.B) []*Target {
	b.Helper()
	setupOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crdplane-bench-upstream-")
		if err != nil {
			setupErr = err
			return
		}
		ctx := context.Background()
		began := time.Now()
		targets, stopAll, setupErr = Start(ctx, dir)
		if setupErr != nil {
			return
		}
		setupErr = SeedCRDs(ctx, targets, seededCRDs)
		fmt.Fprintf(os.Stderr, "servers started and %d CRDs created on each in %s\n", seededCRDs, time.Since(began).Round(time.Second))
		for _, t := range targets {
			if setupErr != nil {
				return
			}
			var waited time.Duration
			waited, setupErr = t.Settle(ctx, 0.05, time.Second, 3*time.Minute)
			fmt.Fprintf(os.Stderr, "%s idle after %s\n", t.Name, waited.Round(time.Second))
		}
	})
	if setupErr != nil {
		b.Fatal(setupErr)
	}
	return targets
}

// formats are the encodings a client asks for.
var formats = []struct{ name, accept, contentType string }{
	{"json", "application/json", "application/json"},
	{"protobuf", "application/vnd.kubernetes.protobuf, */*", "application/vnd.kubernetes.protobuf"},
}

func benchRead(b *testing.B, path string) {
	for _, t := range servers(b) {
		for _, f := range formats {
			b.Run(t.Name+"/"+f.name, func(b *testing.B) {
				ctx := context.Background()
				first, err := t.Get(ctx, path, f.accept, false)
				if err != nil {
					b.Fatal(err)
				}
				if first.Status != http.StatusOK || !strings.HasPrefix(first.ContentType, f.contentType) {
					b.Fatalf("%s %s: %d %s", t.Name, path, first.Status, first.ContentType)
				}
				b.SetParallelism(4) // 8 clients on 2 cores
				b.ResetTimer()
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						r, err := t.Get(ctx, path, f.accept, false)
						if err != nil || r.Status != http.StatusOK {
							b.Errorf("%s: %v %d", t.Name, err, r.Status)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
				b.ReportMetric(float64(first.WireBytes), "wire-B/read")
			})
		}
	}
}

// BenchmarkCRDList1000 lists the 1,000 seeded CRDs in one page.
func BenchmarkCRDList1000(b *testing.B) {
	benchRead(b, CRDCollection+"?labelSelector=bench%3Dcrds")
}

// BenchmarkCRDGet reads one CRD.
func BenchmarkCRDGet(b *testing.B) {
	benchRead(b, CRDCollection+"/widget7s.bench.example.com")
}
