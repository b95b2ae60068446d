package httpx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

// DefaultMaxRequestBodyBytes is kube-apiserver's limit on a request body (3 MiB).
const DefaultMaxRequestBodyBytes = 3 << 20

// DefaultRequestTimeout is kube-apiserver's --request-timeout (1m).
const DefaultRequestTimeout = time.Minute

// edge is the thin HTTP layer in front of the grpc-gateway mux. It only
// authenticates, enforces the body limit and rewrites "?watch=true" reads
// onto the legacy /watch/ paths the Watch rpc is bound to; routing belongs
// to the mux.
type Edge struct {
	// Auth authenticates every request (Tokens when nil: the --token
	// tokens only); Authz authorizes them (nil: every request allowed).
	Auth    *Authenticator
	Tokens  *TokenSet
	Authz   *Authorizer
	MaxBody int64
	// RequestTimeout bounds every request but watches (default 60s).
	RequestTimeout time.Duration
	Next           http.Handler
	// stopWatches ends every watch when cancelled (graceful shutdown), so
	// that long-running streams do not hold the server open.
	StopWatches context.Context
	// inflight limits the requests being served but watches, watches the
	// open watches (overload.go; nil: no limits).
	Inflight *InflightLimiter
	Watches  *WatchLimiter
	// Audit records the requests as its policy says (nil: no audit; the
	// Audit-ID header is set either way).
	Audit *Auditor

	once    sync.Once
	handler http.Handler
}

func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.once.Do(e.build)
	e.handler.ServeHTTP(w, r)
}

// build assembles the edge's filters in kube-apiserver's order: audit ID,
// Cache-Control, request info, authentication (its failures audited), audit, impersonation,
// then serve (authorization and the rest).
func (e *Edge) build() {
	var az authorizer.UnconditionalAuthorizer = allowAll
	if e.Authz != nil {
		az = e.Authz
	}
	var h http.Handler = http.HandlerFunc(e.serve)
	h = withImpersonation(h, az)
	unauthorized := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeUnauthorized(w) }))
	if e.Audit != nil {
		h = filters.WithAudit(h, e.Audit.backend, e.Audit.policy, longRunning)
		unauthorized = filters.WithFailedAuthenticationAudit(unauthorized, e.Audit.backend, e.Audit.policy)
	}
	authenticated := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The credentials stop here (Authenticate removes them); nothing
		// behind the edge needs them.
		var u user.Info
		var ok bool
		if e.Auth != nil {
			u, ok = e.Auth.Authenticate(r)
		} else {
			u, ok = e.Tokens.Authenticate(r)
		}
		if !ok {
			unauthorized.ServeHTTP(w, r)
			return
		}
		authenticated.ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), u)))
	})
	if e.Audit != nil {
		// The audit policy and events need the request's attributes
		// before authentication; without audit, authorization builds them.
		h = withRequestInfo(h)
	}
	// Every answer is `Cache-Control: no-cache, private` unless its handler
	// says otherwise (the OpenAPI documents addressed by hash), as
	// kube-apiserver's handler chain sets it.
	e.handler = filters.WithAuditInit(filters.WithCacheControl(h))
}

