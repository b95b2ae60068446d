package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// runSeq names each test run's metrics apart (the registry is the
// process's, so -count N would otherwise see earlier runs' counts).
var runSeq atomic.Int64

func scrape(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestRegisterTwiceShares(t *testing.T) {
	sub := fmt.Sprintf("test%d", runSeq.Add(1))
	a := NewCounterVec(sub, "things_total", "Things.", "kind")
	b := NewCounterVec(sub, "things_total", "Things.", "kind")
	if a != b {
		t.Fatal("registering the same metric twice gave two collectors")
	}
	a.WithLabelValues("x").Inc()
	b.WithLabelValues("x").Inc()
	NewHistogram(sub, "batch_size", "Sizes.", SizeBuckets).Observe(3)
	NewGauge(sub, "open", "Open.").Set(2)
	body := scrape(t)
	for _, want := range []string{
		`crdplane_` + sub + `_things_total{kind="x"} 2`,
		`crdplane_` + sub + `_batch_size_bucket{le="4"} 1`,
		`crdplane_` + sub + `_open 2`,
		`process_open_fds`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a conflicting definition did not panic")
		}
	}()
	NewCounterVec(sub, "things_total", "Things.", "other")
}

func TestInstrumentHTTP(t *testing.T) {
	handler := fmt.Sprintf("test%d", runSeq.Add(1))
	h := InstrumentHTTP(handler, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the instrumented response writer is not an http.Flusher")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "ok")
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	body := scrape(t)
	for _, want := range []string{
		`crdplane_http_requests_total{code="201",handler="` + handler + `",method="post"} 1`,
		`crdplane_http_request_duration_seconds_count{handler="` + handler + `",method="post"} 1`,
		`crdplane_http_requests_in_flight{handler="` + handler + `"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
}

// TestHandlerServesLegacyRegistry: the metrics k8s.io libraries register
// on component-base's legacy registry are served beside crdplane's, its
// Go runtime and process families once only.
func TestHandlerServesLegacyRegistry(t *testing.T) {
	name := fmt.Sprintf("crdplane_test_legacy_%d_total", runSeq.Add(1))
	c := k8smetrics.NewCounter(&k8smetrics.CounterOpts{Name: name, Help: "a legacy registry counter", StabilityLevel: k8smetrics.ALPHA})
	legacyregistry.MustRegister(c)
	c.Inc()
	body := scrape(t)
	if !strings.Contains(body, name+" 1") {
		t.Errorf("the legacy registry's counter is not served:\n%.2000s", body)
	}
	if n := strings.Count(body, "# TYPE go_goroutines "); n != 1 {
		t.Errorf("go_goroutines served %d times", n)
	}
	if n := strings.Count(body, "# TYPE process_cpu_seconds_total "); n != 1 {
		t.Errorf("process_cpu_seconds_total served %d times", n)
	}
}
