package metrics

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// panics counts the panics recovered by request handlers: gRPC servers and
// in-process calls (pkg/grpcx, service = the gRPC service's full name) and
// the gateway's HTTP handler (service = "gateway").
var panics = NewCounterVec("", "panics_total",
	"Panics recovered while handling a request (a gRPC call answered Internal, an HTTP request 500), by service.", "service")

// RecordPanic counts a panic recovered while service handled a request and
// logs it with its stack (at error level, with attrs). Call it from the
// deferred function that recovered v, so that the stack is the panicking
// goroutine's.
func RecordPanic(service string, v any, attrs ...any) {
	panics.WithLabelValues(service).Inc()
	args := append([]any{"service", service, "panic", fmt.Sprint(v), "stack", string(debug.Stack())}, attrs...)
	slog.Default().Error("recovered from a panic while handling a request", args...)
}

// Panics is the number of panics recovered so far for service (tests).
func Panics(service string) float64 {
	return counterValue(panics.WithLabelValues(service))
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
