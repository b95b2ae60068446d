package registry

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// baseCRD is a valid CRD the cases below modify (with a JSON patch).
const baseCRD = `{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "crontabs.stable.example.com"},
  "spec": {
    "group": "stable.example.com",
    "scope": "Namespaced",
    "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"cronSpec": {"type": "string"}, "replicas": {"type": "integer"}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}
      }}},
      "subresources": {"status": {}}
    }]
  }
}`

type validationCase struct {
	name  string
	patch string // JSON patch applied to baseCRD
	want  string // the full 422 message; "" when valid
}

// patchedCRD returns base with a JSON patch applied.
func patchedCRD(t *testing.T, base, p string) []byte {
	t.Helper()
	if p == "" {
		return []byte(base)
	}
	ops, err := jsonpatch.DecodePatch([]byte(p))
	if err != nil {
		t.Fatalf("bad test patch: %v", err)
	}
	out, err := ops.Apply([]byte(base))
	if err != nil {
		t.Fatalf("test patch does not apply: %v", err)
	}
	return out
}

// createValidationError runs a create's decode, preparation and validation.
// pointerValue is the address of a pointer in a value rendered with %#v,
// as in "(*apiextensions.CustomResourceValidation)(0xc000123456)".
var pointerValue = regexp.MustCompile(`\)\(0x[0-9a-f]+\)`)

// withoutPointers replaces the addresses in msg by "<pointer>", as the
// conformance oracle does.
func withoutPointers(msg string) string {
	return pointerValue.ReplaceAllString(msg, ")(<pointer>)")
}

func createValidationError(t *testing.T, body []byte) (*CRD, error) {
	t.Helper()
	crd, _, err := decodeCRD(body, "Strict")
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := prepareForCreate(crd); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	return crd, validateCRDCreate(context.Background(), crd)
}

func TestValidateCreate(t *testing.T) {
	for _, tc := range createCases {
		t.Run(tc.name, func(t *testing.T) {
			crd, err := createValidationError(t, patchedCRD(t, baseCRD, tc.patch))
			dumpCase(t, tc.name, crd, nil)
			got := ""
			if err != nil {
				got = withoutPointers(err.Error())
			}
			dumpGot(t, tc.name, got)
			if crd.GenerateName != "" {
				// the generated suffix is random
				got = strings.ReplaceAll(got, crd.Name, crd.GenerateName+"<generated>")
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	for _, tc := range updateCases {
		t.Run(tc.name, func(t *testing.T) {
			old, err := createValidationError(t, patchedCRD(t, baseCRD, tc.old))
			if err != nil {
				t.Fatalf("old object invalid: %v", err)
			}
			old.ResourceVersion = "5"
			if tc.established {
				setCondition(old, condition{Type: condEstablished, Status: "True"})
			}
			oldJSON, _ := json.Marshal(old)
			crd, _, err := decodeCRD(patchedCRD(t, string(oldJSON), tc.patch), "Strict")
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if tc.status {
				prepareForStatusUpdate(crd, old)
				err = validateCRDStatusUpdate(context.Background(), crd, old)
			} else {
				prepareForUpdate(crd, old)
				err = validateCRDUpdate(context.Background(), crd, old)
			}
			dumpCase(t, tc.name, crd, old)
			got := ""
			if err != nil {
				got = withoutPointers(err.Error())
			}
			dumpGot(t, tc.name, got)
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

type updateCase struct {
	name        string
	old         string // JSON patch making the old object from baseCRD
	established bool   // the old object is Established
	status      bool   // an update of the status subresource
	patch       string // JSON patch making the update from the old object
	want        string
}
