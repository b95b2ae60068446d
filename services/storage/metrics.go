package storage

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// The storage service's Prometheus metrics (its gRPC server metrics come
// from pkg/grpcx).
var (
	watchesStarted = metrics.NewCounter("storage", "watches_started_total",
		"StorageService.Watch streams started.")
	watchesOpen = metrics.NewGauge("storage", "watches",
		"StorageService.Watch streams open.")
	etcdWatches = metrics.NewGaugeVec("storage", "etcd_watches",
		"etcd watches open, by kind: shared (the watch cache, one per resource) or private.", "kind")
	etcdRequests = metrics.NewHistogramVec("storage", "etcd_request_duration_seconds",
		"Latency of etcd requests (each attempt), by etcd cluster (main, override-N), etcd method and gRPC status code.", nil, "backend", "method", "code")
	etcdBackendInfo = metrics.NewGaugeVec("storage", "etcd_backend_info",
		"The etcd clusters of --etcd-servers-overrides (1 each): backend (override-N, the name in etcd_request_duration_seconds) and endpoints.", "backend", "endpoints")
)

// trackWatch counts a Watch stream; call the result when it ends.
func trackWatch() (done func()) {
	watchesStarted.Inc()
	watchesOpen.Inc()
	return watchesOpen.Dec
}

// trackHub counts an etcd watch of the watch cache (shared) or of one
// watch (private); call the result when it ends.
func trackHub(shared bool) (done func()) {
	g := etcdWatches.WithLabelValues("private")
	if shared {
		g = etcdWatches.WithLabelValues("shared")
	}
	g.Inc()
	return g.Dec
}

// etcdMetricsDialOption times the unary etcd calls of the client
// (KV Range/Txn/DeleteRange, ...): it runs inside the client's retry
// interceptor, so each attempt is observed.
func etcdMetricsDialOption(backend string) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		etcdRequests.WithLabelValues(backend, etcdMethod(method), status.Code(err).String()).Observe(time.Since(start).Seconds())
		return err
	})
}

// etcdMethod shortens "/etcdserverpb.KV/Range" to "KV/Range".
func etcdMethod(full string) string {
	full = strings.TrimPrefix(full, "/")
	if i := strings.IndexByte(full, '.'); i >= 0 {
		return full[i+1:]
	}
	return full
}
