package watch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/kstatus"
	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Watches are served straight from HTTP: the request becomes a
// gatewayv1.WatchRequest (path parameters, then the query, as grpc-gateway
// fills a request) and KubeAPIService.Watch streams into the response
// through httpWatchStream. No gRPC hop: every event of every watcher would
// otherwise be marshalled and copied through an in-memory HTTP/2
// connection once more.

// watchPaths are the legacy watch routes (?watch=true reads are rewritten
// onto them by the edge), of collections and of single objects (their
// name is a field selector, see listing.SelectName).
var watchPaths = []string{
	"/apis/{group}/{version}/watch/{resource}",
	"/apis/{group}/{version}/watch/namespaces/{namespace}/{resource}",
	"/apis/{group}/{version}/watch/{resource}/{name}",
	"/apis/{group}/{version}/watch/namespaces/{namespace}/{resource}/{name}",
}

// watchNameKey carries the name of a single-object watch path in the
// context (the Watch rpc has no field for it).
type watchNameKey struct{}

// NameFrom is the name of the object a watch path named ("" for a
// collection).
func NameFrom(ctx context.Context) string {
	name, _ := ctx.Value(watchNameKey{}).(string)
	return name
}

// watchQueryFilter keeps path parameters from being set by the query.
var watchQueryFilter = utilities.NewDoubleArray([][]string{{"group"}, {"version"}, {"namespace"}, {"resource"}, {"name"}})

// Watcher serves a watch into a stream: KubeAPIService's Watch.
type Watcher interface {
	Watch(*gatewayv1.WatchRequest, gatewayv1.KubeAPIService_WatchServer) error
}

// corePaths are the legacy watch routes of the core group's namespaces
// (/api/v1/watch/namespaces[/<name>]).
var corePaths = []string{
	"/api/{version}/watch/namespaces",
	"/api/{version}/watch/namespaces/{name}",
}

// Register adds the watch routes to mux (ahead of the routes registered
// before, which cannot stream); api serves them.
func Register(mux *runtime.ServeMux, api Watcher) error {
	return register(mux, watchPaths, api)
}

// RegisterCore adds the core group's namespace watch routes to mux; api
// serves them (the request's resource is "namespaces").
func RegisterCore(mux *runtime.ServeMux, api Watcher) error {
	return register(mux, corePaths, api)
}

func register(mux *runtime.ServeMux, paths []string, api Watcher) error {
	for _, p := range paths {
		if err := mux.HandlePath(http.MethodGet, p, func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			serveHTTPWatch(api, w, r, params)
		}); err != nil {
			return err
		}
	}
	return nil
}

func serveHTTPWatch(api Watcher, w http.ResponseWriter, r *http.Request, params map[string]string) {
	req := &gatewayv1.WatchRequest{
		Group: params["group"], Version: params["version"], Namespace: params["namespace"], Resource: params["resource"],
	}
	if err := runtime.PopulateQueryParameters(req, r.URL.Query(), watchQueryFilter); err != nil {
		httpx.WriteStatus(w, kstatus.FromError(apierrors.NewBadRequest(err.Error())))
		return
	}
	md := metadata.MD{}
	for k, vs := range r.Header {
		if key, ok := httpx.IncomingHeader(k); ok {
			md.Append(key, vs...)
		}
	}
	md.Set(httpx.MDHost, r.Host)
	s := &httpWatchStream{w: w, rc: http.NewResponseController(w)}
	ctx := metadata.NewIncomingContext(r.Context(), md)
	if name := params["name"]; name != "" {
		ctx = context.WithValue(ctx, watchNameKey{}, name)
	}
	s.ctx = grpc.NewContextWithServerTransportStream(ctx, watchTransport{s})
	err := api.Watch(req, s)
	switch {
	case err == nil || r.Context().Err() != nil:
	case !s.started:
		s.writeHeader(httpx.ContentTypeJSON, kstatus.FromError(err).Code)
		_, _ = w.Write(httpx.StatusJSON(kstatus.FromError(err), false))
	default:
		_, _ = w.Write(httpx.WatchErrorFrame(err))
	}
}

