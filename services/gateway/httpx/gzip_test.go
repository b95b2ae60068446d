package httpx

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGzipWriterEncodedBody: a large body is compressed once; a body that
// comes encoded already (an aggregated server's gzip, proxied) is passed
// on as it is, not compressed again.
func TestGzipWriterEncodedBody(t *testing.T) {
	plain := []byte(strings.Repeat(`{"kind":"Flunder"}`, 100))
	var pre bytes.Buffer
	zw := gzip.NewWriter(&pre)
	_, _ = zw.Write(plain)
	_ = zw.Close()
	for _, tc := range []struct {
		name     string
		encoding string
		body     []byte
	}{
		{"plain", "", plain},
		{"gzipped by the backend", "gzip", pre.Bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := &gzipWriter{ResponseWriter: rec, threshold: 64, level: gzipLevel}
			if tc.encoding != "" {
				w.Header().Set("Content-Encoding", tc.encoding)
			}
			_, _ = w.Write(tc.body)
			w.close()
			if got := rec.Header().Values("Content-Encoding"); len(got) != 1 || got[0] != "gzip" {
				t.Fatalf("Content-Encoding %v", got)
			}
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("decoded once: %.40q, %v", got, err)
			}
		})
	}
}
