package httpx

import (
	"bytes"
	"net/http"
	"strings"
	"time"
)

// kube-openapi serves the OpenAPI documents (/openapi/v2, the /openapi/v3
// index and each group version's document) with net/http's ServeContent,
// so upstream answers them with Accept-Ranges: bytes, a Range (and
// If-Range) as 206 with Content-Range (multipart/byteranges for several
// ranges), and a range past the end as 416 (seen on apiextensions-apiserver
// v1.33 and kube-apiserver v1.33's aggregator). The documents here come
// from the registry over gRPC, whole, with their ETag and Last-Modified;
// serveOpenAPI adds the same range handling around them.

// isOpenAPIDocument reports whether path is one of kube-openapi's
// documents.
func isOpenAPIDocument(path string) bool {
	return path == "/openapi/v2" || path == "/openapi/v3" || strings.HasPrefix(path, "/openapi/v3/")
}

// serveOpenAPI serves a GET or HEAD of an OpenAPI document from next as
// ServeContent would: without a Range header next answers (its
// conditional headers evaluated there) with Accept-Ranges added to a
// document; with one, next is asked for the whole document, without Range
// and If-Range, and its 200 is cut to the range by ServeContent (the
// other answers, 304, 412, a redirect, the empty answer of an unknown
// group version, pass as they are).
func serveOpenAPI(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Header.Get("Range") == "" {
		aw := &headerHook{ResponseWriter: w, hook: acceptRanges}
		next.ServeHTTP(aw, r)
		if !aw.done {
			// nothing written (a HEAD): the implicit 200 is still to be
			// sent
			aw.WriteHeader(http.StatusOK)
		}
		return
	}
	whole := r.Clone(r.Context())
	// (a HEAD's range is the GET's, without the body: ServeContent cuts
	// the document and writes no body for the HEAD)
	whole.Method = http.MethodGet
	whole.Header.Del("Range")
	whole.Header.Del("If-Range")
	// (not httptest's recorder: it sniffs a Content-Type for an answer
	// without one, such as the empty answer of an unknown group version)
	rec := &documentRecorder{header: http.Header{}, code: http.StatusOK}
	next.ServeHTTP(rec, whole)
	for k, v := range rec.header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	if rec.code != http.StatusOK || rec.header.Get("Content-Type") == "" {
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body.Bytes())
		return
	}
	var modified time.Time
	if lm := rec.header.Get("Last-Modified"); lm != "" {
		modified, _ = http.ParseTime(lm)
	}
	http.ServeContent(&headerHook{ResponseWriter: w, hook: defaultCacheControl}, r, "", modified, bytes.NewReader(rec.body.Bytes()))
}

// defaultCacheControl gives an answer without Cache-Control the default
// one: ServeContent drops the document's (and its ETag and Last-Modified)
// from a 416, which upstream then answers with `Cache-Control: no-cache,
// private` (compared with apiextensions-apiserver v1.33, also for a
// document addressed by hash, whose Expires stays).
func defaultCacheControl(h http.Header, _ int) {
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache, private")
	}
}

// acceptRanges adds Accept-Ranges: bytes to a 200 with a body type (a
// document), as ServeContent does.
func acceptRanges(h http.Header, code int) {
	if code == http.StatusOK && h.Get("Content-Type") != "" {
		h.Set("Accept-Ranges", "bytes")
	}
}

// documentRecorder keeps a whole answer of next in memory: its header,
// its first status code (200 unless it wrote another) and its body.
type documentRecorder struct {
	header  http.Header
	code    int
	written bool
	body    bytes.Buffer
}

func (r *documentRecorder) Header() http.Header { return r.header }

func (r *documentRecorder) WriteHeader(code int) {
	if !r.written {
		r.written, r.code = true, code
	}
}

func (r *documentRecorder) Write(b []byte) (int, error) {
	r.written = true
	return r.body.Write(b)
}
