package grpcx

import (
	"context"
	"crypto/x509"
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/grpcx/pki"
)

// IdentityPrefix starts the URI SAN that names a service in its internal
// certificate: spiffe://crdplane/<service> (pki.IdentityURI).
const IdentityPrefix = pki.IdentityScheme + "://" + pki.IdentityTrustDomain + "/"

// healthPrefix: the gRPC health service answers any caller whose
// certificate the CA verified, whatever its identity (probes, tools).
const healthPrefix = "/grpc.health.v1.Health/"

// Authorizer admits the calls of the services allowed to call a service,
// identified by the verified client certificate of the connection.
type Authorizer struct {
	service string
	allowed []string
	log     *slog.Logger
}

// NewAuthorizer admits to service the calls of the callers named (service
// names, as in their identity URIs). The gRPC health service admits any
// verified caller.
func NewAuthorizer(service string, allowed []string) *Authorizer {
	return &Authorizer{service: service, allowed: slices.Clone(allowed), log: slog.Default().With("service", service)}
}

// Identity is the service a verified certificate names: the path of its
// URI SAN spiffe://crdplane/<service> ("" when it has none).
func Identity(cert *x509.Certificate) string {
	for _, u := range cert.URIs {
		if s, ok := strings.CutPrefix(u.String(), IdentityPrefix); ok && s != "" && !strings.Contains(s, "/") {
			return s
		}
	}
	return ""
}

// PeerIdentity is the identity of the verified client certificate of
// ctx's call; ok is false when the call came without TLS or without a
// client certificate the CA verified.
func PeerIdentity(ctx context.Context) (id string, cert *x509.Certificate, ok bool) {
	p, found := peer.FromContext(ctx)
	if !found {
		return "", nil, false
	}
	info, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if !isTLS || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return "", nil, false
	}
	leaf := info.State.VerifiedChains[0][0]
	return Identity(leaf), leaf, true
}

type callerKey struct{}

// Caller is the calling service the Authorizer admitted ctx's call from
// ("" when none checked it: plaintext, in-process).
func Caller(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// Authorize admits or refuses the call of method in ctx: Unauthenticated
// without a verified client certificate, PermissionDenied for a caller
// not allowed. On success the returned context carries the caller
// (Caller), also named on the call's span (crdplane.caller).
func (a *Authorizer) Authorize(ctx context.Context, method string) (context.Context, error) {
	id, cert, ok := PeerIdentity(ctx)
	if !ok {
		a.log.Warn("refused a gRPC call without a client certificate", "method", method)
		return nil, status.Errorf(codes.Unauthenticated, "%s requires mutual TLS: the call to %s came without a client certificate issued by the internal CA", a.service, method)
	}
	if strings.HasPrefix(method, healthPrefix) {
		return context.WithValue(ctx, callerKey{}, id), nil
	}
	if id == "" {
		a.log.Warn("refused a gRPC call from a certificate naming no service", "method", method, "subject", cert.Subject.String())
		return nil, status.Errorf(codes.PermissionDenied, "%s: the client certificate %q names no crdplane service (a URI SAN %s<service>)", a.service, cert.Subject.String(), IdentityPrefix)
	}
	if !slices.Contains(a.allowed, id) {
		a.log.Warn("refused a gRPC call from a caller not allowed", "caller", id, "method", method, "allowed", a.allowed)
		return nil, status.Errorf(codes.PermissionDenied, "%s does not answer %s (calling %s): %s is not among its allowed callers (%s)", a.service, id, method, id, strings.Join(a.allowed, ", "))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("crdplane.caller", id))
	}
	return context.WithValue(ctx, callerKey{}, id), nil
}

// UnaryInterceptor refuses the unary calls Authorize refuses.
func (a *Authorizer) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	// The method the call names on the wire: a handler's info may name
	// another (a service registered under a second name keeps its
	// generated handlers' FullMethod).
	method := info.FullMethod
	if m, ok := grpc.Method(ctx); ok {
		method = m
	}
	ctx, err := a.Authorize(ctx, method)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamInterceptor refuses the streams Authorize refuses.
func (a *Authorizer) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	method := info.FullMethod
	if m, ok := grpc.MethodFromServerStream(ss); ok {
		method = m
	}
	ctx, err := a.Authorize(ss.Context(), method)
	if err != nil {
		return err
	}
	return handler(srv, callerStream{ServerStream: ss, ctx: ctx})
}

type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s callerStream) Context() context.Context { return s.ctx }
