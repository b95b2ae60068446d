package httpx

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// gRPC metadata keys the HTTP edge and KubeAPIService share. HTTP headers
// reach the service under these keys; the service answers with response
// header metadata that the edge maps back onto HTTP.
const (
	// mdAccept carries the request's Accept header.
	mdAccept = "x-kube-accept"
	// mdContentType carries the request's Content-Type header
	// ("content-type" itself is reserved by gRPC).
	mdContentType = "x-kube-content-type"
	// mdUserAgent carries the request's User-Agent.
	mdUserAgent = "x-kube-user-agent"
	// MDHost carries the Host the client used (grpc-gateway sets it).
	MDHost = "x-forwarded-host"
	// mdQuery carries the request's raw query (parameters the rpc
	// messages do not declare, such as includeObject); the edge sets it
	// from the URL as headerQuery.
	mdQuery = "x-kube-query"
	// MDHTTPCode is response header metadata: the HTTP status to answer with
	// when it is not 200.
	MDHTTPCode = "x-http-code"
	// MDWarning is response header metadata: one HTTP Warning header value
	// per entry.
	MDWarning = "warning"
	// MDETag and MDCacheControl are response header metadata copied to
	// the ETag and Cache-Control headers (OpenAPI documents).
	MDETag         = "etag"
	MDCacheControl = "cache-control"
	// MDVary is response header metadata copied to Vary (aggregated
	// discovery varies by Accept, as upstream's handler says).
	MDVary = "vary"
	// MDNoContentType is response header metadata: answer without a
	// Content-Type header (an empty body that upstream sends bare).
	MDNoContentType = "x-no-content-type"
	// MDLocation and MDExpires are response header metadata copied to
	// Location (a redirect) and Expires (OpenAPI documents at their hash).
	MDLocation = "location"
	MDExpires  = "expires"
	// MDLastModified is response header metadata copied to Last-Modified
	// (OpenAPI documents).
	MDLastModified = "last-modified"
	// The conditional request headers, forwarded under their own names
	// (the OpenAPI documents answer them as net/http's ServeContent).
	MDIfMatch           = "if-match"
	MDIfNoneMatch       = "if-none-match"
	MDIfModifiedSince   = "if-modified-since"
	MDIfUnmodifiedSince = "if-unmodified-since"
)

// IncomingHeader picks the HTTP headers forwarded to KubeAPIService as gRPC
// metadata.
func IncomingHeader(key string) (string, bool) {
	switch textproto.CanonicalMIMEHeaderKey(key) {
	case "Accept":
		return mdAccept, true
	case "Content-Type":
		return mdContentType, true
	case "User-Agent":
		return mdUserAgent, true
	case headerQuery:
		return mdQuery, true
	case "If-None-Match":
		return MDIfNoneMatch, true
	case "If-Match":
		return MDIfMatch, true
	case "If-Modified-Since":
		return MDIfModifiedSince, true
	case "If-Unmodified-Since":
		return MDIfUnmodifiedSince, true
	}
	return "", false
}

// OutgoingHeader maps response header metadata onto HTTP headers: warnings
// become Warning headers; everything else (x-http-code, gRPC internals) is
// dropped.
func OutgoingHeader(key string) (string, bool) {
	switch strings.ToLower(key) {
	case MDWarning:
		return "Warning", true
	case MDETag:
		return "ETag", true
	case MDCacheControl:
		return "Cache-Control", true
	case MDVary:
		return "Vary", true
	case MDLocation:
		return "Location", true
	case MDExpires:
		return "Expires", true
	case MDLastModified:
		return "Last-Modified", true
	}
	return "", false
}

// NoTrailers drops every trailer: Kubernetes responses carry none.
func NoTrailers(string) (string, bool) { return "", false }

// ForwardHTTPCode sets the HTTP status from the x-http-code response header
// metadata (201 on create, ...). It runs before the body is written.
func ForwardHTTPCode(ctx context.Context, w http.ResponseWriter, resp proto.Message) error {
	if resp == nil {
		return nil
	}
	md, ok := runtime.ServerMetadataFromContext(ctx)
	if !ok {
		return nil
	}
	if len(md.HeaderMD.Get(MDNoContentType)) > 0 {
		w.Header().Del("Content-Type")
	}
	if cc := md.HeaderMD.Get(MDCacheControl); len(cc) > 0 {
		// The handler's own replaces the edge's default (grpc-gateway
		// adds metadata headers beside what is already set).
		w.Header().Set("Cache-Control", cc[len(cc)-1])
	}
	vals := md.HeaderMD.Get(MDHTTPCode)
	if len(vals) == 0 {
		return nil
	}
	code, err := strconv.Atoi(vals[0])
	if err != nil || code < 100 || code > 599 {
		return fmt.Errorf("invalid %s %q", MDHTTPCode, vals[0])
	}
	w.WriteHeader(code)
	return nil
}

// headerQuery is the internal header the edge copies the raw query into
// (a client's own is dropped).
const headerQuery = "X-Crdplane-Query"

// RequestMeta is what KubeAPIService learns about the HTTP request.
type RequestMeta struct {
	Accept      string
	ContentType string
	UserAgent   string
	Host        string
	RawQuery    string
}

// query is the request's query parameters.
func (m RequestMeta) Query() url.Values {
	q, _ := url.ParseQuery(m.RawQuery)
	return q
}

func RequestMetaFrom(ctx context.Context) RequestMeta {
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return RequestMeta{
		Accept:      strings.Join(md.Get(mdAccept), ","),
		ContentType: first(mdContentType),
		UserAgent:   first(mdUserAgent),
		Host:        first(MDHost),
		RawQuery:    first(mdQuery),
	}
}

// SetHTTPCode makes the edge answer with code instead of 200.
func SetHTTPCode(ctx context.Context, code int) {
	if code == http.StatusOK {
		return
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(MDHTTPCode, strconv.Itoa(code)))
}

// WarningHeader formats a warning as kube-apiserver does: 299 - "<text>".
func WarningHeader(text string) string {
	h, err := utilnet.NewWarningHeader(299, "-", sanitizeWarning(text))
	if err != nil {
		return "299 - " + strconv.Quote(sanitizeWarning(text))
	}
	return h
}

// sanitizeWarning keeps a warning a valid header value: printable ASCII
// only (gRPC metadata and HTTP headers both require it).
func sanitizeWarning(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// AddWarnings queues Warning headers for the response.
func AddWarnings(ctx context.Context, warnings ...string) {
	if len(warnings) == 0 {
		return
	}
	kv := make([]string, 0, 2*len(warnings))
	for _, w := range warnings {
		kv = append(kv, MDWarning, WarningHeader(w))
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(kv...))
}
