package cr

import (
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/jsondec"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// An integral float of the body (1.0) reaches the validator as a float
// (230-list-types#6: a set [1, 1.0] holds no duplicate for upstream),
// ints stay ints, and the object itself is not changed.
func TestEncodeForAdmission(t *testing.T) {
	obj := object{
		"spec": map[string]any{
			"setNum": []any{int64(1), float64(1), 2.5, 2.5},
			"big":    float64(9223372036854775808),
			"huge":   1e21,
			"neg":    float64(-3),
			"i":      int64(7),
			"s":      "1.0",
		},
		"metadata": map[string]any{"name": "d4", "generation": int64(1)},
	}
	before := deepCopyObject(obj)
	b, err := encodeForAdmission(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(obj, before) {
		t.Errorf("object changed: %v", obj)
	}
	// As the validator decodes it (its decoder agrees with utiljson's).
	var v any
	if err := utiljson.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	spec := v.(map[string]any)["spec"].(map[string]any)
	want := map[string]any{
		"setNum": []any{int64(1), float64(1), 2.5, 2.5},
		"big":    float64(9223372036854775808),
		"huge":   1e21,
		"neg":    float64(-3),
		"i":      int64(7),
		"s":      "1.0",
	}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("decoded %s as\n %#v\nwant %#v", b, spec, want)
	}
	if g := v.(map[string]any)["metadata"].(map[string]any)["generation"]; g != int64(1) {
		t.Errorf("generation %#v", g)
	}

	// Without floats the encoding is listing.EncodeObject's.
	plain := object{"a": []any{int64(1), "x"}}
	b1, _ := encodeForAdmission(plain)
	b2, _ := listing.EncodeObject(plain)
	if string(b1) != string(b2) {
		t.Errorf("%s != %s", b1, b2)
	}
}

// A label selector that does not parse is a 400 worded as v1.33's
// (330-cr-selectors#22), not as the v0.37 library's.
func TestListOptionsSelectorV133(t *testing.T) {
	cases := []struct{ selector, want string }{
		{"a/b/c", `unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
		{"a=" + strings.Repeat("v", 64), `unable to parse requirement: values[0][a]: Invalid value: "` + strings.Repeat("v", 64) + `": must be no more than 63 characters`},
	}
	for _, c := range cases {
		_, err := listing.ParseOptions(listing.Params{LabelSelector: c.selector})
		if !apierrors.IsBadRequest(err) {
			t.Fatalf("%q: want a 400, got %v", c.selector, err)
		}
		if got := err.Error(); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.selector, got, c.want)
		}
	}
}

// An update's metadata errors of rest.BeforeUpdate's common-field
// validation, as v1.33 (the validator adds the strategy's): labels,
// annotations and owner references twice (ValidateObjectMetaAccessor,
// then ValidateObjectMetaAccessorUpdate), the immutable fields once.
func TestValidateMetaUpdateV133(t *testing.T) {
	r := &resource{group: "meta.adm.example.com", version: "v1", plural: "tokens", kind: "Token", namespaced: true}
	old := object{"metadata": map[string]any{"name": "n2", "namespace": "default", "uid": "u1", "resourceVersion": "3"}}
	obj := object{"metadata": map[string]any{"name": "n2", "namespace": "default", "uid": "u2",
		"labels":          map[string]any{"x y": "v"},
		"ownerReferences": []any{map[string]any{"apiVersion": "v1"}},
	}}
	errs, err := validateMetaUpdate(r, obj, old)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, fielderr.Error(e))
	}
	const namePart = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	owner := []string{
		`metadata.ownerReferences.kind: Invalid value: "": kind must not be empty`,
		`metadata.ownerReferences.name: Invalid value: "": name must not be empty`,
		`metadata.ownerReferences.uid: Invalid value: "": uid must not be empty`,
	}
	want := []string{`metadata.labels: Invalid value: "x y": ` + namePart}
	want = append(want, owner...)
	want = append(want,
		`metadata.resourceVersion: Invalid value: "": must be specified for an update`,
		`metadata.uid: Invalid value: "u2": field is immutable`,
		`metadata.labels: Invalid value: "x y": `+namePart)
	want = append(want, owner...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %q\nwant %q", got, want)
	}

	// A create leaves all metadata validation to the validator.
	if errs, err := validateMetaCreate(r, obj); errs != nil || err != nil {
		t.Errorf("create: %v, %v", errs, err)
	}
}

// An apply or update sends the validator the old object as read
// (cur.reqJSON), not decoded and encoded again for admission: the
// validator's decoder makes the same values of both.
func TestOldObjectAsRead(t *testing.T) {
	for _, in := range []string{
		`{"apiVersion":"x/v1","kind":"K","metadata":{"name":"a","generation":1},"spec":{"i":1,"f":1.0,"e":1e3,"E":2E-1,"z":-0,"zf":-0.0,"big":9223372036854775808,"neg":-9223372036854775808,"huge":1e21,"frac":2.5}}`,
		`{"spec":{"set":[1,1.0,2.5,2.5],"s":"1.0","u":"\u00e9\ud83d\ude00\ud83d","esc":"a\"b\\c\/d\n","html":"<&>"}}`,
		`{"spec":{"a":1,"a":2.0},"metadata":{"labels":{"k":"v"}}}`,
		"{\"spec\":{\"bad\":\"\xff\xc3\"}}",
		` { "spec" : { "nested" : [ [ ], { } , null, true ] } } `,
	} {
		obj, err := listing.DecodeObject([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		enc, err := encodeForAdmission(obj)
		if err != nil {
			t.Fatal(err)
		}
		asRead, err1 := jsondec.Unmarshal([]byte(in))
		reencoded, err2 := jsondec.Unmarshal(enc)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v, %v", in, err1, err2)
		}
		if !reflect.DeepEqual(asRead, reencoded) {
			t.Errorf("%s:\n as read  %#v\n re-encoded %#v", in, asRead, reencoded)
		}
	}
}
