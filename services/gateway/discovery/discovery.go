// Package discovery serves the gateway's discovery, OpenAPI and /version
// routes of KubeAPIService.
package discovery

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kubewire"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Server serves what tells clients what the API is: discovery (/api,
// /apis, /apis/<g>[/<v>]), the OpenAPI v3 documents and /version. The
// documents are the registry's; the gateway passes them on with their
// ETags.
type Server struct {
	Registry registryv1.RegistryServiceClient
	OpenAPI  registryv1.OpenAPIServiceClient
}

// GetCoreDiscovery serves /api (APIVersions naming v1, or the core group's
// aggregated discovery when asked for) and /api/v1 (the namespaces), the
// documents but the legacy /api the registry's.
func (s *Server) GetCoreDiscovery(ctx context.Context, req *gatewayv1.GetCoreDiscoveryRequest) (*httpbody.HttpBody, error) {
	if req.GetVersion() != "" {
		return s.registryDocument(ctx, req.GetVersion(), kubewire.TargetBuiltinDiscovery)
	}
	if out, ok := protobufOutput(ctx, kubewire.TargetRootDiscovery); ok && out.Transform == kubewire.TransformAPIGroupDiscoveryList {
		return s.registryDocument(ctx, "", kubewire.TargetRootDiscovery)
	}
	if _, _, ok := aggregatedJSON(httpx.RequestMetaFrom(ctx).Accept); ok {
		return s.registryDocument(ctx, "", kubewire.TargetRootDiscovery)
	}
	host := httpx.RequestMetaFrom(ctx).Host
	if host == "" {
		host = "localhost"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "443")
	}
	doc := metav1.APIVersions{
		TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
		Versions:                   []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: host}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, httpx.ToGRPC(err)
	}
	if out, ok := protobufOutput(ctx, kubewire.TargetRootDiscovery); ok && out.Transform == kubewire.TransformNone {
		pb, err := httpx.Wire().Object(b)
		if err != nil {
			return nil, httpx.ToGRPC(err)
		}
		return &httpbody.HttpBody{ContentType: kubewire.ContentTypeProtobuf, Data: pb}, nil
	}
	return &httpbody.HttpBody{ContentType: httpx.ContentTypeJSON, Data: append(b, '\n')}, nil
}

// aggregatedJSON reports whether a JSON Accept asks for aggregated
// discovery (what the registry answers /api with).
func aggregatedJSON(accept string) (string, string, bool) {
	out, err := kubewire.Negotiate(kubewire.Request{Accept: accept}, kubewire.TargetRootDiscovery)
	if err != nil || out.Transform != kubewire.TransformAPIGroupDiscoveryList {
		return "", "", false
	}
	return out.MediaType, out.TransformGV.Version, true
}

// registryDocument serves the core group's documents from the registry:
// /api aggregated (version "") or /api/<version>.
func (s *Server) registryDocument(ctx context.Context, version string, target kubewire.Target) (*httpbody.HttpBody, error) {
	accept := httpx.RequestMetaFrom(ctx).Accept
	out, pb := protobufOutput(ctx, target)
	if pb {
		accept = httpx.ContentTypeJSON
		if out.Transform == kubewire.TransformAPIGroupDiscoveryList {
			accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		}
	}
	resp, err := s.Registry.GetDiscovery(ctx, &registryv1.GetDiscoveryRequest{Version: version, Accept: accept, Core: true})
	if err != nil {
		return nil, httpx.ToGRPC(err)
	}
	return s.discoveryReply(ctx, resp, out, pb)
}

