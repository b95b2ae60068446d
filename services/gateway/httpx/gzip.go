package httpx

import (
	"bytes"
	"compress/gzip"
	"hash/maphash"
	"net/http"
	"strconv"
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
// decides whether the response is compressed. A body that is compressed is
// held until the response ends (the mux writes it in one piece) and
// compressed through gzipCache: a LIST read again without changes is the
// same bytes, compressed once.
type gzipWriter struct {
	http.ResponseWriter
	// threshold: a body longer is compressed (gzipThreshold); level: the
	// compression level (gzipLevel, whose bodies are cached); varied: Vary
	// is set already.
	threshold, level int
	varied           bool
	code             int
	written          bool
	// held is the body to compress (compressing: set, gz: nil), until
	// close or a Flush.
	held       []byte
	compressed bool
	gz         *gzip.Writer
}

func (w *gzipWriter) WriteHeader(code int) {
	if w.written || w.code != 0 {
		return
	}
	w.code = code
}

func (w *gzipWriter) start(n int) {
	w.written = true
	if w.code == 0 {
		w.code = http.StatusOK
	}
	// a body encoded already (an aggregated server's gzip, proxied) goes
	// as it is
	if n > w.threshold && w.code != http.StatusNotModified && w.code != http.StatusNoContent && w.Header().Get("Content-Encoding") == "" {
		h := w.Header()
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		if !w.varied {
			h.Add("Vary", "Accept-Encoding")
		}
		w.compressed = true
		return
	}
	w.ResponseWriter.WriteHeader(w.code)
}

func (w *gzipWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.start(len(p))
	}
	switch {
	case w.gz != nil:
		return w.gz.Write(p)
	case w.compressed:
		w.held = append(w.held, p...)
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// stream ends holding the body: what was held goes out compressed, and
// what follows is compressed as it comes.
func (w *gzipWriter) stream() {
	if !w.compressed || w.gz != nil {
		return
	}
	w.ResponseWriter.WriteHeader(w.code)
	w.gz = w.writer()
	w.gz.Reset(w.ResponseWriter)
	_, _ = w.gz.Write(w.held)
	w.held = nil
}

// Flush writes what is compressed so far.
func (w *gzipWriter) Flush() {
	if !w.written {
		w.start(0)
	}
	w.stream()
	if w.gz != nil {
		_ = w.gz.Flush()
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is for http.ResponseController.
func (w *gzipWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// close ends the response: the header when nothing was written, the held
// body compressed, or the gzip stream's end.
func (w *gzipWriter) close() {
	if !w.written {
		if w.code == 0 {
			return
		}
		w.start(0)
	}
	if w.compressed && w.gz == nil {
		w.ResponseWriter.WriteHeader(w.code)
		if w.level == gzipLevel {
			_, _ = w.ResponseWriter.Write(gzipCache.compress(w.held))
			w.held = nil
			return
		}
		w.stream()
	}
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(nil)
		if w.level == gzipLevel {
			gzipPool.Put(w.gz)
		}
		w.gz = nil
	}
}

// writer returns a gzip writer at the response's level.
func (w *gzipWriter) writer() *gzip.Writer {
	if w.level == gzipLevel {
		return gzipPool.Get().(*gzip.Writer)
	}
	gw, err := gzip.NewWriterLevel(nil, w.level)
	if err != nil {
		panic(err)
	}
	return gw
}

// openAPIV2MinSize is the threshold of the gzip handler kube-openapi
// serves /openapi/v2 through (github.com/NYTimes/gziphandler's
// DefaultMinSize, 1400 bytes, at the default compression level).
const openAPIV2MinSize = 1400

// openAPIHeaders sets what kube-openapi's handlers set on the OpenAPI
// documents: Vary: Accept on /openapi/v2 and on the documents of
// /openapi/v3/<group version>; on /openapi/v2 also the gzip handler's Vary:
// Accept-Encoding, and the writer that compresses a body of 1400 bytes or
// more for a client that accepts gzip (q-values read). Other paths get w
// back as it is.
func openAPIHeaders(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	switch {
	case r.URL.Path == "/openapi/v2":
		w.Header().Add("Vary", "Accept-Encoding")
		w.Header().Add("Vary", "Accept")
		if !acceptsGzipQ(r) {
			return w, func() {}
		}
		gw := &gzipWriter{ResponseWriter: w, threshold: openAPIV2MinSize - 1, level: gzip.DefaultCompression, varied: true}
		return gw, gw.close
	case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
		return &headerHook{ResponseWriter: w, hook: varyAccept}, func() {}
	}
	return w, func() {}
}

// varyAccept adds Vary: Accept to a response with a Content-Type (a
// document; the empty answer for a group version not served has none, as
// upstream's, which writes nothing there) and to a 304 (a document the
// client has: no Content-Type, as ServeContent's).
func varyAccept(h http.Header, code int) {
	if h.Get("Content-Type") != "" || code == http.StatusNotModified {
		h.Add("Vary", "Accept")
	}
}

// headerHook is a ResponseWriter that calls hook once, with the status
// code, just before the header is sent (by WriteHeader or the first
// Write).
type headerHook struct {
	http.ResponseWriter
	hook func(h http.Header, code int)
	done bool
}

func (w *headerHook) WriteHeader(code int) {
	if !w.done {
		w.done = true
		w.hook(w.Header(), code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *headerHook) Write(p []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap is for http.ResponseController.
func (w *headerHook) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// acceptsGzipQ is the gzip handler's reading of Accept-Encoding: gzip
// with a q-value above 0.
func acceptsGzipQ(r *http.Request) bool {
	for _, tok := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(tok), ";")
		if strings.TrimSpace(name) != "gzip" {
			continue
		}
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		return q > 0
	}
	return false
}

// gzipCache holds the compressed forms of the last bodies compressed
// (gzip at a fixed level is deterministic: the cached bytes are those a
// new compression would give).
var gzipCache = newCompressCache(8, 64<<20)

type compressCache struct {
	seed     maphash.Seed
	mu       sync.Mutex
	entries  map[uint64]compressEntry
	order    []uint64
	max      int
	maxBytes int
	bytes    int
}

type compressEntry struct{ plain, gzipped []byte }

func newCompressCache(entries, maxBytes int) *compressCache {
	return &compressCache{seed: maphash.MakeSeed(), entries: map[uint64]compressEntry{}, max: entries, maxBytes: maxBytes}
}

// compress returns body gzipped at upstream's level, from the cache when
// the same body was compressed lately.
func (c *compressCache) compress(body []byte) []byte {
	key := maphash.Bytes(c.seed, body)
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && bytes.Equal(e.plain, body) {
		return e.gzipped
	}
	var buf bytes.Buffer
	buf.Grow(len(body) / 4)
	gw := gzipPool.Get().(*gzip.Writer)
	gw.Reset(&buf)
	_, _ = gw.Write(body)
	_ = gw.Close()
	gw.Reset(nil)
	gzipPool.Put(gw)
	out := buf.Bytes()
	size := len(body) + len(out)
	if size > c.maxBytes/2 {
		return out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok {
		for len(c.order) > 0 && (len(c.order) >= c.max || c.bytes+size > c.maxBytes) {
			old := c.order[0]
			c.order = c.order[1:]
			c.bytes -= len(c.entries[old].plain) + len(c.entries[old].gzipped)
			delete(c.entries, old)
		}
		c.entries[key] = compressEntry{plain: body, gzipped: out}
		c.order = append(c.order, key)
		c.bytes += size
	}
	return out
}
