package webhook

import (
	"bytes"
	"encoding/json"
	"testing"

	utiljson "sigs.k8s.io/json"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// FuzzScanMembers checks the top-level scanner against a case-sensitive JSON
// decoder on valid JSON objects.
func FuzzScanMembers(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"}}`,
		` { "kind" : "K" , "metadata" : { "a" : [ 1, {"}":"]"} ] } , "apiVersion" : "x\"}" } `,
		`{"spec":{"metadata":{"name":"nested"}},"metadata":null,"kind":1.5e3}`,
		`{"apiVersion":"a","apiVersion":"b"}`,
		`{"\u0061piVersion":"escaped","Kind":"case"}`,
		`{"metadata":{"labels":{"a\\":"b\\\""}},"x":[true,false,null]}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var want struct {
			APIVersion json.RawMessage `json:"apiVersion"`
			Kind       json.RawMessage `json:"kind"`
			Metadata   json.RawMessage `json:"metadata"`
		}
		trimmed := bytes.TrimSpace(obj)
		if !json.Valid(obj) || len(trimmed) == 0 || trimmed[0] != '{' || utiljson.UnmarshalCaseSensitivePreserveInts(obj, &want) != nil {
			return
		}
		var h [3]jsonscan.Member
		if err := scanMembers(obj, headKeys, h[:]); err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		for _, c := range []struct {
			name      string
			got, want []byte
		}{{"apiVersion", h[0].Value(obj), want.APIVersion}, {"kind", h[1].Value(obj), want.Kind}, {"metadata", h[2].Value(obj), want.Metadata}} {
			if !bytes.Equal(c.got, c.want) {
				t.Fatalf("%s of %s: got %q, want %q", c.name, obj, c.got, c.want)
			}
		}
	})
}

// benchPair is a ~700-byte stored object (at beta) and what a webhook
// returns for it (at v1), with the metadata as given.
func benchPair(convMeta string) (orig, conv []byte) {
	const meta = `{"annotations":{"note":"an ordinary annotation value, an ordinary annotation value"},"creationTimestamp":"2026-01-01T00:00:00Z","generation":1,"labels":{"app":"bench","team":"converter","tier":"backend"},"name":"bench","namespace":"default","resourceVersion":"123456","uid":"6f1b4a8e-6c1e-4b8f-9d55-2f6a7c1e9b10"}`
	const spec = `"spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/cron-image:1.2.3","replicas":3,"template":{"containers":[{"args":["--a","--b","--c"],"image":"x","name":"c"}]},"schedule":"0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"},"status":{"lastScheduleTime":"2026-01-01T00:05:00Z","phase":"Ready"}`
	if convMeta == "" {
		convMeta = meta
	}
	orig = []byte(`{"apiVersion":"` + beta + `","kind":"CronTab","metadata":` + meta + `,` + spec + `}`)
	conv = []byte(`{"apiVersion":"` + v1 + `","kind":"CronTab","metadata":` + convMeta + `,` + spec + `}`)
	return orig, conv
}

func BenchmarkFinish(b *testing.B) {
	t := &target{kind: "CronTab"}
	for _, bc := range []struct{ name, convMeta string }{
		{"same metadata", ""},
		// Re-encoded by the webhook: same content, another order.
		{"metadata reordered", `{"name":"bench","namespace":"default","uid":"6f1b4a8e-6c1e-4b8f-9d55-2f6a7c1e9b10","resourceVersion":"123456","generation":1,"creationTimestamp":"2026-01-01T00:00:00Z","labels":{"app":"bench","team":"converter","tier":"backend"},"annotations":{"note":"an ordinary annotation value, an ordinary annotation value"}}`},
	} {
		orig, conv := benchPair(bc.convMeta)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(conv)))
			for b.Loop() {
				if _, err := t.finish(orig, conv, beta, v1, 0, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAPIVersionOf(b *testing.B) {
	orig, _ := benchPair("")
	b.SetBytes(int64(len(orig)))
	for b.Loop() {
		if apiVersionOf(orig) != beta {
			b.Fatal("wrong apiVersion")
		}
	}
}