// GetDiscovery serves /apis, /apis/<g> and /apis/<g>/<v> from the
// registry's discovery documents (legacy or aggregated, by Accept).
func (s *Server) GetDiscovery(ctx context.Context, req *gatewayv1.GetDiscoveryRequest) (*httpbody.HttpBody, error) {
	accept := httpx.RequestMetaFrom(ctx).Accept
	// Protobuf is encoded here from the registry's JSON document.
	out, pb := protobufOutput(ctx, discoveryTarget(req.GetGroup()))
	if pb {
		accept = httpx.ContentTypeJSON
		if out.Transform == kubewire.TransformAPIGroupDiscoveryList {
			accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		}
	}
	resp, err := s.Registry.GetDiscovery(ctx, &registryv1.GetDiscoveryRequest{
		Group:   req.GetGroup(),
		Version: req.GetVersion(),
		Accept:  accept,
	})
	if err != nil {
		return nil, httpx.ToGRPC(err)
	}
	return s.discoveryReply(ctx, resp, out, pb)
}

// discoveryReply passes a registry document on: encoded to protobuf when
// that was negotiated, with its ETag (304 for a client that has it).
func (s *Server) discoveryReply(ctx context.Context, resp *registryv1.GetDiscoveryResponse, out kubewire.Output, pb bool) (*httpbody.HttpBody, error) {
	var err error
	ct := resp.GetContentType()
	if ct == "" {
		ct = httpx.ContentTypeJSON
	}
	body := resp.GetBody()
	if pb {
		if body, err = httpx.Wire().Object(body); err != nil {
			return nil, httpx.ToGRPC(err)
		}
		ct = kubewire.ContentTypeProtobuf
		if out.Transform == kubewire.TransformAPIGroupDiscoveryList {
			ct += aggregatedParams
		}
	}
	if strings.HasSuffix(ct, aggregatedParams) {
		// Upstream's aggregated discovery handler answers in either
		// encoding with Vary: Accept (the same path serves the legacy
		// APIGroupList).
		// It serves with its ETag and `Cache-Control: public`, 304s
		// included.
		_ = grpc.SetHeader(ctx, metadata.Pairs(httpx.MDVary, "Accept", httpx.MDCacheControl, "public"))
	}
	// The registry's ETag; a client that has the document gets a 304.
	if etag := resp.GetEtag(); etag != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs(httpx.MDETag, etag))
		if inm := metadata.ValueFromIncomingContext(ctx, httpx.MDIfNoneMatch); len(inm) > 0 && inm[0] == etag {
			httpx.SetHTTPCode(ctx, http.StatusNotModified)
			return &httpbody.HttpBody{ContentType: ct}, nil
		}
	}
	return &httpbody.HttpBody{ContentType: ct, Data: body}, nil
}

// aggregatedParams are the media type parameters of aggregated discovery
// (apidiscovery.k8s.io/v2 APIGroupDiscoveryList), JSON or protobuf.
const aggregatedParams = ";g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// discoveryTarget is the endpoint kind of /apis (group ""), of the
// built-in groups (/apis/apiextensions.k8s.io[/v1],
// /apis/authorization.k8s.io[/v1]) and of the custom resources' groups.
func discoveryTarget(group string) kubewire.Target {
	switch group {
	case "":
		return kubewire.TargetRootDiscovery
	case "apiextensions.k8s.io", "authentication.k8s.io", "authorization.k8s.io":
		return kubewire.TargetBuiltinDiscovery
	}
	return kubewire.TargetDiscovery
}

// protobufOutput reports whether a discovery request negotiates protobuf
// (anything else is the registry's to negotiate, as it was).
func protobufOutput(ctx context.Context, t kubewire.Target) (kubewire.Output, bool) {
	rm := httpx.RequestMetaFrom(ctx)
	out, err := kubewire.Negotiate(kubewire.Request{Accept: rm.Accept, RawQuery: rm.RawQuery, UserAgent: rm.UserAgent}, t)
	return out, err == nil && out.Protobuf()
}

