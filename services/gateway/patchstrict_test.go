package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/services/gateway/listing"
)

// dialCRD is the CRD of the patch decoding tests
// (cr/testdata/dials-crd.json): dials.pd.example.com, v1 (storage, status
// subresource: spec.a, spec.nested.b, an embedded resource spec.emb,
// status.phase) and v2 (only .other).
func dialCRD(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("cr/testdata/dials-crd.json")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := json.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestPatchStrictAsV133: a merge or JSON patch (main resource or status)
// whose result has unknown or duplicate fields is, under Strict, v1.33's
// 422 Invalid on the field "patch", quoting the patched object as
// upstream encodes it (keys sorted at every level, HTML characters
// escaped, what the patch wrote as it wrote it) and listing the patch's
// own strict errors, then the patched object's; under Warn they are
// warnings in that order, once; an object that does not decode is the
// same 422 whatever the directive.
func TestPatchStrictAsV133(t *testing.T) {
	g := newTestGateway(t)
	g.createCRD(dialCRD(t))
	const coll = "/apis/pd.example.com/v1/namespaces/default/dials"
	created := g.expect(http.StatusCreated, "POST", coll, map[string]any{
		"apiVersion": "pd.example.com/v1", "kind": "Dial",
		"metadata": map[string]any{"name": "d", "labels": map[string]any{"z": "1", "a": "2"}, "annotations": map[string]any{"n": "<&>"}},
		"spec":     map[string]any{"a": "x"},
	})
	const (
		merge = "application/merge-patch+json"
		jsonp = "application/json-patch+json"
	)
	for _, tc := range []struct {
		name, sub, directive, contentType, body string
		code                                    int
		detail                                  string   // after the quoted object
		quoteHas                                string   // in the quoted object
		warnings                                []string // on 200
	}{
		{name: "merge patch, unknown fields", directive: "Strict", contentType: merge,
			body: `{"spec":{"x1":1,"nested":{"x2":2}}}`, code: 422,
			detail: `strict decoding error: unknown field "spec.nested.x2", unknown field "spec.x1"`},
		{name: "merge patch, duplicate and unknown fields", directive: "Strict", contentType: merge,
			body: `{"spec":{"a":"q","a":"r","zz":1.0}}`, code: 422, quoteHas: `"zz":1.0`,
			detail: `strict decoding error: duplicate field "spec.a", unknown field "spec.zz"`},
		{name: "json patch, unknown metadata field", directive: "Strict", contentType: jsonp,
			body: `[{"op":"add","path":"/metadata/x9","value":9}]`, code: 422,
			detail: `strict decoding error: unknown field "metadata.x9"`},
		{name: "json patch, a value with a duplicate key", directive: "Strict", contentType: jsonp,
			body: `[{"op":"add","path":"/spec/nested","value":{"b":"1","b":"2"}}]`, code: 422, quoteHas: `{"b":"1","b":"2"}`,
			detail: `strict decoding error: json patch duplicate field "[0].value.b", duplicate field "spec.nested.b"`},
		{name: "status merge patch, unknown fields", sub: "/status", directive: "Strict", contentType: merge,
			body: `{"status":{"phase":"C","x7":7}}`, code: 422,
			detail: `strict decoding error: unknown field "status.x7"`},
		{name: "malformed metadata, Ignore", directive: "Ignore", contentType: merge,
			body: `{"metadata":{"labels":5}}`, code: 422,
			detail: "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type map[string]string"},
		{name: "Warn: each strict error once, in order", directive: "Warn", contentType: jsonp,
			body: `[{"op":"add","path":"/spec/nested","value":{"b":"1","b":"2","u":1}}]`, code: 200,
			warnings: []string{`json patch duplicate field "[0].value.b"`, `duplicate field "spec.nested.b"`, `unknown field "spec.nested.u"`}},
		{name: "Warn: unknown fields at the version the patch set, before its 422", directive: "Warn", contentType: jsonp,
			body: `[{"op":"replace","path":"/apiVersion","value":"pd.example.com/v2"}]`, code: 422,
			warnings: []string{`unknown field "spec"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := coll + "/d" + tc.sub + "?fieldValidation=" + tc.directive
			resp, data := g.do("PATCH", path, tc.body, "Content-Type", tc.contentType)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.code, data)
			}
			var warnings []string
			for _, w := range resp.Header.Values("Warning") {
				warnings = append(warnings, strings.TrimSuffix(strings.TrimPrefix(w, `299 - "`), `"`))
			}
			if want := quotedWarnings(tc.warnings); !reflect.DeepEqual(warnings, want) {
				t.Errorf("warnings\n got %q\nwant %q", warnings, want)
			}
			if tc.detail == "" {
				return
			}
			var s metav1.Status
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			msg, ok := strings.CutPrefix(s.Message, ` "" is invalid: patch: Invalid value: `)
			if !ok || !strings.HasSuffix(msg, ": "+tc.detail) || s.Reason != metav1.StatusReasonInvalid {
				t.Fatalf("message %q, want the patched object and %q", s.Message, tc.detail)
			}
			var quoted string
			if _, err := fmt.Sscanf(strings.TrimSuffix(msg, ": "+tc.detail), "%q", &quoted); err != nil {
				t.Fatalf("quoted object in %q: %v", msg, err)
			}
			if d := s.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Field != "patch" || d.Causes[0].Type != metav1.CauseTypeFieldValueInvalid ||
				d.Causes[0].Message != "Invalid value: "+msg || d.Kind != "" || d.Name != "" || d.Group != "" {
				t.Fatalf("details %+v", s.Details)
			}
			if tc.quoteHas != "" {
				if !strings.Contains(quoted, tc.quoteHas) {
					t.Fatalf("quoted object %s lacks %s", quoted, tc.quoteHas)
				}
				return
			}
			// Otherwise it is the encoding of the unstructured object:
			// sorted keys, HTML characters escaped.
			var o map[string]any
			if err := listing.UnmarshalJSON([]byte(quoted), &o); err != nil {
				t.Fatal(err)
			}
			if canon, _ := json.Marshal(o); !bytes.Equal(canon, []byte(quoted)) {
				t.Fatalf("quoted object\n got %s\nwant %s", quoted, canon)
			}
			if m, _ := o["metadata"].(map[string]any); m["uid"] != meta(created)["uid"] || m["resourceVersion"] == nil || !strings.Contains(quoted, `"n":"\u003c\u0026\u003e"`) {
				t.Fatalf("quoted object %s is not the patched object", quoted)
			}
		})
	}
}

// quotedWarnings is how warnings read in Warning headers ("299 - " and
// the text quoted, its quotes escaped) without the prefix and outer quotes.
func quotedWarnings(ws []string) []string {
	var out []string
	for _, w := range ws {
		out = append(out, strings.ReplaceAll(w, `"`, `\"`))
	}
	return out
}
