// Package metrics is crdplane's Prometheus instrumentation: one registry per
// process (served at /metrics on every service's HTTP listener by
// pkg/app), constructors that register on it, and the HTTP instrumentation
// the gateway uses. The gRPC metrics of every server and client built by
// pkg/grpcx are registered here too.
//
// Metric names are crdplane_<subsystem>_<name>; the subsystem is the service
// or component ("validator", "converter", "storage", "grpc", "http").
//
//	var cacheRequests = metrics.NewCounterVec("validator", "schema_cache_requests_total",
//		"Compiled-schema cache lookups by result (hit or miss).", "result")
//	...
//	cacheRequests.WithLabelValues("hit").Inc()
package metrics

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Namespace prefixes every crdplane metric name.
const Namespace = "crdplane"

// Buckets for the usual kinds of observations.
var (
	// LatencyBuckets are request latencies in seconds, 0.5ms to ~33s.
	LatencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)
	// SizeBuckets are counts (batch sizes, list lengths): 1 to 4096.
	SizeBuckets = prometheus.ExponentialBuckets(1, 2, 13)
)

// Registry holds every crdplane metric of the process, the Go runtime and
// process collectors included.
var Registry = newRegistry()

func newRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return r
}

// Handler serves the registry in the Prometheus exposition formats, and
// beside it the metrics k8s.io libraries register on component-base's
// legacy registry (kube-apiserver's own, such as
// apiserver_egress_dialer_* of the egress selector's dialers), but for
// its Go runtime and process collectors, which Registry has already.
func Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{Registry, withoutRuntime{legacyregistry.DefaultGatherer}}, promhttp.HandlerOpts{Registry: Registry})
}

// withoutRuntime leaves out a gatherer's go_* and process_* families.
type withoutRuntime struct{ g prometheus.Gatherer }

func (w withoutRuntime) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := w.g.Gather()
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool {
		return strings.HasPrefix(mf.GetName(), "go_") || strings.HasPrefix(mf.GetName(), "process_")
	}), err
}

// Register registers c on Registry and returns it. When an identical
// collector is already registered (a package set up twice, as in tests or
// the all-in-one process) it returns the registered one instead, so metrics
// are shared rather than panicking. Any other registration error panics:
// metric definitions are static, so it is a programming error.
func Register[C prometheus.Collector](c C) C {
	if err := Registry.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// NewCounterVec registers a counter crdplane_<subsystem>_<name> with the
// given labels.
func NewCounterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return Register(prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
	}, labels))
}

// NewCounter registers a counter without labels.
func NewCounter(subsystem, name, help string) prometheus.Counter {
	return NewCounterVec(subsystem, name, help).WithLabelValues()
}

// NewGaugeVec registers a gauge crdplane_<subsystem>_<name> with the given
// labels.
func NewGaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
	}, labels))
}

// NewGauge registers a gauge without labels.
func NewGauge(subsystem, name, help string) prometheus.Gauge {
	return NewGaugeVec(subsystem, name, help).WithLabelValues()
}

// NewHistogramVec registers a histogram crdplane_<subsystem>_<name> with
// the given buckets (nil: LatencyBuckets) and labels.
func NewHistogramVec(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	if buckets == nil {
		buckets = LatencyBuckets
	}
	return Register(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets,
	}, labels))
}

// NewHistogram registers a histogram without labels.
func NewHistogram(subsystem, name, help string, buckets []float64) prometheus.Observer {
	return NewHistogramVec(subsystem, name, help, buckets).WithLabelValues()
}

var (
	httpRequests = NewCounterVec("http", "requests_total",
		"HTTP requests served, by handler, method and status code.", "handler", "method", "code")
	httpDuration = NewHistogramVec("http", "request_duration_seconds",
		"Time to serve an HTTP request (a watch: its whole duration), by handler and method.", nil, "handler", "method")
	httpInFlight = NewGaugeVec("http", "requests_in_flight",
		"HTTP requests being served (open watches included), by handler.", "handler")
)

// InstrumentHTTP counts and times the requests h serves under the label
// handler="<name>" (crdplane_http_requests_total,
// crdplane_http_request_duration_seconds, crdplane_http_requests_in_flight).
// The response writer keeps http.Flusher and the like, so streaming
// responses (watches) work through it.
func InstrumentHTTP(name string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"handler": name}
	h = promhttp.InstrumentHandlerDuration(httpDuration.MustCurryWith(labels), h)
	h = promhttp.InstrumentHandlerCounter(httpRequests.MustCurryWith(labels), h)
	return promhttp.InstrumentHandlerInFlight(httpInFlight.With(labels), h)
}