// GetOpenAPI serves /openapi/v3 (the index) and /openapi/v3/<path> from
// the registry's OpenAPIService. A request that names the document's hash
// (as the index's serverRelativeURLs do) may be cached forever.
func (s *Server) GetOpenAPI(ctx context.Context, req *gatewayv1.GetOpenAPIRequest) (*httpbody.HttpBody, error) {
	resp, err := s.OpenAPI.GetDocument(ctx, &registryv1.GetDocumentRequest{
		Version: req.GetVersion(),
		Path:    req.GetPath(),
		Accept:  httpx.RequestMetaFrom(ctx).Accept,
	})
	if err != nil {
		return nil, httpx.ToGRPC(err)
	}
	if resp.GetContentType() == "" && len(resp.GetBody()) == 0 {
		// no such document: upstream's handler writes nothing (200, no
		// body, no Content-Type)
		_ = grpc.SetHeader(ctx, metadata.Pairs(httpx.MDNoContentType, "1"))
		return &httpbody.HttpBody{}, nil
	}
	ct := resp.GetContentType()
	if ct == "" {
		ct = httpx.ContentTypeJSON
	}
	headers := []string{httpx.MDETag, resp.GetEtag()}
	switch hashed := req.GetHash() != "" && req.GetVersion() == "v3" && req.GetPath() != ""; {
	case hashed && `"`+req.GetHash()+`"` != resp.GetEtag():
		// a stale hash: upstream's handler redirects (301) to the
		// document's current one, with the ETag and Content-Type it had
		// set, and no body
		headers = append(headers, httpx.MDLocation, openAPIURL(req.GetPath(), strings.Trim(resp.GetEtag(), `"`)))
		_ = grpc.SetHeader(ctx, metadata.Pairs(headers...))
		httpx.SetHTTPCode(ctx, http.StatusMovedPermanently)
		return &httpbody.HttpBody{ContentType: ct}, nil
	case hashed:
		// cacheable forever: upstream adds Expires, a year from now
		headers = append(headers, httpx.MDCacheControl, "public, immutable",
			httpx.MDExpires, time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
	default:
		headers = append(headers, httpx.MDCacheControl, "no-cache, private")
	}
	var modified time.Time
	if lm := resp.GetLastModified(); lm != nil {
		modified = lm.AsTime()
	}
	switch conditionalHeaders(ctx).evaluate(resp.GetEtag(), modified) {
	case http.StatusNotModified:
		// upstream serves the documents with net/http's ServeContent:
		// a client that has the document gets a 304 with the ETag and
		// Cache-Control but no Content-Type (nor Last-Modified, since
		// there is an ETag)
		headers = append(headers, httpx.MDNoContentType, "1")
		_ = grpc.SetHeader(ctx, metadata.Pairs(headers...))
		httpx.SetHTTPCode(ctx, http.StatusNotModified)
		return &httpbody.HttpBody{}, nil
	case http.StatusPreconditionFailed:
		// If-Match or If-Unmodified-Since failed: 412, every header but
		// no body
		headers = appendLastModified(headers, modified)
		_ = grpc.SetHeader(ctx, metadata.Pairs(headers...))
		httpx.SetHTTPCode(ctx, http.StatusPreconditionFailed)
		return &httpbody.HttpBody{ContentType: ct}, nil
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(appendLastModified(headers, modified)...))
	return &httpbody.HttpBody{ContentType: ct, Data: resp.GetBody()}, nil
}

// appendLastModified adds the Last-Modified header metadata of a document
// changed last at modified (an HTTP date, in UTC, to the second), if it is
// known.
func appendLastModified(headers []string, modified time.Time) []string {
	if !known(modified) {
		return headers
	}
	return append(headers, httpx.MDLastModified, modified.UTC().Format(http.TimeFormat))
}

// conditionalHeaders reads a request's conditional headers, the first
// value of each.
func conditionalHeaders(ctx context.Context) conditional {
	first := func(key string) string {
		if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return conditional{
		ifMatch:           first(httpx.MDIfMatch),
		ifUnmodifiedSince: first(httpx.MDIfUnmodifiedSince),
		ifNoneMatch:       first(httpx.MDIfNoneMatch),
		ifModifiedSince:   first(httpx.MDIfModifiedSince),
	}
}

// openAPIURL is the server-relative URL of the v3 document of path at
// hash, as the index names it.
func openAPIURL(path, hash string) string {
	u := url.URL{Path: "/openapi/v3/" + strings.TrimPrefix(path, "/"), RawQuery: url.Values{"hash": {hash}}.Encode()}
	return u.String()
}
