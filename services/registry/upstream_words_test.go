package registry

import (
	"fmt"
	"testing"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// TestDecodeWrongKind: a body of another kind is upstream's 400, quoting
// the scheme by the name v1.33 gives it (pkg/runtime/scheme.go:110).
func TestDecodeWrongKind(t *testing.T) {
	_, _, err := decodeCRD([]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConfigMap","metadata":{"name":"x"}}`), "")
	want := `ConfigMap in version "v1" cannot be handled as a CustomResourceDefinition: no kind "ConfigMap" is registered for version "apiextensions.k8s.io/v1" in scheme "pkg/runtime/scheme.go:110"`
	if s := status(err); s.Code != 400 || s.Message != want {
		t.Errorf("got %d %q\nwant 400 %q", s.Code, s.Message, want)
	}
}

// TestPatchDecoding: under fieldValidation Warn (the default) and Strict a
// patch body is strictly decoded first, as upstream: a malformed one is 400
// "error decoding patch: ...", duplicate fields are warnings (Warn) or a
// 422 (Strict); under Ignore a malformed merge patch is the library's
// "Invalid JSON Patch". A missing CRD is 404 whatever the body.
func TestPatchDecoding(t *testing.T) {
	group := newGroup(t)
	name := "patches." + group
	createT(t, crdJSON(group, "patches", "Patch"))
	const merge = "application/merge-patch+json"
	p := func(n, pt, body, validation string) (*registryv1.PatchResponse, error) {
		return testRegistry.Patch(testCtx(t), &registryv1.PatchRequest{Name: n, PatchType: pt, Patch: []byte(body),
			Options: &registryv1.WriteOptions{FieldValidation: validation}})
	}
	for _, tc := range []struct {
		name, pt, body, validation string
		code                       int32
		msg                        string
	}{
		{"malformed merge patch", merge, `{"metadata": `, "", 400, "error decoding patch: unexpected end of JSON input"},
		{"malformed merge patch, Strict", merge, `{"metadata": `, "Strict", 400, "error decoding patch: unexpected end of JSON input"},
		{"malformed merge patch, Ignore", merge, `{"metadata": `, "Ignore", 400, "Invalid JSON Patch"},
		{"malformed json patch", "application/json-patch+json", `[{"op": `, "", 400, "error decoding patch: unexpected end of JSON input"},
	} {
		_, err := p(name, tc.pt, tc.body, tc.validation)
		if s := status(err); s.Code != tc.code || s.Message != tc.msg {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, s.Code, s.Message, tc.code, tc.msg)
		}
	}
	if _, err := p("nope."+group, merge, `{"metadata": `, ""); status(err).Code != 404 {
		t.Errorf("missing CRD: %v", err)
	}
	resp, err := p(name, merge, `{"metadata":{"labels":{"a":"1"},"labels":{"a":"2"}}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(resp.GetWarnings()) != `[duplicate field "metadata.labels"]` {
		t.Errorf("warnings %q", resp.GetWarnings())
	}
	_, err = p(name, merge, `{"metadata":{"labels":{"a":"1"},"labels":{"a":"2"}}}`, "Strict")
	if s := status(err); s.Code != 422 || s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Field != "patch" {
		t.Errorf("duplicate field, Strict: %+v", s)
	}
}
