package validator

import (
	"context"
	"runtime/metrics"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// fuzzHeapAllocated returns the bytes the process has allocated so far
// (cheap: no stop-the-world, unlike runtime.ReadMemStats).
func fuzzHeapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzValidateCRD: the CRD checks the registry asks the validator for
// (ValidateCRD: CEL rules compiled and costed, defaults pruned and
// validated) on any CRD, and an old one for an update: causes or a Status
// error (400 for a request that does not decode), never a panic; the
// memory taken stays proportional to the input (a schema nested deeper
// than the registry accepts is not compiled).
func FuzzValidateCRD(f *testing.F) {
	s := &Service{}
	f.Fuzz(func(t *testing.T, crd, old []byte) {
		if len(crd) == 0 {
			return
		}
		for _, doc := range [][]byte{crd, old} {
			if v, ok := crdlimits.VersionSchemaDepths(doc); ok {
				for _, d := range v {
					if d.Depth > crdlimits.MaxSchemaDepth {
						// the registry refuses it before asking
						return
					}
				}
			}
		}
		before := fuzzHeapAllocated()
		resp, err := s.validateCRD(context.Background(), &validatorv1.ValidateCRDRequest{Crd: crd, OldCrd: old})
		if err != nil {
			if _, ok := err.(apierrors.APIStatus); !ok {
				t.Fatalf("%T is not a Status: %v", err, err)
			}
		} else {
			for _, c := range resp.GetCauses() {
				if c.GetField() == "" || c.GetMessage() == "" {
					t.Fatalf("incomplete cause %v", c)
				}
			}
		}
		if alloc, limit := fuzzHeapAllocated()-before, uint64(128<<20+5000*(len(crd)+len(old))); alloc > limit {
			t.Fatalf("allocated %d bytes for %d+%d bytes of input", alloc, len(crd), len(old))
		}
	})
}
