package registry

import (
	"context"
	"encoding/json"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/fuzzalloc"
)

func fuzzIsStatus(t *testing.T, err error) {
	t.Helper()
	if _, ok := err.(apierrors.APIStatus); err != nil && !ok {
		t.Fatalf("%T is not a Status: %v", err, err)
	}
}

// fuzzStored is the stored CRD updates and patches apply to.
func fuzzStored(t *testing.T) *CRD {
	crd, _, err := decodeCRD([]byte(baseCRD), fieldValidationStrict)
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareForCreate(crd); err != nil {
		t.Fatal(err)
	}
	crd.ResourceVersion, crd.Generation = "7", 1
	return crd
}

// fuzzValidate runs what the registry runs on a CRD write (body as sent or
// as patched): decoding (with the depth scan), the strategy, and the
// registry's validation, as a create or an update of stored (spec or
// status), without the validator.
func fuzzValidate(t *testing.T, body []byte, stored *CRD, status bool) {
	crd, _, err := decodeCRD(body, fieldValidationWarn)
	if err != nil {
		fuzzIsStatus(t, err)
		return
	}
	switch {
	case stored == nil:
		if err := prepareForCreate(crd); err != nil {
			fuzzIsStatus(t, err)
			return
		}
		_, err = validateCRDWithWarnings(context.Background(), nil, crd, nil)
	case status:
		prepareForStatusUpdate(crd, stored)
		err = validateCRDStatusUpdate(context.Background(), crd, stored)
	default:
		prepareForUpdate(crd, stored)
		_, err = validateCRDWithWarnings(context.Background(), nil, crd, stored)
	}
	fuzzIsStatus(t, err)
	if err == nil {
		if _, err := encodeForStorage(crd); err != nil {
			t.Fatalf("a valid CRD does not encode: %v", err)
		}
	}
}

// FuzzCRDValidation: any body of a CRD create or update (JSON: the gateway
// converts YAML) is refused with a Status error or accepted, never a panic,
// and the memory taken stays proportional to the body (a schema nested too
// deep is refused before it is decoded).
func FuzzCRDValidation(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte, update, status bool) {
		stored := fuzzStored(t)
		if !update {
			stored = nil
		}
		fuzzalloc.Check(t, len(body), 2000, func() { fuzzValidate(t, body, stored, status) })
	})
}

// fuzzPatchTypes are the patch types a CRD takes.
var fuzzPatchTypes = []string{"application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json"}

// FuzzCRDPatch: a merge, JSON or strategic merge patch of a stored CRD
// applies (to valid JSON) or fails with a Status error, never a panic;
// what it applies to is then decoded and validated as an update.
func FuzzCRDPatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, patchType uint8, patch []byte) {
		stored := fuzzStored(t)
		original, err := encodeCRD(stored)
		if err != nil {
			t.Fatal(err)
		}
		fuzzalloc.Check(t, len(patch), 2000, func() {
			patched, err := applyPatch(original, fuzzPatchTypes[int(patchType)%len(fuzzPatchTypes)], patch)
			if err != nil {
				fuzzIsStatus(t, err)
				return
			}
			if !json.Valid(patched) {
				t.Fatalf("patched to invalid JSON: %q", patched)
			}
			fuzzValidate(t, patched, stored, false)
		})
	})
}
