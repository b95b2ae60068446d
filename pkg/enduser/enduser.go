// Package enduser carries the user a request was authenticated as (by the
// gateway, the only service clients reach) from the gateway to the
// services it calls, in gRPC metadata, so that their traces and logs name
// the user. It is information, not a credential: the services do not
// authorize with it. Over internal mutual TLS (package grpcx) a server
// reads it only from callers its allow-list admitted, after the check.
package enduser

import (
	"context"
	"log/slog"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Metadata keys. Values are URL query escaped (metadata values are ASCII).
const (
	// KeyName is the user's name.
	KeyName = "crdplane-user"
	// KeyUID is the user's uid, when it has one.
	KeyUID = "crdplane-user-uid"
	// KeyGroups holds one value per group.
	KeyGroups = "crdplane-user-groups"
	// KeyExtra holds one "key=value" per extra value.
	KeyExtra = "crdplane-user-extra"
)

// User is who a request is from, as Kubernetes' user.Info describes it.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Empty reports whether u names no one.
func (u User) Empty() bool { return u.Name == "" }

// NewOutgoingContext returns ctx whose outgoing gRPC calls carry u in
// their metadata (replacing any user ctx carried).
func NewOutgoingContext(ctx context.Context, u User) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	for _, k := range []string{KeyName, KeyUID, KeyGroups, KeyExtra} {
		delete(md, k)
	}
	md.Set(KeyName, url.QueryEscape(u.Name))
	if u.UID != "" {
		md.Set(KeyUID, url.QueryEscape(u.UID))
	}
	for _, g := range u.Groups {
		md.Append(KeyGroups, url.QueryEscape(g))
	}
	for k, vs := range u.Extra {
		for _, v := range vs {
			md.Append(KeyExtra, url.QueryEscape(k)+"="+url.QueryEscape(v))
		}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// FromIncomingContext is the user an incoming gRPC call carries (Empty when
// none).
func FromIncomingContext(ctx context.Context) User {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return User{}
	}
	var u User
	u.Name = first(md.Get(KeyName))
	u.UID = first(md.Get(KeyUID))
	for _, g := range md.Get(KeyGroups) {
		u.Groups = append(u.Groups, unescape(g))
	}
	for _, kv := range md.Get(KeyExtra) {
		k, v, _ := strings.Cut(kv, "=")
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[unescape(k)] = append(u.Extra[unescape(k)], unescape(v))
	}
	return u
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return unescape(vs[0])
}

func unescape(s string) string {
	if v, err := url.QueryUnescape(s); err == nil {
		return v
	}
	return s
}

// SpanAttributes are the attributes naming u on a span (OpenTelemetry's
// enduser.id, the groups and, when it has one, the uid).
func SpanAttributes(u User) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("enduser.id", u.Name), attribute.StringSlice("crdplane.user.groups", u.Groups)}
	if u.UID != "" {
		attrs = append(attrs, attribute.String("crdplane.user.uid", u.UID))
	}
	return attrs
}

// UnaryServerInterceptor names the calling user on the call's span.
func UnaryServerInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	annotate(ctx)
	return handler(ctx, req)
}

// StreamServerInterceptor names the calling user on the stream's span.
func StreamServerInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	annotate(ss.Context())
	return handler(srv, ss)
}

func annotate(ctx context.Context) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if u := FromIncomingContext(ctx); !u.Empty() {
		span.SetAttributes(SpanAttributes(u)...)
	}
}

// LogAttr is u as a log attribute: a group "user" with its name, uid and
// groups.
func LogAttr(u User) slog.Attr {
	attrs := []any{slog.String("name", u.Name)}
	if u.UID != "" {
		attrs = append(attrs, slog.String("uid", u.UID))
	}
	if len(u.Groups) > 0 {
		attrs = append(attrs, slog.Any("groups", u.Groups))
	}
	return slog.Group("user", attrs...)
}

// Propagate returns ctx whose outgoing calls carry the user of its
// incoming call, when it has one and ctx sets no user of its own: a
// service calling another while serving a user's request passes the user
// on (package grpcx does it on every connection).
func Propagate(ctx context.Context) context.Context {
	names := metadata.ValueFromIncomingContext(ctx, KeyName)
	if len(names) == 0 {
		return ctx
	}
	if out, ok := metadata.FromOutgoingContext(ctx); ok && len(out.Get(KeyName)) > 0 {
		return ctx
	}
	return NewOutgoingContext(ctx, FromIncomingContext(ctx))
}

// UnaryClientInterceptor passes the incoming call's user on (Propagate).
func UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(Propagate(ctx), method, req, reply, cc, opts...)
}

// StreamClientInterceptor passes the incoming call's user on (Propagate).
func StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(Propagate(ctx), desc, cc, method, opts...)
}
