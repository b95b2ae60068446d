package patch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objsize"
)

// rejected is upstream's answer to a JSON patch that does not apply:
// applyJSPatch hands the library's error to NewGenericServerResponse(422,
// ...), which keeps none of it (read back from upstream v1.33:
// {"message":"the server rejected our request due to an error in our
// request","reason":"Invalid","details":{},"code":422}).
var rejected = metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
	Message: "the server rejected our request due to an error in our request", Details: &metav1.StatusDetails{},
}

func badRequest(msg string) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: msg}
}

// wantStatus compares an error's Status with want (kind and apiVersion
// aside).
func wantStatus(t *testing.T, err error, want metav1.Status) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d %q", want.Code, want.Message)
	}
	got := *kstatus.FromError(err)
	got.TypeMeta = metav1.TypeMeta{}
	if got.Details != nil && got.Details.Causes == nil {
		got.Details.Causes = nil
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("status\n got %s\nwant %s", g, w)
	}
}

// The JSON patch failures, each answered as upstream v1.33 answers it
// (gopkg.in/evanphx/json-patch.v4 through applyJSPatch's 400/422 mapping).
func TestJSONPatchFailures(t *testing.T) {
	orig := []byte(`{"apiVersion":"v1","kind":"K","metadata":{"name":"x"},"spec":{"a":1,"l":[1,2]}}`)
	tests := []struct {
		name, patch string
		want        metav1.Status
	}{
		{"unknown op", `[{"op":"bogus","path":"/spec/a"}]`, rejected},
		{"op missing", `[{"path":"/spec/a"}]`, rejected},
		{"op not a string", `[{"op":1,"path":"/spec/a"}]`, rejected},
		{"path through a missing parent", `[{"op":"add","path":"/spec/x/y","value":1}]`, rejected},
		{"path without a leading slash", `[{"op":"add","path":"spec","value":1}]`, rejected},
		{"path missing", `[{"op":"add","value":1}]`, rejected},
		{"failed test", `[{"op":"test","path":"/spec/a","value":2}]`, rejected},
		{"test of a missing path", `[{"op":"test","path":"/spec/zz","value":2}]`, rejected},
		{"remove of a missing key", `[{"op":"remove","path":"/spec/zz"}]`, rejected},
		{"remove past the end of a list", `[{"op":"remove","path":"/spec/l/5"}]`, rejected},
		{"remove of a list index that is not a number", `[{"op":"remove","path":"/spec/l/x"}]`, rejected},
		{"move from a missing path", `[{"op":"move","from":"/spec/zz","path":"/spec/b"}]`, rejected},
		{"copy without from", `[{"op":"copy","path":"/spec/b"}]`, rejected},
		{"a patch that is an object", `{"op":"add"}`, badRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch")},
		{"an operation that is a number", `[1]`, badRequest("json: cannot unmarshal number into Go value of type jsonpatch.Operation")},
		{"not JSON", `not json`, badRequest("invalid character 'o' in literal null (expecting 'u')")},
		{"empty", ``, badRequest("unexpected end of JSON input")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Apply(orig, JSONPatch, []byte(tt.patch))
			if err == nil {
				t.Fatalf("applied: %s", out)
			}
			wantStatus(t, err, tt.want)
		})
	}
	// What upstream applies: null (no operations), an add without a value
	// (null), a replace of a missing key (the library adds it).
	for _, p := range []string{`null`, `[]`, `[{"op":"add","path":"/spec/a"}]`, `[{"op":"replace","path":"/spec/zz","value":1}]`} {
		if _, err := Apply(orig, JSONPatch, []byte(p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestMergePatchFailures(t *testing.T) {
	orig := []byte(`{"metadata":{"name":"x"}}`)
	for _, p := range []string{`not json`, `null`, `1`, `"x"`, ``} {
		_, err := Apply(orig, MergePatch, []byte(p))
		wantStatus(t, err, badRequest("Invalid JSON Patch"))
	}
	// An original that is not a document: upstream returns the library's
	// error as it is, a plain 500.
	_, err := Apply([]byte(`{bad`), MergePatch, []byte(`{"a":1}`))
	wantStatus(t, err, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: "Invalid JSON Document"})
}

// Upstream's strict pre-decoding (fieldValidation Warn, the default, and
// Strict), read back from upstream v1.33: the Go types it names are
// upstream's.
func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		typ, body string
		want      metav1.Status
	}{
		{JSONPatch, `{"op":"add"}`, badRequest("error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp")},
		{JSONPatch, `[1]`, badRequest("error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp")},
		{JSONPatch, `[{"op":1}]`, badRequest("error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string")},
		{JSONPatch, `not json`, badRequest("error decoding patch: invalid character 'o' in literal null (expecting 'u')")},
		{MergePatch, `[1]`, badRequest("error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}")},
	}
	for _, tt := range tests {
		_, err := DecodeStrict(tt.typ, []byte(tt.body))
		wantStatus(t, err, tt.want)
	}
	errs, err := DecodeStrict(JSONPatch, []byte(`[{"op":"add","op":"add","path":"/a","value":1}]`))
	if err != nil || len(errs) != 1 || errs[0].Error() != `json patch duplicate field "[0].op"` {
		t.Fatalf("strict errors %v, %v", errs, err)
	}
	errs, err = DecodeStrict(MergePatch, []byte(`{"a":1,"a":2}`))
	if err != nil || len(errs) != 1 || errs[0].Error() != `duplicate field "a"` {
		t.Fatalf("strict errors %v, %v", errs, err)
	}
	if errs, err := DecodeStrict(StrategicMerge, []byte(`not json`)); errs != nil || err != nil {
		t.Fatalf("strategic merge: %v, %v", errs, err)
	}
}

// copyBomb is a JSON patch of one add of 1,000 bytes and n copies of spec
// into itself: unbounded, its result doubles with every copy (n=25: 32
// GB).
func copyBomb(n int) []byte {
	ops := []map[string]any{{"op": "add", "path": "/spec/p", "value": strings.Repeat("x", 1000)}}
	for i := range n {
		ops = append(ops, map[string]any{"op": "copy", "from": "/spec", "path": fmt.Sprintf("/spec/c%d", i)})
	}
	b, _ := json.Marshal(ops)
	return b
}

func TestCopyLimitIsUpstreams(t *testing.T) {
	if got := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit); got != MaxCopyBytes {
		t.Fatalf("AccumulatedCopySizeLimit %d, want %d", got, MaxCopyBytes)
	}
	// As upstream, a lower limit set elsewhere in the process stays.
	defer atomic.StoreInt64(&jsonpatch.AccumulatedCopySizeLimit, MaxCopyBytes)
	atomic.StoreInt64(&jsonpatch.AccumulatedCopySizeLimit, 1024)
	setCopyLimit(MaxCopyBytes)
	if got := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit); got != 1024 {
		t.Fatalf("a lower limit was raised to %d", got)
	}
	atomic.StoreInt64(&jsonpatch.AccumulatedCopySizeLimit, 0)
	setCopyLimit(MaxCopyBytes)
	if got := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit); got != MaxCopyBytes {
		t.Fatalf("no limit stays %d", got)
	}
}

