package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/api/httpbody"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

func TestMarshalerDecodesRawBody(t *testing.T) {
	m := httpx.RawMarshaler{}
	var body *httpbody.HttpBody
	if err := m.NewDecoder(strings.NewReader(`{"a":1}`)).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if string(body.GetData()) != `{"a":1}` {
		t.Fatalf("data %q", body.GetData())
	}
	if err := m.NewDecoder(strings.NewReader("x")).Decode(new(int)); err == nil {
		t.Fatal("decoding into a non-HttpBody target should fail")
	}
}

func TestMarshalerWritesHttpBodyRaw(t *testing.T) {
	m := httpx.RawMarshaler{}
	hb := &httpbody.HttpBody{ContentType: "text/plain", Data: []byte("ok")}
	if got := m.ContentType(hb); got != "text/plain" {
		t.Fatalf("content type %q", got)
	}
	if got := m.ContentType(&httpbody.HttpBody{}); got != "application/json" {
		t.Fatalf("default content type %q", got)
	}
	b, err := m.Marshal(hb)
	if err != nil || string(b) != "ok" {
		t.Fatalf("marshal: %q %v", b, err)
	}
	if d := m.Delimiter(); len(d) != 0 {
		t.Fatalf("delimiter %q", d)
	}
	// A stream error chunk (after a watch started) becomes an ERROR event.
	ks := kstatus.ToGRPC(apierrors.NewResourceExpired("too old resource version: 1 (5)"))
	st := status.Convert(ks)
	b, err = m.Marshal(map[string]proto.Message{"error": st.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if ev.Type != "ERROR" || ev.Object.Code != 410 || ev.Object.Reason != metav1.StatusReasonExpired || !bytes.HasSuffix(b, []byte("\n")) {
		t.Fatalf("error event: %s", b)
	}
	b, _ = m.Marshal(&spb.Status{Code: int32(codes.NotFound), Message: "nope"})
	if !bytes.Contains(b, []byte(`"code":404`)) {
		t.Fatalf("status: %s", b)
	}
}

func TestErrorHandlerWritesStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code int
		want string
	}{
		{"kube status over gRPC", kstatus.ToGRPC(apierrors.NewNotFound(schema.GroupResource{Group: "g", Resource: "rs"}, "x")), 404, `rs.g "x" not found`},
		{"plain gRPC code", status.Error(codes.Unavailable, "storage down"), 503, "storage down"},
		{"plain error", os.ErrClosed, 500, "file already closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			httpx.ErrorHandler(t.Context(), nil, nil, w, httptest.NewRequest("GET", "/x", nil), tt.err)
			if w.Code != tt.code || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %q", w.Code, w.Header().Get("Content-Type"))
			}
			var s metav1.Status
			if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			if s.Kind != "Status" || s.APIVersion != "v1" || int(s.Code) != tt.code || !strings.Contains(s.Message, tt.want) {
				t.Fatalf("status %+v", s)
			}
		})
	}
	w := httptest.NewRecorder()
	httpx.RoutingErrorHandler(t.Context(), nil, nil, w, nil, http.StatusNotFound)
	if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "text/plain; charset=utf-8" || w.Body.String() != "404 page not found\n" {
		t.Fatalf("routing 404: %d %s %q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	for code, reason := range map[int]metav1.StatusReason{405: metav1.StatusReasonMethodNotAllowed} {
		w := httptest.NewRecorder()
		httpx.RoutingErrorHandler(t.Context(), nil, nil, w, nil, code)
		var s metav1.Status
		_ = json.Unmarshal(w.Body.Bytes(), &s)
		if w.Code != code || s.Reason != reason {
			t.Fatalf("routing %d: %d %+v", code, w.Code, s)
		}
	}
}