// serve authorizes the request of the (possibly impersonated) user and
// serves it.
func (e *Edge) serve(w http.ResponseWriter, r *http.Request) {
	if e.Audit != nil {
		var done func()
		w, done = auditResponse(w, r)
		defer done()
	}
	u, _ := request.UserFrom(r.Context())
	if !e.Authz.AuthorizeRequest(w, r, u) {
		return
	}
	// The user travels on: on the request's context, its span and the
	// metadata of the gRPC calls behind it.
	r = r.WithContext(withUser(r.Context(), u))
	clientKey := "user:" + u.GetName()

	if r.Method == http.MethodGet {
		if u, ok := WatchRewrite(r.URL); ok {
			r = r.WithContext(context.WithValue(r.Context(), originalURLKey{}, r.URL))
			r2 := r.Clone(r.Context())
			r2.URL = u
			r2.RequestURI = u.RequestURI()
			r = r2
		}
	}
	r.Header.Set(headerQuery, r.URL.RawQuery)

	rc := http.NewResponseController(w)
	if r.Method == http.MethodGet && isWatchPath(r.URL.Path) {
		// Long-running: bounded by timeoutSeconds (or the watch timeout),
		// ended by a graceful shutdown; no I/O deadline (an HTTP/1.1
		// connection may carry one from an earlier request).
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		// Not counted in flight (kube-apiserver's long-running requests
		// are not), but bounded per client and in all.
		if e.Watches != nil {
			release, err := e.Watches.acquire(clientKey)
			if err != nil {
				writeWatchLimited(w, err)
				return
			}
			defer release()
		}
		if e.StopWatches != nil {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(e.StopWatches, cancel)
			defer stop()
			r = r.WithContext(ctx)
		}
		e.Next.ServeHTTP(w, r)
		return
	}

	// Every other request has a deadline, as kube-apiserver's: ?timeout
	// when shorter than the request timeout, else the request timeout. It
	// bounds reading the body, the work behind the edge (gRPC carries the
	// deadline) and writing the response, so a slow client cannot hold a
	// request forever.
	max := e.RequestTimeout
	if max <= 0 {
		max = DefaultRequestTimeout
	}
	timeout, err := ParseTimeout(r.URL.Query().Get("timeout"), max)
	if err != nil {
		WriteStatusFor(w, r, kstatus.FromError(err))
		return
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	r = r.WithContext(ctx)
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(writeGrace))
	// The deadlines are the connection's on HTTP/1.1: the next request on
	// it must not inherit them.
	defer func() {
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}()
	// Health checks (GET) are exempt, as API priority and fairness (on by
	// default in kube-apiserver) exempts them: an overloaded gateway must
	// not be restarted for failing /livez.
	if e.Inflight != nil && !(r.Method == http.MethodGet && publicHealthPaths[r.URL.Path]) {
		release, ok := e.Inflight.acquire(isReadOnly(r))
		if !ok {
			writeTooManyRequests(w)
			return
		}
		defer release()
	}
	if acceptsGzip(r) && compressible(r.URL.Path) {
		gw := &gzipWriter{ResponseWriter: w, threshold: gzipThreshold, level: gzipLevel}
		defer gw.close()
		w = gw
	}
	w, done := openAPIHeaders(w, r)
	defer done()
	if err := e.limitBody(r); err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			err = errRequestTimeout()
		}
		WriteStatusFor(w, r, kstatus.FromError(err))
		return
	}
	if e.Audit != nil {
		auditRequest(r)
	}
	// The access reviews (kubectl auth can-i's, the SubjectAccessReviews)
	// are answered here, by the authorizers.
	if e.Authz != nil && e.Authz.ServeReview(w, r, u) {
		return
	}
	// TokenReviews (extension servers delegating bearer tokens) are
	// answered by the authenticators.
	if e.Auth != nil && e.Auth.ServeTokenReview(w, r) {
		return
	}
	// SelfSubjectReviews (kubectl auth whoami) are answered from the
	// request's user.
	if ServeSelfSubjectReview(w, r, u) {
		return
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && isOpenAPIDocument(r.URL.Path) {
		serveOpenAPI(w, r, e.Next)
		return
	}
	e.Next.ServeHTTP(w, r)
}

type originalURLKey struct{}

// RequestURL is the URL a request came with: a watch by ?watch=true is
// rewritten to its /watch/ path for the routes behind the edge, which a
// proxy (the aggregation layer) must not pass on.
func RequestURL(r *http.Request) *url.URL {
	if u, ok := r.Context().Value(originalURLKey{}).(*url.URL); ok {
		return u
	}
	return r.URL
}

// StripInternalHeaders removes the headers the edge adds for the routes
// behind it, before a request leaves the gateway.
func StripInternalHeaders(h http.Header) { h.Del(headerQuery) }

// writeGrace is how long past its deadline a response may take to write
// (the 504 itself has to reach the client).
const writeGrace = 5 * time.Second

// ParseTimeout is kube-apiserver's request deadline: a valid ?timeout
// shorter than max (and not 0), else max; a malformed one is 400.
func ParseTimeout(param string, max time.Duration) (time.Duration, error) {
	if param == "" {
		return max, nil
	}
	d, err := time.ParseDuration(param)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL - %v", err))
	}
	if d > 0 && d < max {
		return d, nil
	}
	return max, nil
}

