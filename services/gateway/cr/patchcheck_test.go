package cr

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dialCRD is the CRD of the patch decoding tests (testdata/dials-crd.json):
// dials.pd.example.com, v1 (storage, status subresource: spec.a,
// spec.nested.b, an embedded resource spec.emb, status.phase) and v2 (only
// .other).
func dialCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile("testdata/dials-crd.json")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestDecodePatched: a patched object is decoded as upstream's patcher
// decodes it, at its own version: duplicate fields, then metadata's,
// pruned and embedded metadata's unknown fields as strict errors (none
// under Ignore); what does not decode (type meta, malformed metadata) is an
// error whatever the directive.
func TestDecodePatched(t *testing.T) {
	crd := dialCRD(t)
	crd.UID, crd.Generation = "uid-dials", 1
	r, err := newResource(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	a := &Server{schemas: newSchemaCache(0)}
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
