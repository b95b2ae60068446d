package httpx

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// Response compression as kube-apiserver does it (APIResponseCompression,
// on by default in v1.33; k8s.io/apiserver's responsewriters): a response
// whose body (its first write: the whole object) is larger than 128 KiB is
// gzipped at level 1 when the request's Accept-Encoding lists a gzip token,
// with Content-Encoding: gzip and Vary: Accept-Encoding. Watches are not
// compressed.

const (
	// gzipThreshold is upstream's defaultGzipThresholdBytes.
	gzipThreshold = 128 * 1024
	// gzipLevel is upstream's defaultGzipContentEncodingLevel.
	gzipLevel = 1
)

var gzipPool = sync.Pool{New: func() any {
	gw, err := gzip.NewWriterLevel(nil, gzipLevel)
	if err != nil {
		panic(err)
	}
	return gw
}}

// acceptsGzip is upstream's negotiateContentEncoding: some
// comma-separated token of Accept-Encoding is exactly "gzip" (spaces
// trimmed; parameters such as ;q= are not read).
func acceptsGzip(r *http.Request) bool {
	for _, tok := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if strings.TrimSpace(tok) == "gzip" {
			return true
		}
	}
	return false
}

// compressible reports the paths whose responses upstream serializes
// through its object writer (API objects, Status errors, discovery), not
// /version, the OpenAPI documents or health checks.
func compressible(path string) bool {
	return path == "/api" || path == "/apis" || strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/apis/")
}

// gzipWriter defers the response header until the first write, which
// decides whether the response is compressed.
type gzipWriter struct {
	http.ResponseWriter
	code    int
	written bool
	gz      *gzip.Writer
}

func (w *gzipWriter) WriteHeader(code int) {
	if w.written || w.code != 0 {
		return
	}
	w.code = code
}

func (w *gzipWriter) start(n int) {
	w.written = true
	if n > gzipThreshold && w.code != http.StatusNotModified && w.code != http.StatusNoContent {
		h := w.Header()
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		w.gz = gzipPool.Get().(*gzip.Writer)
		w.gz.Reset(w.ResponseWriter)
	}
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(w.code)
}

func (w *gzipWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.start(len(p))
	}
	if w.gz != nil {
		return w.gz.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Flush writes what is compressed so far.
func (w *gzipWriter) Flush() {
	if !w.written {
		w.start(0)
	}
	if w.gz != nil {
		_ = w.gz.Flush()
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w *gzipWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// close ends the response: the header when nothing was written, the
// gzip stream's end when compressing.
func (w *gzipWriter) close() {
	if !w.written {
		if w.code == 0 {
			return
		}
		w.start(0)
	}
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(nil)
		gzipPool.Put(w.gz)
		w.gz = nil
	}
}
