package grpcx

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/enduser"
)

// logFaultsUnary logs a unary call that fails with a server fault.
func logFaultsUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		logFault(ctx, info.FullMethod, err)
	}
	return resp, err
}

// logFaultsStream logs a stream that ends with a server fault.
func logFaultsStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	if err != nil {
		logFault(ss.Context(), info.FullMethod, err)
	}
	return err
}

// logFault logs err when it is the server's fault (Internal, Unknown,
// DataLoss: what the caller cannot correct), with the calling service and
// the user the call was made for, so that the log line leads to the
// request (the user also names the call's span).
func logFault(ctx context.Context, method string, err error) {
	switch status.Code(err) {
	case codes.Internal, codes.Unknown, codes.DataLoss:
	default:
		return
	}
	attrs := []any{"method", method, "code", status.Code(err).String(), "err", err}
	if c := Caller(ctx); c != "" {
		attrs = append(attrs, "caller", c)
	}
	if u := enduser.FromIncomingContext(ctx); !u.Empty() {
		attrs = append(attrs, enduser.LogAttr(u))
	}
	slog.ErrorContext(ctx, "gRPC call failed", attrs...)
}
