package httpx

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServeOpenAPIAsServeContent: a document served whole by a handler
// that answers the conditional headers itself (as the gateway's OpenAPI
// handler does) and wrapped by serveOpenAPI answers every request as
// kube-openapi's handler, net/http's ServeContent on the same document,
// answers it: ranges, several ranges, ranges past the end, If-Range,
// and the conditions.
func TestServeOpenAPIAsServeContent(t *testing.T) {
	doc := strings.Repeat(`{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=ABC"}}}`, 3)
	const etag = `"ABC"`
	modified := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache, private")
		w.Header().Set("Etag", etag)
		w.Header().Set("Content-Type", "application/json")
		// (upstream's chain then gives an answer left without
		// Cache-Control, ServeContent's 416, the default one: seen on
		// apiextensions-apiserver v1.33, and compared in the oracle's
		// 190-crd-discovery-openapi)
		http.ServeContent(&headerHook{ResponseWriter: w, hook: defaultCacheControl}, r, "/openapi/v3", modified, strings.NewReader(doc))
	})
	// the gateway's handler: conditions evaluated, the whole document
	// or a 304/412, never a range
	whole := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" || r.Header.Get("If-Range") != "" {
			t.Errorf("the document handler was asked for a range: %v", r.Header)
		}
		w.Header().Set("Cache-Control", "no-cache, private")
		w.Header().Set("Etag", etag)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
		switch inm := r.Header.Get("If-None-Match"); {
		case inm == "*" || inm == etag:
			w.Header().Del("Content-Type")
			w.Header().Del("Last-Modified")
			w.WriteHeader(http.StatusNotModified)
			return
		case r.Header.Get("If-Match") != "" && r.Header.Get("If-Match") != etag:
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		// (as the gateway's answer: with its length, no body for HEAD)
		w.Header().Set("Content-Length", fmt.Sprint(len(doc)))
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(doc))
		}
	})
	boundary := regexp.MustCompile(`[0-9a-f]{60}`)
	render := func(h http.Handler, method string, header []string) string {
		r := httptest.NewRequest(method, "/openapi/v3", nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var keys []string
		for k := range rec.Header() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var sb strings.Builder
		fmt.Fprintf(&sb, "%d\n", rec.Code)
		for _, k := range keys {
			fmt.Fprintf(&sb, "%s: %s\n", k, rec.Header()[k])
		}
		sb.WriteString(rec.Body.String())
		return boundary.ReplaceAllString(sb.String(), "BOUNDARY")
	}
	gateway := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveOpenAPI(w, r, whole) })
	for _, tc := range []struct {
		method string
		header []string
		code   int
	}{
		{http.MethodGet, nil, http.StatusOK},
		{http.MethodHead, nil, http.StatusOK},
		{http.MethodGet, []string{"Range", "bytes=0-9"}, http.StatusPartialContent},
		{http.MethodGet, []string{"Range", "bytes=-5"}, http.StatusPartialContent},
		{http.MethodGet, []string{"Range", "bytes=0-1,5-6"}, http.StatusPartialContent},
		{http.MethodGet, []string{"Range", "bytes=99999-"}, http.StatusRequestedRangeNotSatisfiable},
		{http.MethodGet, []string{"Range", "pages=1"}, http.StatusRequestedRangeNotSatisfiable},
		{http.MethodGet, []string{"Range", "bytes=0-9", "If-Range", etag}, http.StatusPartialContent},
		{http.MethodGet, []string{"Range", "bytes=0-9", "If-Range", `"other"`}, http.StatusOK},
		{http.MethodGet, []string{"Range", "bytes=0-9", "If-None-Match", etag}, http.StatusNotModified},
		{http.MethodGet, []string{"Range", "bytes=0-9", "If-Match", `"other"`}, http.StatusPreconditionFailed},
		{http.MethodGet, []string{"If-None-Match", "*"}, http.StatusNotModified},
		{http.MethodHead, []string{"Range", "bytes=0-9"}, http.StatusPartialContent},
	} {
		want, got := render(upstream, tc.method, tc.header), render(gateway, tc.method, tc.header)
		if !strings.HasPrefix(want, fmt.Sprint(tc.code)) {
			t.Fatalf("%s %q: ServeContent itself answered\n%s", tc.method, tc.header, want)
		}
		if got != want {
			t.Errorf("%s %q:\n%s\nwant (ServeContent)\n%s", tc.method, tc.header, got, want)
		}
	}

	// an answer without a body type (a group version without a
	// document: 200, nothing written) gets no Accept-Ranges
	// (nothing written at all, or an explicit 200 without a body)
	empty := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("explicit") {
			w.WriteHeader(http.StatusOK)
		}
	})
	for _, header := range [][]string{nil, {"Range", "bytes=0-9"}, {"explicit", ""}, {"explicit", "", "Range", "bytes=0-9"}} {
		target := "/openapi/v3/apis/nope.example.com/v1"
		if slices.Contains(header, "explicit") {
			target += "?explicit"
		}
		r := httptest.NewRequest(http.MethodGet, target, nil)
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] != "explicit" {
				r.Header.Set(header[i], header[i+1])
			}
		}
		rec := httptest.NewRecorder()
		serveOpenAPI(rec, r, empty)
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Accept-Ranges") != "" || rec.Header().Get("Content-Type") != "" {
			t.Errorf("empty answer %q: %d %v %q", header, rec.Code, rec.Header(), rec.Body.String())
		}
	}
}
