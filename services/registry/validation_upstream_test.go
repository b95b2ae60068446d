package registry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	upstream "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestValidationCasesMatchUpstream runs upstream's CRD validation on the
// objects of every validation case: the expected messages are upstream's,
// checked live rather than recorded.
func TestValidationCasesMatchUpstream(t *testing.T) {
	ctx := context.Background()
	for _, tc := range createCases {
		t.Run("create/"+tc.name, func(t *testing.T) {
			crd, _ := createValidationError(t, patchedCRD(t, baseCRD, tc.patch))
			in, err := toInternal(crd)
			if err != nil {
				t.Fatal(err)
			}
			got := upstreamMessage(crd.Name, upstream.ValidateCustomResourceDefinition(ctx, in))
			if crd.GenerateName != "" {
				got = strings.ReplaceAll(got, crd.Name, crd.GenerateName+"<generated>")
			}
			if got != tc.want {
				t.Errorf("upstream says:\n%s\nthe case expects:\n%s", got, tc.want)
			}
		})
	}
	for _, tc := range updateCases {
		t.Run("update/"+tc.name, func(t *testing.T) {
			old, err := createValidationError(t, patchedCRD(t, baseCRD, tc.old))
			if err != nil {
				t.Fatal(err)
			}
			old.ResourceVersion = "5"
			if tc.established {
				setCondition(old, condition{Type: condEstablished, Status: "True"})
			}
			oldJSON, _ := json.Marshal(old)
			crd, _, err := decodeCRD(patchedCRD(t, string(oldJSON), tc.patch), "Strict")
			if err != nil {
				t.Fatal(err)
			}
			var errs func(in, oldIn *apiextensions.CustomResourceDefinition) field.ErrorList
			if tc.status {
				prepareForStatusUpdate(crd, old)
				errs = func(in, oldIn *apiextensions.CustomResourceDefinition) field.ErrorList {
					return upstream.ValidateUpdateCustomResourceDefinitionStatus(ctx, in, oldIn)
				}
			} else {
				prepareForUpdate(crd, old)
				errs = func(in, oldIn *apiextensions.CustomResourceDefinition) field.ErrorList {
					return upstream.ValidateCustomResourceDefinitionUpdate(ctx, in, oldIn)
				}
			}
			in, err := toInternal(crd)
			if err != nil {
				t.Fatal(err)
			}
			oldIn, err := toInternal(old)
			if err != nil {
				t.Fatal(err)
			}
			if got := upstreamMessage(crd.Name, errs(in, oldIn)); got != tc.want {
				t.Errorf("upstream says:\n%s\nthe case expects:\n%s", got, tc.want)
			}
		})
	}
}

func upstreamMessage(name string, errs field.ErrorList) string {
	if err := invalid(name, errs); err != nil {
		return err.Error()
	}
	return ""
}
