package grpcx

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// Panic recovery.
//
// grpc-go does not recover a handler's panic: it takes the whole process
// down. Every server from NewServer, and every direct in-process call, runs
// its handlers (and interceptors) under recovery instead: the call fails
// with codes.Internal, crdplane_panics_total{service="<gRPC service>"}
// counts it and the stack is logged. Goroutines a handler starts are its
// own to protect.

// errPanic is what the caller of a call whose handler panicked receives.
func errPanic(method string) error {
	return status.Errorf(codes.Internal, "%s: the server panicked while handling the request; its logs have the details", method)
}

// recovered handles a panic value v recovered while method was handled:
// counted, logged and turned into the call's error.
func recovered(method string, v any) error {
	svc, _ := splitMethod(method)
	metrics.RecordPanic(svc, v, "method", method)
	return errPanic(method)
}

// RecoverUnary is a unary server interceptor that turns a panic of the
// rest of the chain into codes.Internal. NewServer installs it first.
func RecoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, recovered(info.FullMethod, v)
		}
	}()
	return handler(ctx, req)
}

// RecoverStream is RecoverUnary for streaming calls.
func RecoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered(info.FullMethod, v)
		}
	}()
	return handler(srv, ss)
}
