package discovery

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/kubewire"
)

// TestDiscoveryTarget: the groups crdplane serves itself negotiate as
// kube-apiserver's built-in groups (go-restful's 406 for an Accept it
// refuses), the custom resources' groups as the CRD handler's.
func TestDiscoveryTarget(t *testing.T) {
	for _, tc := range []struct {
		group string
		want  kubewire.Target
	}{
		{"", kubewire.TargetRootDiscovery},
		{"apiextensions.k8s.io", kubewire.TargetBuiltinDiscovery},
		{"authentication.k8s.io", kubewire.TargetBuiltinDiscovery},
		{"authorization.k8s.io", kubewire.TargetBuiltinDiscovery},
		{"stable.example.com", kubewire.TargetDiscovery},
		{"authentication.k8s.io.example.com", kubewire.TargetDiscovery},
	} {
		if got := discoveryTarget(tc.group); got != tc.want {
			t.Errorf("discoveryTarget(%q) = %v, want %v", tc.group, got, tc.want)
		}
	}
}

// TestConditional: the conditional headers answered as net/http's
// ServeContent (upstream's OpenAPI handlers serve with it) answers them,
// each case put to ServeContent itself: the same status, 200, 304 or 412.
func TestConditional(t *testing.T) {
	const etag = `"ABC"`
	modified := time.Date(2026, 12, 2, 10, 0, 0, 500_000_000, time.UTC)
	at := func(d time.Duration) string { return modified.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		name string
		c    conditional
		want int
	}{
		{"none", conditional{}, 200},
		{"none-match", conditional{ifNoneMatch: `"ABC"`}, 304},
		{"none-match weak", conditional{ifNoneMatch: `W/"ABC"`}, 304},
		{"none-match list", conditional{ifNoneMatch: `"x", "ABC"`}, 304},
		{"none-match list, commas", conditional{ifNoneMatch: `,,"x" ,"ABC",`}, 304},
		{"none-match star", conditional{ifNoneMatch: "*"}, 304},
		{"none-match other", conditional{ifNoneMatch: `"x"`}, 200},
		{"none-match case", conditional{ifNoneMatch: `"abc"`}, 200},
		{"none-match unquoted", conditional{ifNoneMatch: `ABC`}, 200},
		{"none-match after a malformed tag", conditional{ifNoneMatch: `"x" junk, "ABC"`}, 200},
		{"none-match wins over modified-since", conditional{ifNoneMatch: `"x"`, ifModifiedSince: at(time.Hour)}, 200},
		{"modified-since later", conditional{ifModifiedSince: at(time.Hour)}, 304},
		{"modified-since the same second", conditional{ifModifiedSince: at(0)}, 304},
		{"modified-since earlier", conditional{ifModifiedSince: at(-time.Second)}, 200},
		{"modified-since not a date", conditional{ifModifiedSince: "yesterday"}, 200},
		{"modified-since RFC 850", conditional{ifModifiedSince: modified.Add(time.Hour).Format(time.RFC850)}, 304},
		{"match", conditional{ifMatch: `"ABC"`}, 200},
		{"match star", conditional{ifMatch: "*"}, 200},
		{"match weak", conditional{ifMatch: `W/"ABC"`}, 412},
		{"match other", conditional{ifMatch: `"x"`}, 412},
		{"match list", conditional{ifMatch: `"x", "ABC"`}, 200},
		{"match malformed", conditional{ifMatch: `ABC`}, 412},
		{"match then none-match", conditional{ifMatch: `"ABC"`, ifNoneMatch: `"ABC"`}, 304},
		{"match wins over unmodified-since", conditional{ifMatch: `"ABC"`, ifUnmodifiedSince: at(-time.Hour)}, 200},
		{"unmodified-since earlier", conditional{ifUnmodifiedSince: at(-time.Hour)}, 412},
		{"unmodified-since later", conditional{ifUnmodifiedSince: at(time.Hour)}, 200},
		{"unmodified-since not a date", conditional{ifUnmodifiedSince: "never"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/openapi/v3/apis/example.com/v1", nil)
			for h, v := range map[string]string{"If-Match": tc.c.ifMatch, "If-Unmodified-Since": tc.c.ifUnmodifiedSince,
				"If-None-Match": tc.c.ifNoneMatch, "If-Modified-Since": tc.c.ifModifiedSince} {
				if v != "" {
					r.Header.Set(h, v)
				}
			}
			w := httptest.NewRecorder()
			w.Header().Set("Etag", etag)
			http.ServeContent(w, r, "", modified, strings.NewReader("{}"))
			if w.Code != tc.want {
				t.Fatalf("the case is wrong: ServeContent answers %d, the case wants %d", w.Code, tc.want)
			}
			if got := tc.c.evaluate(etag, modified); got != tc.want {
				t.Errorf("evaluate = %d, ServeContent answers %d", got, tc.want)
			}
		})
	}
	// a document whose change time is unknown ignores the dates
	if got := (conditional{ifModifiedSince: at(time.Hour)}).evaluate(etag, time.Time{}); got != 200 {
		t.Errorf("If-Modified-Since without a modification time: %d, want 200", got)
	}
	if got := (conditional{ifNoneMatch: `""`}).evaluate("", modified); got != 200 {
		t.Errorf(`If-None-Match "" matched a document without an ETag: %d`, got)
	}
}
