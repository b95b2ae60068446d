package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/services/gateway/listing"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dialCRD is the CRD of the patch decoding tests: dials.pd.example.com,
// v1 (storage, status subresource: spec.a, spec.nested.b, an embedded
// resource spec.emb, status.phase) and v2 (only .other).
func dialCRD() map[string]any {
	str := map[string]any{"type": "string"}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "dials.pd.example.com"},
		"spec": map[string]any{
			"group": "pd.example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "dials", "singular": "dial", "kind": "Dial", "listKind": "DialList"},
			"versions": []any{
				map[string]any{"name": "v1", "served": true, "storage": true,
					"subresources": map[string]any{"status": map[string]any{}},
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"a":      str,
							"nested": map[string]any{"type": "object", "properties": map[string]any{"b": str}},
							"emb": map[string]any{"type": "object", "x-kubernetes-embedded-resource": true,
								"properties": map[string]any{"spec": map[string]any{"type": "object", "properties": map[string]any{"d": str}}}},
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{"phase": str}},
					}}}},
				map[string]any{"name": "v2", "served": true, "storage": false,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{"other": str}}}},
			},
		},
	}
}

// TestDecodePatched: a patched object is decoded as upstream's patcher
// decodes it, at its own version: duplicate fields, then metadata's,
// pruned and embedded metadata's unknown fields as strict errors (none
// under Ignore); what does not decode (type meta, malformed metadata) is an
// error whatever the directive.
func TestDecodePatched(t *testing.T) {
	raw, _ := json.Marshal(dialCRD())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	crd.UID, crd.Generation = "uid-dials", 1
	r, err := newResource(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	a := &kubeAPI{}
	const meta = `"metadata":{"name":"d","namespace":"default"}`
	for _, tc := range []struct {
		name, patched, directive string
		want                     []string // strict errors
		wantErr                  string
	}{
		{name: "known fields", patched: `{"apiVersion":"pd.example.com/v1","kind":"Dial",` + meta + `,"spec":{"a":"x"}}`},
		{name: "unknown fields at every level, in upstream's order",
			patched: `{"apiVersion":"pd.example.com/v1","kind":"Dial","metadata":{"name":"d","zz":1},"spec":{"a":"x","x1":1,"nested":{"x2":2},"emb":{"apiVersion":"v1","kind":"T","metadata":{"q":1},"x3":3}},"status":{"x4":4},"x5":5}`,
			want:    []string{`unknown field "metadata.zz"`, `unknown field "spec.emb.x3"`, `unknown field "spec.nested.x2"`, `unknown field "spec.x1"`, `unknown field "status.x4"`, `unknown field "x5"`, `unknown field "spec.emb.metadata.q"`}},
		{name: "duplicate fields first",
			patched: `{"apiVersion":"pd.example.com/v1","kind":"Dial",` + meta + `,"spec":{"nested":{"b":"1","b":"2","u":1}}}`,
			want:    []string{`duplicate field "spec.nested.b"`, `unknown field "spec.nested.u"`}},
		{name: "Warn is strict too", directive: metav1.FieldValidationWarn,
			patched: `{"apiVersion":"pd.example.com/v1","kind":"Dial",` + meta + `,"spec":{"x":1}}`,
			want:    []string{`unknown field "spec.x"`}},
		{name: "Ignore: no strict errors", directive: metav1.FieldValidationIgnore,
			patched: `{"apiVersion":"pd.example.com/v1","kind":"Dial",` + meta + `,"spec":{"a":"1","a":"2","x":1}}`},
		{name: "at the version the patch set",
			patched: `{"apiVersion":"pd.example.com/v2","kind":"Dial",` + meta + `,"other":"o","spec":{"a":"x"}}`,
			want:    []string{`unknown field "spec"`}},
		{name: "a version the CRD does not have keeps nothing",
			patched: `{"apiVersion":"pd.example.com/v9","kind":"Dial",` + meta + `,"other":"o","spec":{"a":"x"}}`,
			want:    []string{`unknown field "other"`, `unknown field "spec"`}},
		{name: "another kind: metadata only",
			patched: `{"apiVersion":"pd.example.com/v1","kind":"Other","metadata":{"name":"d","zz":1},"spec":{"x":1}}`,
			want:    []string{`unknown field "metadata.zz"`}},
		{name: "malformed metadata, whatever the directive", directive: metav1.FieldValidationIgnore,
			patched: `{"apiVersion":"pd.example.com/v1","kind":"Dial","metadata":{"name":"d","labels":5}}`,
			wantErr: "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type map[string]string"},
		{name: "apiVersion not a string",
			patched: `{"apiVersion":5,"kind":"Dial",` + meta + `}`,
			wantErr: "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .apiVersion of type string"},
		{name: "apiVersion that does not parse",
			patched: `{"apiVersion":"a/b/c","kind":"Dial",` + meta + `}`,
			wantErr: "unexpected GroupVersion string: a/b/c"},
		{name: "no kind: the quoted object",
			patched: `{"apiVersion":"pd.example.com/v1",` + meta + `}`,
			wantErr: `Object 'Kind' is missing in '<quoted>'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			directive := tc.directive
			if directive == "" {
				directive = metav1.FieldValidationStrict
			}
			strictErrs, err := a.decodePatched(r, []byte(tc.patched), directive, func() []byte { return []byte("<quoted>") })
			if tc.wantErr != "" {
				if err == nil || decodeErrorText(err) != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range strictErrs {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("strict errors\n got %q\nwant %q", got, tc.want)
			}
		})
	}
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
	g.createCRD(dialCRD())
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
