package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/munnerz/goautoneg"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/kubewire"
)

// StatusJSON renders a Status as kube-apiserver does (kind/apiVersion set,
// status Failure unless given).
func StatusJSON(s *metav1.Status, pretty bool) []byte {
	out := *s
	out.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if out.Status == "" {
		out.Status = metav1.StatusFailure
	}
	var b []byte
	var err error
	if pretty {
		b, err = json.MarshalIndent(&out, "", "  ")
	} else {
		b, err = json.Marshal(&out)
	}
	if err != nil {
		return []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"failed to encode status","reason":"InternalError","code":500}`)
	}
	return append(b, '\n')
}

// WriteStatus answers with a Kubernetes Status and its code as the HTTP status.
func WriteStatus(w http.ResponseWriter, s *metav1.Status) {
	code := int(s.Code)
	if code == 0 {
		code = http.StatusInternalServerError
		s.Code = int32(code)
	}
	h := w.Header()
	h.Del("Trailer")
	h.Del("Transfer-Encoding")
	h.Del("Content-Length")
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	setRetryAfter(h, s)
	w.WriteHeader(code)
	_, _ = w.Write(StatusJSON(s, false))
}

// setRetryAfter sets Retry-After from a Status that gives a retry period,
// as upstream's responsewriters.ErrorNegotiated does for any error (a 504
// "Too large resource version", a 429).
func setRetryAfter(h http.Header, s *metav1.Status) {
	if s.Details != nil && s.Details.RetryAfterSeconds > 0 {
		h.Set("Retry-After", strconv.Itoa(int(s.Details.RetryAfterSeconds)))
	}
}

// ErrorHandler is the mux's error handler: any error (from KubeAPIService,
// which carries a Kubernetes Status as a gRPC detail, or from grpc-gateway
// itself) is answered with the Status kstatus.FromError derives from it.
// Warnings the service queued still reach the client.
func ErrorHandler(ctx context.Context, mux *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if md, ok := runtime.ServerMetadataFromContext(ctx); ok {
		for _, v := range md.HeaderMD.Get(MDWarning) {
			w.Header().Add("Warning", v)
		}
	}
	if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		err = errRequestTimeout()
	}
	if s := kstatus.FromError(err); s.Code >= 500 && r.Context().Err() == nil {
		slog.Default().ErrorContext(ctx, "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	WriteError(w, r, err)
}

// WriteError answers r with err: net/http's "404 page not found" for a
// path no handler serves (marked by kstatus.IsPageNotFound, here or by the
// service that answered), else err's Status (WriteStatusFor).
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if kstatus.IsPageNotFound(err) {
		writePageNotFound(w)
		return
	}
	WriteStatusFor(w, r, kstatus.FromError(err))
}

// writePageNotFound answers as kube-apiserver's delegation chain ends for a
// path no handler serves: net/http's NotFound.
func writePageNotFound(w http.ResponseWriter) {
	h := w.Header()
	h.Del("Trailer")
	h.Del("Transfer-Encoding")
	h.Del("Content-Length")
	http.NotFound(w, nil)
}

// RoutingErrorHandler answers requests no route matches as kube-apiserver
// does: 404 NotFound "the server could not find the requested resource",
// 405 MethodNotAllowed.
func RoutingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if code == http.StatusNotFound {
		writePageNotFound(w)
		return
	}
	WriteStatusFor(w, r, routingStatus(code))
}

func routingStatus(code int) *metav1.Status {
	var err *apierrors.StatusError
	switch code {
	case http.StatusMethodNotAllowed:
		err = ErrMethodNotAllowed()
	case http.StatusBadRequest:
		err = apierrors.NewBadRequest("the request could not be routed")
	default:
		err = apierrors.NewGenericServerResponse(code, "", schema.GroupResource{}, "", "", 0, false)
	}
	return kstatus.FromError(err)
}

// ErrMethodNotAllowed is go-restful's answer, through kube-apiserver's
// service error handler, for a method a route's path does not serve: 405
// MethodNotAllowed "the server does not allow this method on the requested
// resource".
func ErrMethodNotAllowed() *apierrors.StatusError {
	return apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false)
}

// pageNotFound is what kube-apiserver answers for a path no handler
// serves: its delegation chain ends in net/http's NotFound (text/plain
// "404 page not found"), not in a Status: an unknown group, version or
// resource, a version not served, a CRD not established, a scope mismatch.
const pageNotFound = "404 page not found"

// ErrNotFound is kube-apiserver's answer for a path it does not serve,
// marked as such (kstatus.NewPageNotFound): it crosses the gRPC boundary as
// a Status with the marker, and WriteError answers it as net/http does.
func ErrNotFound() error {
	return kstatus.NewPageNotFound(pageNotFound)
}

// WriteStatusFor answers r with a Status as kube-apiserver's
// ErrorNegotiated does (kubewire.ErrorOutput): negotiated from Accept
// without transformations among the endpoint's serializers — YAML,
// protobuf (a protobuf client of a custom resource gets its 406 in
// protobuf), JSON — else indented JSON.
func WriteStatusFor(w http.ResponseWriter, r *http.Request, s *metav1.Status) {
	if r == nil {
		WriteStatus(w, s)
		return
	}
	rm := RequestMeta{Accept: r.Header.Get("Accept"), RawQuery: r.URL.RawQuery, UserAgent: r.Header.Get("User-Agent")}
	body := ErrorBody(rm, TargetForPath(r.URL.Path), s)
	h := w.Header()
	h.Del("Trailer")
	h.Del("Transfer-Encoding")
	h.Del("Content-Length")
	h.Set("Content-Type", body.GetContentType())
	h.Set("X-Content-Type-Options", "nosniff")
	setRetryAfter(h, s)
	w.WriteHeader(int(s.Code))
	_, _ = w.Write(body.GetData())
}

// ErrorBody renders an error Status as upstream's ErrorNegotiated does
// (kubewire.ErrorOutput) for a request to an endpoint of kind t (s.Code
// is set to 500 when missing).
func ErrorBody(rm RequestMeta, t Target, s *metav1.Status) *httpbody.HttpBody {
	o := kubewire.ErrorOutput(rm.wireRequest(), t)
	if s.Code == 0 {
		s.Code = http.StatusInternalServerError
	}
	switch {
	case o.Raw:
		out := *s
		out.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		if out.Status == "" {
			out.Status = metav1.StatusFailure
		}
		if b, err := json.MarshalIndent(&out, "", "  "); err == nil {
			return &httpbody.HttpBody{ContentType: ContentTypeJSON, Data: b}
		}
	case o.Protobuf():
		if b, err := wire.Object(StatusJSON(s, false)); err == nil {
			return &httpbody.HttpBody{ContentType: kubewire.ContentTypeProtobuf, Data: b}
		}
	case o.MediaType == ContentTypeYAML:
		if b, err := yaml.JSONToYAML(StatusJSON(s, false)); err == nil {
			return &httpbody.HttpBody{ContentType: ContentTypeYAML, Data: b}
		}
	}
	return &httpbody.HttpBody{ContentType: ContentTypeJSON, Data: StatusJSON(s, o.Pretty)}
}

// TargetForPath is the kind of endpoint a path is (for the encoding of
// its errors): the CRD API, a scale subresource, discovery, or a custom
// resource.
func TargetForPath(path string) Target {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		if path == "/apis" || path == "/api" || strings.HasPrefix(path, "/api/") {
			return kubewire.TargetRootDiscovery
		}
		return kubewire.TargetCustomResource
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	if parts[0] == "apiextensions.k8s.io" {
		if len(parts) <= 2 {
			return kubewire.TargetBuiltinDiscovery
		}
		return kubewire.TargetCRD
	}
	if len(parts) <= 2 {
		return kubewire.TargetDiscovery
	}
	if parts[len(parts)-1] == "scale" {
		return kubewire.TargetScale
	}
	return kubewire.TargetCustomResource
}

// StatusAsYAML reports whether an error answering that Accept is YAML:
// the first clause of a type kube-apiserver serves custom resources in
// (JSON, YAML or a wildcard) decides; clauses asking for a transformation
// (as=Table, ...) do not apply to a Status; none at all is JSON.
func StatusAsYAML(accept string) bool {
	if strings.TrimSpace(accept) == "" {
		return false
	}
	for _, c := range goautoneg.ParseAccept(accept) {
		if c.Params["as"] != "" || c.Params["g"] != "" || c.Params["v"] != "" {
			continue
		}
		switch {
		case c.Type == "application" && c.SubType == "yaml":
			return true
		case c.Type == "application" && (c.SubType == "json" || c.SubType == "*"), c.Type == "*" && c.SubType == "*":
			return false
		}
	}
	return false
}

// ToGRPC turns any error of the pipeline into the gRPC error the edge
// renders: Kubernetes Status errors keep their Status, gRPC errors from the
// backends pass through (their KubeStatus details included), anything else
// is a 500.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		return kstatus.ToGRPC(err)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return kstatus.ToGRPC(apierrors.NewTimeoutError(err.Error(), 0))
	}
	return kstatus.ToGRPC(apierrors.NewInternalError(err))
}

// Reply wraps a handler's result for the wire.
func Reply(b *httpbody.HttpBody, err error) (*httpbody.HttpBody, error) {
	if err != nil {
		return nil, ToGRPC(err)
	}
	return b, nil
}
