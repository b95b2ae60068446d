package patch

import (
	"encoding/json"
	"runtime/metrics"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/objsize"
)

// heapAllocated returns the bytes the process has allocated so far (cheap:
// no stop-the-world, unlike runtime.ReadMemStats).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzApply: a merge patch or JSON patch of a stored object (valid JSON)
// either applies, giving valid JSON no larger than objsize.MaxBytes, or
// fails with a Status error; never a panic, and the memory it takes stays
// proportional to its input (the copy bound: a few copies must not double
// the document into gigabytes).
func FuzzApply(f *testing.F) {
	obj := []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"cronSpec":"* * * * */5","replicas":1,"list":[1,2,{"a":null}]}}`)
	f.Add(obj, false, []byte(`{"spec":{"replicas":null,"image":"nginx"},"metadata":{"labels":{"x":null}}}`))
	f.Add(obj, false, []byte(`[1,2]`))
	f.Add(obj, true, []byte(`[{"op":"replace","path":"/spec/replicas","value":3},{"op":"add","path":"/spec/list/-","value":{"b":[]}},{"op":"remove","path":"/metadata/labels/x"}]`))
	f.Add(obj, true, []byte(`[{"op":"test","path":"/spec/list/2","value":{"a":null}},{"op":"move","from":"/spec/list","path":"/spec/moved"},{"op":"copy","from":"/spec","path":"/spec/moved/0"}]`))
	f.Add(obj, true, []byte(`[{"op":"copy","from":"/spec","path":"/spec/c1"},{"op":"copy","from":"/spec","path":"/spec/c2"},{"op":"copy","from":"/spec","path":"/spec/c3"}]`))
	f.Add([]byte(`[]`), true, []byte(`[{"op":"add","path":"/-1","value":1}]`))
	f.Fuzz(func(t *testing.T, original []byte, jsonPatch bool, patch []byte) {
		if !json.Valid(original) {
			// the original is always a stored object
			return
		}
		pt := MergePatch
		if jsonPatch {
			pt = JSONPatch
		}
		before := heapAllocated()
		_, _ = DecodeStrict(pt, patch)
		out, err := Apply(original, pt, patch)
		alloc := heapAllocated() - before
		if limit := uint64(64<<20 + 200*(len(original)+len(patch))); alloc > limit {
			t.Fatalf("allocated %d bytes for %d+%d bytes of input", alloc, len(original), len(patch))
		}
		if err != nil {
			if _, ok := err.(apierrors.APIStatus); !ok {
				t.Fatalf("%T is not a Status: %v", err, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON out: %q", out)
		}
		if len(out) > objsize.MaxBytes {
			t.Fatalf("%d bytes out", len(out))
		}
	})
}
