package listing

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// sameDecoding checks that DecodeObject (one pass without reflection for
// well-formed JSON) gives what encoding/json's Decoder gives: the value, or
// the error, worded the same.
func sameDecoding(t *testing.T, in []byte) {
	t.Helper()
	got, gotErr := DecodeObject(in)
	want, wantErr := decodeObjectReflect(in)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%q: error %v, encoding/json %v", in, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %#v, encoding/json %#v", in, got, want)
	}
}

func TestDecodeObjectCases(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `"x"`, `1`, `{}`, ` {} `, `{"a":1}`, `{"a":1} x`, `{"a":1}{"b":2}`, `{"a":1}}`, `{"a":1,}`, `{"a" 1}`,
		`{"a":1,"a":2}`, `{"n":[0,-0,1.0,1e3,1E+3,-1.25e2,9223372036854775807,9223372036854775808,-9223372036854775809,1e400,123456789012345678901234567890]}`,
		`{"s":["","a\"b","\\\/\b\f\n\r\t","\u00e9","\ud83d\ude00","\ud83d","\ud83dx","\ude00","\ud83d\u0041","é"]}`,
		"{\"s\":\"\xff\"}", "{\"s\":\"\xc3\"}", "{\"s\":\"a\x01b\"}", `{"s":"\u12"}`, `{"s":"\x"}`, `{"s":"unterminated`,
		`{"apiVersion":"example.com/v1","kind":"W","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"spec":{"x":[1,{"y":null}],"z":true}}`,
		"\t\r\n{\n}\n", `{"":""}`, `{"a":}`,
		`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
	} {
		sameDecoding(t, []byte(in))
	}
}

// TestDecodeObjectRandom compares random objects and corruptions of them.
func TestDecodeObjectRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := []string{"a", "é", "\\n", "\\\"", "\\u00e9", "\\ud83d", "\xff", "metadata", "spec"}
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := r.IntN(8); {
		case k == 0 && depth < 4:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, gen(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		case k <= 2 && depth < 4:
			return genObject(r, keys, depth, gen)
		case k == 3:
			return []string{"0", "-1", "42", "3.25", "1e2", "-0.0", "12345678901234567890", "5E-1"}[r.IntN(8)]
		case k == 4:
			return []string{"true", "false", "null"}[r.IntN(3)]
		case k == 5:
			return `"` + keys[r.IntN(len(keys))] + `"`
		}
		return `{"k":[1,"x",{"y":true}]}`
	}
	const junk = "{}[]\",:\\ 0a-.eu"
	for range 10000 {
		doc := []byte(genObject(r, keys, 0, gen))
		sameDecoding(t, doc)
		if obj, err := DecodeObject(doc); err == nil {
			sameEncoding(t, obj)
		}
		mut := append([]byte(nil), doc...)
		mut[r.IntN(len(mut))] = junk[r.IntN(len(junk))]
		sameDecoding(t, mut)
		sameDecoding(t, doc[:r.IntN(len(doc))])
	}
}

// sameEncoding checks that EncodeObject (pkg/jsonenc) writes the bytes
// encoding/json.Marshal writes.
func sameEncoding(t *testing.T, obj Object) {
	t.Helper()
	got, gotErr := EncodeObject(obj)
	want, wantErr := json.Marshal(obj)
	if (gotErr == nil) != (wantErr == nil) || string(got) != string(want) {
		t.Fatalf("%#v: %s (%v), encoding/json %s (%v)", obj, got, gotErr, want, wantErr)
	}
}

// What the gateway puts in objects besides decoded JSON values (marked
// floats for admission, typed slices and maps) is encoded as
// encoding/json encodes it.
func TestEncodeObjectCases(t *testing.T) {
	for _, obj := range []Object{
		nil, {}, {"a": nil, "b": true, "c": int64(-3), "d": 2.5, "e": 1e21, "f": float64(1), "g": "<&>\u2028\"\x01\xff"},
		{"n": json.Number("1.0"), "i": 7, "ss": []string{"x", "y"}, "ms": map[string]string{"k": "v"}, "nested": map[string]any{"l": []any{map[string]any{}, []any{}}}},
		{"nilmap": map[string]any(nil), "nilslice": []any(nil), "t": "\u00e9\U0001F600"},
	} {
		sameEncoding(t, obj)
	}
}

func genObject(r *rand.Rand, keys []string, depth int, gen func(int) string) string {
	var parts []string
	for range r.IntN(4) {
		parts = append(parts, `"`+keys[r.IntN(len(keys))]+`":`+gen(depth+1))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func FuzzDecodeObject(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x\u00e9"],"b":{"c":null}}`))
	f.Add([]byte(`{"a":1} {"b":2}`))
	f.Fuzz(func(t *testing.T, in []byte) { sameDecoding(t, in) })
}

func BenchmarkDecodeObject(b *testing.B) {
	doc := []byte(`{"apiVersion":"bench.example.com/v1","kind":"Widget0","metadata":{"name":"w1","namespace":"default","uid":"6a0b1c2d-0000-4000-8000-000000000001","resourceVersion":"12345","generation":3,"creationTimestamp":"2026-12-03T12:56:35Z","labels":{"app":"bench"},"managedFields":[{"manager":"bench","operation":"Apply","apiVersion":"bench.example.com/v1","time":"2026-12-03T12:56:35Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:image":{},"f:mode":{},"f:ports":{"k:{\"name\":\"http\"}":{".":{},"f:name":{},"f:port":{}}},"f:replicas":{}}}}]},"spec":{"replicas":3,"image":"registry.example.com/team/app:1111111111111111","mode":"Safe","ports":[{"name":"http","port":80},{"name":"https","port":443}],"labels":{"label-0":"vvvvvvvvvvvvvvvvvvvv","label-1":"vvvvvvvvvvvvvvvvvvvv"},"schedule":"*/5 * * * *"}}`)
	for _, c := range []struct {
		name string
		fn   func([]byte) (Object, error)
	}{{"jsondec", DecodeObject}, {"encoding-json", decodeObjectReflect}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
