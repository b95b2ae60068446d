package jsondec

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func same(t *testing.T, in []byte) {
	t.Helper()
	got, gotErr := Unmarshal(in)
	var want any
	wantErr := utiljson.Unmarshal(in, &want)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%q: error %v, utiljson %v", in, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %#v, utiljson %#v", in, got, want)
	}
}

func TestUnmarshalCases(t *testing.T) {
	for _, in := range []string{
		``, ` `, `null`, `true`, `false`, `nul`, `tru`, `0`, `-0`, `-`, `01`, `1.`, `.5`, `1.5`, `1e3`, `1E+3`, `1e-3`, `-1.25e2`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`, `1e400`, `123456789012345678901234567890`,
		`""`, `"a"`, `"a\"b"`, `"\\\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9x"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00"`,
		`"\ud83d\u0041"`, `"\u12"`, `"\x"`, `"\'"`, "\"a\x01b\"", "\"\xff\"", "\"é\"", "\"\xc3\"", `"unterminated`, `"a\`,
		`[]`, `[1,2]`, `[1,]`, `[,1]`, `[1 2]`, `{}`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1,"a":2}`, `{"a":{"b":[1,{"c":null}]}}`,
		` {"a" : [ 1 , 2 ] } `, `{"a":1} x`, `{"a":1}}`, `[1]]`, "\t\r\n[\n1\n]\n", `{"":""}`, `{"a":}`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	} {
		same(t, []byte(in))
	}
}

// TestUnmarshalRandom compares random documents and corruptions of them.
func TestUnmarshalRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "é", "\\n", "\\\"", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "\xff", " ", "\\/", "z"}
	var gen func(depth int) string
	gen = func(depth int) string {
		switch k := r.IntN(9); {
		case k == 0 && depth < 5:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, gen(depth+1))
			}
			return "[" + strings.Join(parts, ",") + "]"
		case k == 1 && depth < 5:
			var parts []string
			for range r.IntN(4) {
				parts = append(parts, `"`+alphabet[r.IntN(len(alphabet))]+`":`+gen(depth+1))
			}
			return "{" + strings.Join(parts, ", ") + "}"
		case k == 2:
			var b strings.Builder
			b.WriteByte('"')
			for range r.IntN(5) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			b.WriteByte('"')
			return b.String()
		case k == 3:
			return []string{"0", "-1", "42", "3.25", "1e2", "-0.0", "12345678901234567890", "5E-1"}[r.IntN(8)]
		case k == 4:
			return []string{"true", "false", "null"}[r.IntN(3)]
		}
		return `{"k":[1,"x",{"y":true}]}`
	}
	for range 20000 {
		doc := []byte(gen(0))
		same(t, doc)
		if len(doc) > 0 {
			mut := append([]byte(nil), doc...)
			const junk = "{}[]\",:\\ 0a-.eu"
			mut[r.IntN(len(mut))] = junk[r.IntN(len(junk))]
			same(t, mut)
			same(t, doc[:r.IntN(len(doc))])
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,"x\u00e9"]}`))
	f.Fuzz(func(t *testing.T, in []byte) { same(t, in) })
}

func BenchmarkUnmarshal(b *testing.B) {
	doc := []byte(`{"apiVersion":"cel.example.com/v1","kind":"CronTab","metadata":{"name":"nightly","namespace":"default","uid":"6a0b1c2d-0000-4000-8000-000000000001","creationTimestamp":"2024-05-31T12:56:35Z","generation":1,"labels":{"app":"cron","tier":"batch"}},"spec":{"cronSpec":"*/5 * * * *","image":"nginx:1.27","replicas":2,"maxReplicas":5,"env":[{"name":"TZ","value":"UTC"},{"name":"LOG_LEVEL","value":"info"}],"labels":{"app":"cron"}},"status":{"availableReplicas":2,"phase":"Running"}}`)
	b.Run("jsondec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Unmarshal(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("utiljson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v any
			if err := utiljson.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