func TestWatchRewrite(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/apis/g/v1/widgets?watch=true", "/apis/g/v1/watch/widgets"},
		{"/apis/g/v1/widgets?watch=1&resourceVersion=5", "/apis/g/v1/watch/widgets?resourceVersion=5"},
		{"/apis/g/v1/widgets?watch=yes", "/apis/g/v1/watch/widgets"},
		{"/apis/g/v1/namespaces/ns/widgets?watch=true", "/apis/g/v1/watch/namespaces/ns/widgets"},
		{"/apis/g/v1/widgets/w1?watch=true", "/apis/g/v1/watch/widgets?fieldSelector=metadata.name%3Dw1"},
		{"/apis/g/v1/namespaces/ns/widgets/w1?watch=true&fieldSelector=a%3Db", "/apis/g/v1/watch/namespaces/ns/widgets?fieldSelector=a%3Db%2Cmetadata.name%3Dw1"},
		{"/apis/g/v1/widgets?watch=false", ""},
		{"/apis/g/v1/widgets?watch=0", ""},
		{"/apis/g/v1/widgets", ""},
		{"/apis/g/v1?watch=true", ""},
		{"/apis/g/v1/watch/widgets?watch=true", ""},
		{"/api/v1/namespaces?watch=true", "/api/v1/watch/namespaces"},
		{"/api/v1/namespaces/ns1?watch=1", "/api/v1/watch/namespaces?fieldSelector=metadata.name%3Dns1"},
		{"/api/v1/pods?watch=true", "/api/v1/watch/pods"},
		{"/api/v1/watch/namespaces?watch=true", ""},
		{"/api/v1?watch=true", ""},
	}
	for _, tt := range tests {
		u, _ := url.Parse(tt.in)
		out, ok := httpx.WatchRewrite(u)
		got := ""
		if ok {
			got = out.RequestURI()
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAuth(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Error("credentials leaked past the edge")
		}
		w.WriteHeader(http.StatusTeapot)
	})
	e := &httpx.Edge{Tokens: httpx.NewTokenSet([]string{"good", " other "}), MaxBody: 10, Next: next}
	tests := []struct {
		path, auth string
		code       int
	}{
		{"/apis", "", 401},
		{"/apis", "Bearer bad", 401},
		{"/apis", "Basic good", 401},
		{"/apis", "Bearer good", 418},
		{"/apis", "bearer other", 418},
		{"/version", "", 418},
		{"/healthz", "", 418},
		{"/livez", "", 418},
		{"/readyz", "", 418},
		{"/readyz/x", "", 401},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", tt.path, nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if w.Code != tt.code {
			t.Errorf("%s %q: %d, want %d", tt.path, tt.auth, w.Code, tt.code)
		}
		if tt.code == 401 && w.Body.String() != `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`+"\n" {
			t.Errorf("401 body: %s", w.Body)
		}
	}
	// Bodies over the limit are 413.
	r := httptest.NewRequest("POST", "/apis/g/v/x", strings.NewReader(strings.Repeat("x", 11)))
	r.Header.Set("Authorization", "Bearer good")
	w := httptest.NewRecorder()
	e.ServeHTTP(w, r)
	if w.Code != 413 || !strings.Contains(w.Body.String(), "Request entity too large: limit is 10") {
		t.Errorf("413: %d %s", w.Code, w.Body)
	}
}

func TestReadTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(p, []byte("# comment\n\ntok1,admin,1,\"system:masters\"\ntok2,user,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := httpx.ReadTokenFile(p)
	if err != nil || strings.Join(got, " ") != "tok1 tok2" {
		t.Fatalf("%v %v", got, err)
	}
}

func TestRenderList(t *testing.T) {
	rem := int64(3)
	tests := []struct {
		name string
		page httpx.ListPage
		want string
	}{
		{"empty", httpx.ListPage{ResourceVersion: 7},
			`{"apiVersion":"g/v1","items":[],"kind":"WidgetList","metadata":{"continue":"","resourceVersion":"7"}}`},
		{"page", httpx.ListPage{Items: [][]byte{[]byte(`{"a":1}`), []byte(" {\"b\":2}\n")}, ResourceVersion: 9, ContinueToken: "tok", Remaining: &rem},
			`{"apiVersion":"g/v1","items":[{"a":1},{"b":2}],"kind":"WidgetList","metadata":{"continue":"tok","remainingItemCount":3,"resourceVersion":"9"}}`},
	}
	for _, tt := range tests {
		if got := string(httpx.RenderList("g/v1", "WidgetList", tt.page)); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

func TestWatchFrames(t *testing.T) {
	if got := string(httpx.WatchFrame("ADDED", []byte(`{"kind":"W"}`))); got != `{"type":"ADDED","object":{"kind":"W"}}`+"\n" {
		t.Errorf("frame %q", got)
	}
	if got := string(httpx.BookmarkObject("g/v1", "W", 12, false)); got != `{"apiVersion":"g/v1","kind":"W","metadata":{"resourceVersion":"12"}}` {
		t.Errorf("bookmark %s", got)
	}
	if got := string(httpx.BookmarkObject("g/v1", "W", 12, true)); !strings.Contains(got, `"annotations":{"k8s.io/initial-events-end":"true"}`) {
		t.Errorf("initial-events-end bookmark %s", got)
	}
}

func TestNewInvalidMatchesUpstream(t *testing.T) {
	gk := schema.GroupKind{Group: "stable.example.com", Kind: "CronTab"}
	tests := []struct {
		name string
		errs field.ErrorList
	}{
		{"one", field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), int64(15), "should be less than or equal to 10")}},
		{"two", field.ErrorList{
			field.Invalid(field.NewPath("spec", "cronSpec"), "x", "must match"),
			field.Required(field.NewPath("spec", "image"), ""),
		}},
		{"duplicate messages", field.ErrorList{
			field.Invalid(field.NewPath("spec", "a"), "x", "bad"),
			field.Invalid(field.NewPath("spec", "a"), "x", "bad"),
			field.Forbidden(field.NewPath("spec", "b"), "no"),
		}},
		{"none", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := apierrors.NewInvalid(gk, "x", tt.errs).ErrStatus
			got := httpx.NewInvalid(gk, "x", httpx.CausesFromFieldErrors(tt.errs)).ErrStatus
			if got.Message != want.Message || got.Code != want.Code || got.Reason != want.Reason {
				t.Fatalf("got %d %s %q\nwant %d %s %q", got.Code, got.Reason, got.Message, want.Code, want.Reason, want.Message)
			}
			if len(tt.errs) > 0 && len(got.Details.Causes) == 0 {
				t.Fatalf("no causes")
			}
		})
	}
}

