package validator

import (
	"context"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// nestedSchema is a schema (one line of JSON) nesting levels objects below
// a root whose CEL rule does not compile.
func nestedSchema(levels int) string {
	return `{"type":"object","x-kubernetes-validations":[{"rule":"self.a >"}],"properties":{"a":` +
		strings.Repeat(`{"type":"object","properties":{"a":`, levels-1) + `{"type":"string"}` + strings.Repeat(`}}`, levels-1) + `}}`
}

// ValidateCRD does not compile a schema nested deeper than the registry
// accepts (the registry refuses it, and calls ValidateCRD only for schemas
// it found no fault with): no causes, where the same rule at the limit has
// one.
func TestValidateCRDSkipsTooDeepSchemas(t *testing.T) {
	client := serve(t, newDirService(t))
	for _, tc := range []struct {
		levels int
		causes int
	}{{crdlimits.MaxSchemaDepth, 1}, {crdlimits.MaxSchemaDepth + 1, 0}, {4900, 0}} {
		resp, err := client.ValidateCRD(context.Background(), &validatorv1.ValidateCRDRequest{Crd: crdJSON(t, crdWith(nestedSchema(tc.levels)))})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Causes) != tc.causes {
			t.Errorf("%d levels: %d causes, want %d: %v", tc.levels, len(resp.Causes), tc.causes, resp.Causes)
		}
		for _, c := range resp.Causes {
			if c.Field != "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule" {
				t.Errorf("%d levels: %s: %s", tc.levels, c.Field, c.Message)
			}
		}
	}
}
