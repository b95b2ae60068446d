package gateway

import (
	"encoding/json"
	"runtime/metrics"
	"testing"

	"github.com/crdplane/crdplane/services/gateway/httpx"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// fuzzHeapAllocated returns the bytes the process has allocated so far (cheap:
// no stop-the-world, unlike runtime.ReadMemStats).
func fuzzHeapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// fuzzCheckAlloc fails when fn allocated more than a fixed allowance plus
// perByte for every byte of input.
func fuzzCheckAlloc(t *testing.T, input, perByte int, fn func()) {
	t.Helper()
	before := fuzzHeapAllocated()
	fn()
	if alloc, limit := fuzzHeapAllocated()-before, uint64(64<<20+perByte*input); alloc > limit {
		t.Fatalf("allocated %d bytes for %d bytes of input", alloc, input)
	}
}

// FuzzRequestBody: a create or update body, JSON or YAML, goes through the
// gateway's decoding (httpx.DecodeBody, then decodeObject): it decodes or
// fails with a Status error, never panics, a YAML body converts to valid
// JSON, and the memory taken stays proportional to the body (YAML aliases
// are bounded by the YAML library).
func FuzzRequestBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, yaml bool, body []byte) {
		ct := httpx.ContentTypeJSON
		if yaml {
			ct = httpx.ContentTypeYAML
		}
		fuzzCheckAlloc(t, len(body), 1000, func() {
			b, err := httpx.DecodeBody(ct, body)
			if err == nil {
				err = b.YAMLError()
			}
			data := b.JSON
			if err != nil {
				if _, ok := err.(apierrors.APIStatus); !ok {
					t.Fatalf("%T is not a Status: %v", err, err)
				}
				return
			}
			if yaml && !json.Valid(data) {
				t.Fatalf("YAML converted to invalid JSON: %q", data)
			}
			obj, err := decodeObject(data)
			if err == nil && obj == nil {
				t.Fatal("no object and no error")
			}
			if err == nil {
				if _, err := encodeObject(obj); err != nil {
					t.Fatalf("a decoded object does not encode: %v", err)
				}
			}
		})
	})
}

// FuzzListOptions: the query parameters of a list or watch (label and field
// selectors, continue token, resourceVersion, limit) parse as
// kube-apiserver parses them or fail with a Status error (400 or 422),
// never a panic; a field selector that parses is checked against the
// fields a resource may select by.
func FuzzListOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, labelSelector, fieldSelector, continueToken, resourceVersion string, limit int64, watch bool) {
		in := len(labelSelector) + len(fieldSelector) + len(continueToken) + len(resourceVersion)
		fuzzCheckAlloc(t, in, 1000, func() {
			opts, err := parseListOptions(listParams{
				labelSelector: labelSelector, fieldSelector: fieldSelector, continueToken: continueToken,
				resourceVersion: resourceVersion, limit: limit, watch: watch,
			})
			if err != nil {
				if _, ok := err.(apierrors.APIStatus); !ok {
					t.Fatalf("%T is not a Status: %v", err, err)
				}
				return
			}
			if opts.LabelSelector != nil {
				_ = opts.LabelSelector.String()
			}
			if opts.FieldSelector != nil {
				err := checkFieldSelector(opts.FieldSelector, func(f string) bool { return f == "metadata.name" || f == "spec.color" })
				if _, ok := err.(apierrors.APIStatus); err != nil && !ok {
					t.Fatalf("%T is not a Status: %v", err, err)
				}
				_ = opts.FieldSelector.String()
			}
		})
	})
}