// TestNewInvalidRendersValuesAsV133: compound values in the gateway's own
// field errors (metadata validation) read as upstream v1.33 renders them
// (%#v), not as the v0.37 library does (JSON).
func TestNewInvalidRendersValuesAsV133(t *testing.T) {
	gk := schema.GroupKind{Group: "stable.example.com", Kind: "CronTab"}
	for _, tc := range []struct {
		err  *field.Error
		want string
	}{
		{field.Invalid(field.NewPath("metadata", "finalizers"), []string{"orphan", "foregroundDeletion"}, "finalizer orphan and foregroundDeletion cannot be both set"),
			`CronTab.stable.example.com "x" is invalid: metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion cannot be both set`},
		{field.Invalid(field.NewPath("metadata", "labels"), map[string]string{"a": "b"}, "bad"),
			`CronTab.stable.example.com "x" is invalid: metadata.labels: Invalid value: map[string]string{"a":"b"}: bad`},
		{field.Invalid(nil, nil, "no value"),
			`CronTab.stable.example.com "x" is invalid: <nil>: Invalid value: "null": no value`},
	} {
		if got := httpx.NewInvalid(gk, "x", httpx.CausesFromFieldErrors(field.ErrorList{tc.err})).ErrStatus.Message; got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestNegotiateOutput(t *testing.T) {
	tests := []struct {
		accept, ua string
		yaml       bool
		as, gv     string
		pretty     bool
		notAccept  bool
	}{
		{accept: ""},
		{accept: "application/json"},
		{accept: "application/yaml", yaml: true},
		{accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", as: "Table", gv: "meta.k8s.io/v1"},
		{accept: "application/json;as=Table;v=v1beta1;g=meta.k8s.io", as: "Table", gv: "meta.k8s.io/v1beta1"},
		{accept: "application/json;as=Table;v=v2;g=meta.k8s.io,application/yaml", yaml: true},
		{accept: "application/yaml;as=Table;v=v1;g=meta.k8s.io", yaml: true, as: "Table", gv: "meta.k8s.io/v1"},
		{accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
			as: "PartialObjectMetadataList", gv: "meta.k8s.io/v1"},
		{accept: "application/json;as=Other;v=v1;g=meta.k8s.io", notAccept: true},
		{accept: "application/vnd.kubernetes.protobuf", notAccept: true},
		{accept: "application/vnd.kubernetes.protobuf, */*"},
		{accept: "*/*"},
		{accept: "application/json;pretty=1", pretty: true},
		{accept: "", ua: "curl/8.5.0", pretty: true},
		{accept: "", ua: "kubectl/v1.33.0 (linux/amd64)"},
	}
	for _, tt := range tests {
		got, err := httpx.NegotiateOutput(httpx.RequestMeta{Accept: tt.accept, UserAgent: tt.ua}, httpx.TargetCustomResource)
		if tt.notAccept {
			if s := kstatus.FromError(err); s == nil || s.Code != http.StatusNotAcceptable || s.Message != "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf" {
				t.Errorf("%q: want 406, got %v", tt.accept, err)
			}
			continue
		}
		if err != nil || got.YAML != tt.yaml || got.As != tt.as || got.AsGV != tt.gv || got.Pretty != tt.pretty {
			t.Errorf("%q %q: got %+v %v", tt.accept, tt.ua, got, err)
		}
	}
	body, ct := httpx.OutputFormat{Pretty: true}.Encode([]byte(`{"a":{"b":1}}`))
	if ct != "application/json" || string(body) != "{\n  \"a\": {\n    \"b\": 1\n  }\n}\n" {
		t.Errorf("pretty: %q", body)
	}
	body, ct = httpx.OutputFormat{YAML: true}.Encode([]byte(`{"a":1}`))
	if ct != "application/yaml" || string(body) != "a: 1\n" {
		t.Errorf("yaml: %q %s", body, ct)
	}
}