// httpWatchStream is KubeAPIService_WatchServer (and the
// grpc.ServerTransportStream behind grpc.SetHeader) over an HTTP response:
// header metadata becomes the status code (x-http-code) and Warning
// headers; every message is written and flushed.
type httpWatchStream struct {
	grpc.ServerStream
	ctx     context.Context
	w       http.ResponseWriter
	rc      *http.ResponseController
	header  metadata.MD
	started bool
}

var _ gatewayv1.KubeAPIService_WatchServer = (*httpWatchStream)(nil)

func (s *httpWatchStream) Context() context.Context { return s.ctx }

func (s *httpWatchStream) SetHeader(md metadata.MD) error {
	if s.started {
		return errors.New("watch: headers already sent")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *httpWatchStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *httpWatchStream) SetTrailer(metadata.MD) {}

func (s *httpWatchStream) SendMsg(m any) error {
	b, ok := m.(*httpbody.HttpBody)
	if !ok {
		return errors.New("watch: not an HttpBody")
	}
	return s.Send(b)
}

func (s *httpWatchStream) RecvMsg(any) error { return errors.New("watch: no messages to receive") }

// Send writes one message (the first one also writes the status line and
// headers) and flushes it to the client.
func (s *httpWatchStream) Send(b *httpbody.HttpBody) error {
	if !s.started {
		code := http.StatusOK
		if v := s.header.Get(httpx.MDHTTPCode); len(v) > 0 {
			if c, err := strconv.Atoi(v[0]); err == nil && c >= 100 && c <= 599 {
				code = c
			}
		}
		ct := b.GetContentType()
		if ct == "" {
			ct = httpx.ContentTypeJSON
		}
		s.writeHeader(ct, int32(code))
	}
	if len(b.GetData()) > 0 {
		if _, err := s.w.Write(b.GetData()); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// WriteFrame writes one frame without flushing it (the headers went out
// with the first, empty message).
func (s *httpWatchStream) WriteFrame(frame []byte) error {
	if !s.started {
		if err := s.Send(&httpbody.HttpBody{ContentType: httpx.ContentTypeJSON}); err != nil {
			return err
		}
	}
	_, err := s.w.Write(frame)
	return err
}

// Flush sends what was written to the client.
func (s *httpWatchStream) Flush() error { return s.rc.Flush() }

func (s *httpWatchStream) writeHeader(contentType string, code int32) {
	s.started = true
	h := s.w.Header()
	for _, v := range s.header.Get(httpx.MDWarning) {
		h.Add("Warning", v)
	}
	h.Set("Content-Type", contentType)
	if !strings.HasPrefix(contentType, httpx.ContentTypeJSON) || code != http.StatusOK {
		h.Set("X-Content-Type-Options", "nosniff")
	}
	if code == 0 {
		code = http.StatusInternalServerError
	}
	s.w.WriteHeader(int(code))
}

// watchTransport is the stream as grpc.SetHeader finds it in the context.
type watchTransport struct{ s *httpWatchStream }

var _ grpc.ServerTransportStream = watchTransport{}

func (t watchTransport) Method() string { return "/crdplane.gateway.v1.KubeAPIService/Watch" }

func (t watchTransport) SetHeader(md metadata.MD) error { return t.s.SetHeader(md) }

func (t watchTransport) SendHeader(md metadata.MD) error { return t.s.SetHeader(md) }

func (t watchTransport) SetTrailer(metadata.MD) error { return nil }

// Fail answers a watch that fails before its stream starts with the
// error's Status and HTTP code, as kube-apiserver does. (A gRPC error here
// would reach the client as a stream error, with an HTTP code derived from
// the gRPC code: 400 instead of 422, 404 lost in translation.)
func Fail(ctx context.Context, stream gatewayv1.KubeAPIService_WatchServer, target httpx.Target, err error) error {
	if ctx.Err() != nil {
		return httpx.ToGRPC(err)
	}
	s := kstatus.FromError(httpx.ToGRPC(err))
	body := httpx.ErrorBody(httpx.RequestMetaFrom(ctx), target, s)
	httpx.SetHTTPCode(ctx, int(s.Code))
	if serr := stream.Send(body); serr != nil {
		return httpx.ToGRPC(err)
	}
	return nil
}
