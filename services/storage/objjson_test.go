package storage

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// decode is the reference: the document as encoding/json sees it.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("invalid JSON %q: %v", b, err)
	}
	return m
}

func withoutRV(m map[string]any) map[string]any {
	out := maps.Clone(m)
	if meta, ok := out["metadata"].(map[string]any); ok {
		meta = maps.Clone(meta)
		delete(meta, "resourceVersion")
		out["metadata"] = meta
	}
	return out
}

func TestResourceVersionSplicing(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"plain", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a"},"spec":{}}`},
		{"existing resourceVersion first", `{"metadata":{"resourceVersion":"12","name":"a"}}`},
		{"existing resourceVersion last", `{"metadata":{"name":"a","resourceVersion":"12"}}`},
		{"existing resourceVersion only", `{"metadata":{"resourceVersion":"12"}}`},
		{"existing resourceVersion twice", `{"metadata":{"resourceVersion":"1","name":"a","resourceVersion":"2"}}`},
		{"resourceVersion as number", `{"metadata":{"name":"a","resourceVersion":12}}`},
		{"empty metadata", `{"kind":"X","metadata":{}}`},
		{"empty metadata with spaces", `{"kind":"X","metadata":{  }}`},
		{"no metadata", `{"kind":"X"}`},
		{"empty object", `{}`},
		{"null metadata", `{"kind":"X","metadata":null}`},
		{"metadata after spec", `{"spec":{"a":1},"metadata":{"name":"a"}}`},
		{"nested metadata in spec", `{"spec":{"metadata":{"resourceVersion":"9","name":"inner"},"template":{"metadata":{"labels":{"a":"b"}}}},"metadata":{"name":"outer"}}`},
		{"nested metadata before outer", `{"spec":{"metadata":{}},"metadata":{"name":"outer","resourceVersion":"5"},"status":{"metadata":{"resourceVersion":"7"}}}`},
		{"metadata key in a string", `{"spec":{"s":"\"metadata\":{\"resourceVersion\":\"1\"}"},"metadata":{"name":"a"}}`},
		{"braces and escapes in strings", `{"metadata":{"name":"a","annotations":{"x":"}{][\\\"","y":"\u007b"}},"spec":["{","}"]}`},
		{"whitespace everywhere", "  {\n  \"metadata\" :\t{ \"name\" : \"a\" ,\n \"resourceVersion\" : \"3\" } ,\r\n \"spec\" : { } }  "},
		{"escaped key", `{"metad\u0061ta":{"name":"a","resourceV\u0065rsion":"4"}}`},
		{"duplicate metadata: last wins", `{"metadata":{"name":"first"},"metadata":{"name":"second","resourceVersion":"1"}}`},
		{"numbers and literals", `{"metadata":{"name":"a","generation":1,"deletionGracePeriodSeconds":-1.5e3},"spec":{"t":true,"f":false,"n":null}}`},
		{"unicode", `{"metadata":{"name":"ä","annotations":{"k":"日本"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			stored, err := stripResourceVersion(in)
			if err != nil {
				t.Fatalf("strip: %v", err)
			}
			got := decode(t, stored)
			if meta, ok := got["metadata"].(map[string]any); ok {
				if _, has := meta["resourceVersion"]; has {
					t.Fatalf("stored object keeps resourceVersion: %s", stored)
				}
			}
			if want := withoutRV(decode(t, in)); !reflect.DeepEqual(got, want) {
				t.Fatalf("strip changed the object:\n got %s\nwant %v", stored, want)
			}
			// Nested metadata must be untouched byte for byte.
			if strings.Contains(tt.in, `"spec":{"metadata":{"resourceVersion":"9"`) && !strings.Contains(string(stored), `"spec":{"metadata":{"resourceVersion":"9"`) {
				t.Fatalf("nested metadata changed: %s", stored)
			}

			out, err := withResourceVersion(stored, 1234567890123)
			if err != nil {
				t.Fatalf("withResourceVersion: %v", err)
			}
			res := decode(t, out)
			meta, _ := res["metadata"].(map[string]any)
			if meta["resourceVersion"] != "1234567890123" {
				t.Fatalf("resourceVersion not set: %s", out)
			}
			want := withoutRV(decode(t, in))
			if wm, ok := want["metadata"].(map[string]any); ok {
				wm["resourceVersion"] = "1234567890123"
			} else {
				want["metadata"] = map[string]any{"resourceVersion": "1234567890123"}
			}
			if !reflect.DeepEqual(res, want) {
				t.Fatalf("read object:\n got %s\nwant %v", out, want)
			}
			// Reading an object that (against the rules) still holds a
			// resourceVersion replaces it.
			again, err := withResourceVersion(out, 7)
			if err != nil {
				t.Fatal(err)
			}
			if m := decode(t, again)["metadata"].(map[string]any); m["resourceVersion"] != "7" {
				t.Fatalf("resourceVersion not replaced: %s", again)
			}
		})
	}
}

func TestStripKeepsBytesWithoutResourceVersion(t *testing.T) {
	in := []byte(`{ "metadata" : { "name" : "a" }, "spec" : { "x" : 1 } }`)
	out, err := stripResourceVersion(in)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &in[0] {
		t.Fatal("an object without resourceVersion should be stored as given")
	}
}

func TestStripRejects(t *testing.T) {
	for _, in := range []string{``, `   `, `[]`, `"x"`, `1`, `null`, `{"a":}`, `{"metadata":{"name":"a"}`, `{"a":1}x`} {
		if _, err := stripResourceVersion([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestLookupAndFieldValue(t *testing.T) {
	doc := []byte(`{"metadata":{"name":"n","uid":"u-1"},"spec":{"color":"bl\u0075e","size":3,"big":12345678901234567890,"ratio":1.50,"whole":2.0,"on":true,"off":false,"none":null,"obj":{"a":1},"metadata":{"name":"inner"}},"kind":"CronTab"}`)
	tests := []struct {
		path []string
		want string
		ok   bool
	}{
		{[]string{"metadata", "name"}, "n", true},
		{[]string{"metadata", "uid"}, "u-1", true},
		{[]string{"kind"}, "CronTab", true},
		{[]string{"spec", "color"}, "blue", true},
		{[]string{"spec", "size"}, "3", true},
		{[]string{"spec", "big"}, "1.2345678901234567e+19", true},
		{[]string{"spec", "ratio"}, "1.5", true},
		{[]string{"spec", "whole"}, "2", true},
		{[]string{"spec", "on"}, "true", true},
		{[]string{"spec", "off"}, "false", true},
		{[]string{"spec", "none"}, "", true},
		{[]string{"spec", "obj"}, "map[a:1]", true},
		{[]string{"spec", "metadata", "name"}, "inner", true},
		{[]string{"spec", "missing"}, "", false},
		{[]string{"spec", "color", "deeper"}, "", false},
		{[]string{"status", "x"}, "", false},
	}
	for _, tt := range tests {
		raw, ok, err := jsonscan.Lookup(doc, tt.path...)
		if err != nil {
			t.Fatalf("%v: %v", tt.path, err)
		}
		if ok != tt.ok || fieldValue(raw) != tt.want {
			t.Errorf("%v: got %q (%v), want %q (%v)", tt.path, fieldValue(raw), ok, tt.want, tt.ok)
		}
	}
}

// TestAppendWithResourceVersion: appending writes what withResourceVersion
// returns.
func TestAppendWithResourceVersion(t *testing.T) {
	for _, in := range []string{
		`{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a","namespace":"n"},"spec":{"x":[1,{"y":"}"}]}}`,
		` { "kind" : "K" , "metadata" : { } , "spec" : 1 }`,
		`{"spec":{"metadata":{"name":"nested"}}}`,
		`{"metadata":{"name":"a","resourceVersion":"3"}}`,
		`{"metadata":null}`,
		`{"metadata":{"name":"a"},"metadata":{"name":"b"}}`,
	} {
		want, err := withResourceVersion([]byte(in), 42)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendWithResourceVersion([]byte("prefix"), []byte(in), 42)
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n got %s\nwant prefix%s (%v)", in, got, want, err)
		}
	}
}

func BenchmarkAppendWithResourceVersion(b *testing.B) {
	b.SetBytes(int64(len(benchCronTab)))
	buf := make([]byte, 0, 2*len(benchCronTab))
	for b.Loop() {
		var err error
		if buf, err = appendWithResourceVersion(buf[:0], benchCronTab, 123456); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSelectorMatches(b *testing.B) {
	sel, err := newSelector("app=bench,tier!=frontend", "metadata.namespace=default,spec.cronSpec=* * * * */5", []string{"spec.cronSpec"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		if ok, err := sel.matches(benchCronTab); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkCheckPreconditions(b *testing.B) {
	req := &storagev1.DeleteRequest{PreconditionUid: "6f1b4a8e-6c1e-4b8f-9d55-2f6a7c1e9b10"}
	k := objectKey{raw: "/registry/bench.example.com/crontabs/default/bench"}
	b.SetBytes(int64(len(benchCronTab)))
	for b.Loop() {
		if err := checkPreconditions(k, benchCronTab, 1, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadObjectAppend is what a list does per item: the read checks
// and the resourceVersion splice (against BenchmarkAppendWithResourceVersion,
// the splice alone).
func BenchmarkReadObjectAppend(b *testing.B) {
	b.SetBytes(int64(len(benchCronTab)))
	buf := make([]byte, 0, 2*len(benchCronTab))
	for b.Loop() {
		e, err := readEdit(benchCronTab, 123456)
		if err != nil {
			b.Fatal(err)
		}
		buf = jsonscan.AppendEdits(buf[:0], benchCronTab, e)
	}
}

// TestResourceVersionInKeyOrder: in an object whose metadata keys are
// plain and sorted (encoding/json's form, which crdplane and upstream
// write) resourceVersion goes where encoding/json puts it, so the read
// object is byte for byte the encoding of its decoding; elsewhere first.
func TestResourceVersionInKeyOrder(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"metadata":{"annotations":{"a":"b"},"name":"a","uid":"u"},"spec":{"x":1}}`,
			`{"metadata":{"annotations":{"a":"b"},"name":"a","resourceVersion":"5","uid":"u"},"spec":{"x":1}}`},
		{`{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a","resourceVersion":"5"}}`},
		{`{"metadata":{"uid":"u"}}`, `{"metadata":{"resourceVersion":"5","uid":"u"}}`},
		{`{"metadata":{"selfLink":"s","uid":"u"}}`, `{"metadata":{"resourceVersion":"5","selfLink":"s","uid":"u"}}`},
		{`{"metadata":{}}`, `{"metadata":{"resourceVersion":"5"}}`},
		{`{"metadata":{ "name" : "a" , "uid" : "u" }}`, `{"metadata":{ "name" : "a" , "resourceVersion":"5","uid" : "u" }}`},
		// not in order, or a key with an escape: first
		{`{"metadata":{"name":"a","annotations":{}}}`, `{"metadata":{"resourceVersion":"5","name":"a","annotations":{}}}`},
		{`{"metadata":{"n\u0061me":"a","uid":"u"}}`, `{"metadata":{"resourceVersion":"5","n\u0061me":"a","uid":"u"}}`},
		{`{"metadata":{"name":"a","name":"b"}}`, `{"metadata":{"resourceVersion":"5","name":"a","name":"b"}}`},
	} {
		got, err := withResourceVersion([]byte(tc.in), 5)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tc.in, got, err, tc.want)
		}
	}
	// A whole object as crdplane stores it: the read bytes are its
	// decoding encoded again.
	in := []byte(`{"apiVersion":"g/v1","kind":"K","metadata":{"annotations":{"note":"x"},"creationTimestamp":"2026-12-03T12:00:00Z","generation":2,"labels":{"app":"a"},"managedFields":[{"apiVersion":"g/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:x":{}}},"manager":"m","operation":"Apply","time":"2026-12-03T12:00:00Z"}],"name":"a","namespace":"default","uid":"6a0b1c2d"},"spec":{"x":1}}`)
	out, err := readObject(in, 123)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(m)
	if string(again) != string(out) {
		t.Errorf("read object not in encoding/json's form:\n got %s\nwant %s", out, again)
	}
}
