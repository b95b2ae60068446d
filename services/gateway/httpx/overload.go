package httpx

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// Overload protection: kube-apiserver's max-in-flight filter
// (k8s.io/apiserver/pkg/server/filters/maxinflight.go, used when API
// priority and fairness is off), and limits on open watches, which
// kube-apiserver does not have but a gateway holding a goroutine and a
// backend stream per watch needs.

// Defaults of the limits (the flags'; a Config's zero disables a limit).
const (
	// DefaultMaxRequestsInFlight is kube-apiserver's --max-requests-inflight.
	DefaultMaxRequestsInFlight = 400
	// DefaultMaxMutatingRequestsInFlight is kube-apiserver's
	// --max-mutating-requests-inflight.
	DefaultMaxMutatingRequestsInFlight = 200
	// DefaultMaxWatchesPerClient bounds the watches one client (user, or
	// token without a user) holds open.
	DefaultMaxWatchesPerClient = 1000
	// DefaultMaxWatches bounds the watches open on the gateway.
	DefaultMaxWatches = 10000
)

// tooManyRequestsBody is kube-apiserver's answer when a request is over a
// max-in-flight limit: http.Error's plain text (priority-and-fairness.go's
// tooManyRequests, which maxinflight.go calls), with Retry-After: 1.
const tooManyRequestsBody = "Too many requests, please try again later.\n"

// retryAfter is maxinflight.go's retry-after interval ("1").
const retryAfter = "1"

var (
	inflightGauge = metrics.NewGaugeVec("gateway", "inflight_requests",
		"Requests being served, by request_kind (readOnly: GET; mutating: the other verbs); watches are not counted.", "request_kind")
	droppedRequests = metrics.NewCounterVec("gateway", "dropped_requests_total",
		"Requests refused with 429 by the max-in-flight limits (request_kind readOnly or mutating) and the watch limits (request_kind watch).", "request_kind")
	openWatches = metrics.NewGauge("gateway", "open_watches", "Watches being served.")
)

// InflightLimiter is maxinflight.go's WithMaxInFlightLimit: at most
// readOnly read-only requests and mutating requests of the other verbs at
// once (nil channel: no limit), refusing the rest at once (no queue).
// Long-running requests (watches) are not counted.
type InflightLimiter struct {
	readOnly, mutating chan struct{}
}

func NewInflightLimiter(maxReadOnly, maxMutating int) *InflightLimiter {
	l := &InflightLimiter{}
	if maxReadOnly > 0 {
		l.readOnly = make(chan struct{}, maxReadOnly)
	}
	if maxMutating > 0 {
		l.mutating = make(chan struct{}, maxMutating)
	}
	return l
}

// isReadOnly reports whether kube-apiserver counts r as read-only: its
// verb is get, list or watch (maxinflight.go's nonMutatingRequestVerbs).
// The verb of a resource request (/apis/<group>/<version>/<resource>...) is
// "get" (or list, watch) for GET and HEAD; any other request's is its
// method in lower case, so only GET is read-only there (a HEAD of /apis is
// "head": mutating).
func isReadOnly(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet:
		return true
	case http.MethodHead:
		return isResourcePath(r.URL.Path)
	}
	return false
}

// isResourcePath reports whether path is a resource request's, as
// kube-apiserver's RequestInfoFactory tells: /apis/<group>/<version>/<x>...
// or /api/<version>/<x>....
func isResourcePath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 4 && parts[0] == "apis":
		return true
	case len(parts) >= 3 && parts[0] == "api":
		return true
	}
	return false
}

// acquire takes a slot for a request (readOnly or mutating); false when
// the limit is reached. release gives it back.
func (l *InflightLimiter) acquire(readOnly bool) (release func(), ok bool) {
	kind, c := "readOnly", l.readOnly
	if !readOnly {
		kind, c = "mutating", l.mutating
	}
	if c == nil {
		return func() {}, true
	}
	select {
	case c <- struct{}{}:
		g := inflightGauge.WithLabelValues(kind)
		g.Inc()
		return func() { <-c; g.Dec() }, true
	default:
		droppedRequests.WithLabelValues(kind).Inc()
		return nil, false
	}
}

// writeTooManyRequests is kube-apiserver's 429 for a request over a
// max-in-flight limit, byte for byte (http.Error: text/plain, nosniff).
func writeTooManyRequests(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Retry-After", retryAfter)
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, tooManyRequestsBody)
}

// WatchLimiter bounds the open watches, per client and in all (0: no
// limit).
type WatchLimiter struct {
	perClient, total int

	mu    sync.Mutex
	open  int
	byKey map[string]int
}

func NewWatchLimiter(perClient, total int) *WatchLimiter {
	return &WatchLimiter{perClient: perClient, total: total, byKey: map[string]int{}}
}

// acquire opens a watch for the client key; a 429 Status error when a
// limit is reached. release closes it.
func (l *WatchLimiter) acquire(key string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.perClient > 0 && l.byKey[key] >= l.perClient:
		droppedRequests.WithLabelValues("watch").Inc()
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("Too many requests: this client has %d watches open, the limit per client; please try again later.", l.byKey[key]), 1)
	case l.total > 0 && l.open >= l.total:
		droppedRequests.WithLabelValues("watch").Inc()
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("Too many requests: the server has %d watches open, the limit; please try again later.", l.open), 1)
	}
	l.open++
	l.byKey[key]++
	openWatches.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.open--
			if l.byKey[key]--; l.byKey[key] <= 0 {
				delete(l.byKey, key)
			}
			openWatches.Dec()
		})
	}, nil
}

// writeWatchLimited answers a watch over a watch limit: a TooManyRequests
// Status (details.retryAfterSeconds 1) with Retry-After: 1.
func writeWatchLimited(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", retryAfter)
	WriteStatus(w, kstatus.FromError(err))
}

// publicHealthPaths are not limited (GET): kube-apiserver's suggested
// "probes" FlowSchema puts GET /healthz, /readyz and /livez in the exempt
// priority level.
var publicHealthPaths = map[string]bool{
	"/healthz": true,
	"/livez":   true,
	"/readyz":  true,
}
