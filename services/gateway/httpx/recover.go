package httpx

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// PanicMessage is kube-apiserver's answer to a request whose handler
// panicked (k8s.io/apiserver/pkg/server/filters/wrap.go,
// WithPanicRecovery), here as the message of a 500 Status.
const PanicMessage = "This request caused apiserver to panic. Look in the logs for details."

// RecoverPanics answers a request whose handler panicked with a 500
// InternalError Status (upstream's message), counts it in
// crdplane_panics_total{service="gateway"} and logs the stack. A response
// already under way (a watch) cannot become a 500: it is aborted
// (http.ErrAbortHandler: the client sees the stream cut). A handler's
// own http.ErrAbortHandler passes through, as upstream lets it.
func RecoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &panicWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			metrics.RecordPanic("gateway", v, "method", r.Method, "uri", r.RequestURI)
			if pw.started {
				panic(http.ErrAbortHandler)
			}
			WriteStatus(w, &metav1.Status{Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError, Message: PanicMessage})
		}()
		next.ServeHTTP(pw, r)
	})
}

// panicWriter notes whether the response has started.
type panicWriter struct {
	http.ResponseWriter
	started bool
}

func (w *panicWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *panicWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

// FlushError flushes (and so starts) the response; http.ResponseController
// finds it.
func (w *panicWriter) FlushError() error {
	w.started = true
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is http.Flusher's.
func (w *panicWriter) Flush() { _ = w.FlushError() }

// Unwrap gives http.ResponseController the writer underneath (deadlines).
func (w *panicWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
