package grpcx

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// rpcMetrics are the Prometheus metrics of one side (server or client) of
// every RPC: crdplane_grpc_<side>_started_total, _handled_total (with the
// status code), _handling_seconds and _in_flight, by grpc_type (unary,
// client_stream, server_stream, bidi_stream), grpc_service and grpc_method.
// A streaming RPC's handling time is its whole duration.
type rpcMetrics struct {
	started  *prometheus.CounterVec
	handled  *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

func newRPCMetrics(side string) *rpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	return &rpcMetrics{
		started: metrics.NewCounterVec("grpc", side+"_started_total",
			"gRPC calls started ("+side+" side).", labels...),
		handled: metrics.NewCounterVec("grpc", side+"_handled_total",
			"gRPC calls completed, by status code ("+side+" side).", append(labels, "grpc_code")...),
		seconds: metrics.NewHistogramVec("grpc", side+"_handling_seconds",
			"Duration of gRPC calls until their status ("+side+" side); a stream's whole duration.", nil, labels...),
		inFlight: metrics.NewGaugeVec("grpc", side+"_in_flight",
			"gRPC calls in progress (open streams included) ("+side+" side).", labels...),
	}
}

var (
	serverMetrics = newRPCMetrics("server")
	clientMetrics = newRPCMetrics("client")
)

// metricsHandler is a stats.Handler recording rpcMetrics. It is installed
// on every server from NewServer and every connection from Dial.
type metricsHandler struct{ m *rpcMetrics }

type rpcInfoKey struct{}

type rpcInfo struct {
	service, method string
	typ             string // set at Begin
}

func (h metricsHandler) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	service, method := splitMethod(info.FullMethodName)
	return context.WithValue(ctx, rpcInfoKey{}, &rpcInfo{service: service, method: method})
}

func (h metricsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	info, _ := ctx.Value(rpcInfoKey{}).(*rpcInfo)
	if info == nil {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		info.typ = rpcType(s.IsClientStream, s.IsServerStream)
		h.m.started.WithLabelValues(info.typ, info.service, info.method).Inc()
		h.m.inFlight.WithLabelValues(info.typ, info.service, info.method).Inc()
	case *stats.End:
		if info.typ == "" { // no Begin was seen
			return
		}
		h.m.inFlight.WithLabelValues(info.typ, info.service, info.method).Dec()
		h.m.handled.WithLabelValues(info.typ, info.service, info.method, status.Code(s.Error).String()).Inc()
		h.m.seconds.WithLabelValues(info.typ, info.service, info.method).Observe(s.EndTime.Sub(s.BeginTime).Seconds())
	}
}

func (metricsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (metricsHandler) HandleConn(context.Context, stats.ConnStats)                       {}

// splitMethod splits "/pkg.Service/Method".
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "unknown", full
}

func rpcType(clientStream, serverStream bool) string {
	switch {
	case clientStream && serverStream:
		return "bidi_stream"
	case clientStream:
		return "client_stream"
	case serverStream:
		return "server_stream"
	}
	return "unary"
}