// The copy bomb fails fast, as upstream's 422, without the memory.
func TestCopyBomb(t *testing.T) {
	orig := []byte(`{"apiVersion":"v1","kind":"K","metadata":{"name":"x"},"spec":{}}`)
	bomb := copyBomb(25)
	if len(bomb) > 4096 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := Apply(orig, JSONPatch, bomb)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	wantStatus(t, err, rejected)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("copy bomb: %s, %d MiB allocated", took, alloc>>20)
	if took > time.Second {
		t.Errorf("took %s", took)
	}
	if alloc > 64<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
	// Copies under the limit apply.
	if _, err := Apply(orig, JSONPatch, copyBomb(8)); err != nil {
		t.Fatalf("8 copies (256 KiB): %v", err)
	}
}

// A result larger than objsize.MaxBytes is refused as etcd would refuse it.
func TestResultSize(t *testing.T) {
	orig := []byte(`{"spec":{}}`)
	big := strings.Repeat("x", 2<<20)
	p := fmt.Sprintf(`[{"op":"add","path":"/spec/a","value":%q},{"op":"copy","from":"/spec/a","path":"/spec/b"}]`, big)
	_, err := Apply(orig, JSONPatch, []byte(p))
	wantStatus(t, err, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: objsize.EtcdTooLargeMessage})
	mp := fmt.Sprintf(`{"spec":{"a":%q,"b":%q}}`, big, big)
	_, err = Apply(orig, MergePatch, []byte(mp))
	wantStatus(t, err, metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: objsize.EtcdTooLargeMessage})
	if _, err := Apply(orig, MergePatch, []byte(fmt.Sprintf(`{"spec":{"a":%q}}`, big))); err != nil {
		t.Fatalf("2 MiB: %v", err)
	}
}