// errRequestTimeout is kube-apiserver's 504 for a request past its deadline.
func errRequestTimeout() error {
	return apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// isWatchPath reports whether path is one of the legacy watch paths
// (/apis/<g>/<v>/watch/...).
func isWatchPath(path string) bool {
	if rest, ok := strings.CutPrefix(path, "/api/"); ok {
		// the core group's: /api/<v>/watch/...
		parts := strings.SplitN(rest, "/", 3)
		return len(parts) == 3 && parts[1] == "watch"
	}
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, "/", 4)
	return len(parts) == 4 && parts[2] == "watch"
}

// limitBody reads the request body up front (grpc-gateway reads it whole
// anyway) and answers 413 as kube-apiserver does when it is too large.
func (e *Edge) limitBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	tooLarge := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", e.MaxBody))
	if r.ContentLength > e.MaxBody {
		return tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, e.MaxBody+1))
	_ = r.Body.Close()
	if err != nil {
		if isTimeout(err) {
			return err
		}
		return apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))
	}
	if int64(len(data)) > e.MaxBody {
		return tooLarge
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	return nil
}

// isWatchParam reads a boolean query parameter as kube-apiserver does:
// absent, "0" and "false" are false, anything else is true.
func isWatchParam(q url.Values) bool {
	v, ok := q["watch"]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// WatchRewrite maps a GET with ?watch=true onto the legacy watch path:
//
//	/apis/g/v/res                      → /apis/g/v/watch/res
//	/apis/g/v/namespaces/ns/res        → /apis/g/v/watch/namespaces/ns/res
//	/apis/g/v/res/name                 → /apis/g/v/watch/res?fieldSelector=metadata.name=name
//	/apis/g/v/namespaces/ns/res/name   → /apis/g/v/watch/namespaces/ns/res?fieldSelector=...
//
// A watch of one object becomes a watch of its collection selecting its
// name, as kube-apiserver treats it.
func WatchRewrite(in *url.URL) (*url.URL, bool) {
	q := in.Query()
	if !isWatchParam(q) {
		return nil, false
	}
	if rest, ok := strings.CutPrefix(in.Path, "/api/"); ok {
		return coreWatchRewrite(in, q, rest)
	}
	rest, ok := strings.CutPrefix(in.Path, "/apis/")
	if !ok {
		return nil, false
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	for _, p := range parts {
		if p == "" {
			return nil, false
		}
	}
	var collection []string
	name := ""
	switch {
	case len(parts) == 3 && parts[2] != "watch":
		collection = parts
	case len(parts) == 5 && parts[2] == "namespaces":
		collection = parts
	case len(parts) == 4 && parts[2] != "watch" && parts[2] != "namespaces":
		collection, name = parts[:3], parts[3]
	case len(parts) == 6 && parts[2] == "namespaces":
		collection, name = parts[:5], parts[5]
	default:
		return nil, false
	}
	return watchURL(in, q, "/apis/"+strings.Join(append([]string{collection[0], collection[1], "watch"}, collection[2:]...), "/"), name), true
}

// coreWatchRewrite is WatchRewrite of the core group's cluster-scoped
// resources (the namespaces):
//
//	/api/v/res        → /api/v/watch/res
//	/api/v/res/name   → /api/v/watch/res?fieldSelector=metadata.name=name
func coreWatchRewrite(in *url.URL, q url.Values, rest string) (*url.URL, bool) {
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	for _, p := range parts {
		if p == "" {
			return nil, false
		}
	}
	if len(parts) < 2 || len(parts) > 3 || parts[1] == "watch" {
		return nil, false
	}
	name := ""
	if len(parts) == 3 {
		name = parts[2]
	}
	return watchURL(in, q, "/api/"+parts[0]+"/watch/"+parts[1], name), true
}

// watchURL is in at the watch path, selecting name when there is one.
func watchURL(in *url.URL, q url.Values, path, name string) *url.URL {
	out := *in
	out.RawPath = ""
	out.Path = path
	if name != "" {
		sel := "metadata.name=" + name
		if fs := q.Get("fieldSelector"); fs != "" {
			sel = fs + "," + sel
		}
		q.Set("fieldSelector", sel)
	}
	// The watch path says it all; the parameter's loose boolean syntax
	// ("watch=yes") would not parse as the Watch rpc's bool field.
	q.Del("watch")
	out.RawQuery = q.Encode()
	return &out
}
