package gateway

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// BenchmarkCRDList measures a LIST of 1,000 CRDs through the gateway and
// its real backends, in JSON and in protobuf, gzip accepted as client-go
// does (bench/upstream compares the same reads with upstream).
func BenchmarkCRDList(b *testing.B) {
	g := newTestGateway(b)
	const n = 1000
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				crd := pbCRDJSON(fmt.Sprintf("widget%ds.bench.example.com", i))
				crd["spec"].(map[string]any)["names"].(map[string]any)["kind"] = fmt.Sprintf("Widget%d", i)
				if resp, body := g.do("POST", crdsPath, crd); resp.StatusCode != http.StatusCreated {
					b.Errorf("create %d: %d %s", i, resp.StatusCode, body)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, f := range []struct{ name, accept string }{{"json", "application/json"}, {"protobuf", pbType + ", */*"}} {
		b.Run(f.name, func(b *testing.B) {
			resp, body := g.do("GET", crdsPath+"?labelSelector=pb%3Dyes", nil, "Accept", f.accept, "Accept-Encoding", "gzip")
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("%d %s", resp.StatusCode, body)
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for b.Loop() {
				g.do("GET", crdsPath+"?labelSelector=pb%3Dyes", nil, "Accept", f.accept, "Accept-Encoding", "gzip")
			}
		})
	}
}
