package registry

import (
	"context"
	"encoding/json"
	"regexp"
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

// schemaRequiredPath is the field of a version's missing schema.
var schemaRequiredPath = regexp.MustCompile(`^spec\.versions\[\d+\]\.schema\.openAPIV3Schema$`)

// asV133 words errs as upstream v1.33 does where the v0.37 library this
// module builds with differs (v1.33's validation.go and webhook
// validation): a version without a schema is "Required value: schemas are
// required", a webhook service without name or namespace "service name is
// required" / "service namespace is required" (the library leaves these
// details empty); the details of a rule's message and fieldPath start with
// "message " and "fieldPath "; the selectableFields placement errors start
// with "selectableFields " (and name version.schema.openAPIV3Schema
// without backquotes).
func asV133(errs field.ErrorList) field.ErrorList {
	for _, e := range errs {
		switch {
		case e.Type == field.ErrorTypeRequired && e.Detail == "" && schemaRequiredPath.MatchString(e.Field):
			e.Detail = "schemas are required"
		case e.Type == field.ErrorTypeRequired && e.Detail == "" && strings.HasSuffix(e.Field, ".service.name"):
			e.Detail = "service name is required"
		case e.Type == field.ErrorTypeRequired && e.Detail == "" && strings.HasSuffix(e.Field, ".service.namespace"):
			e.Detail = "service namespace is required"
		case strings.HasSuffix(e.Field, ".message") && strings.Contains(e.Field, "x-kubernetes-validations[") &&
			(e.Detail == "must be non-empty if specified" || e.Detail == "must not contain line breaks"):
			e.Detail = "message " + e.Detail
		case strings.HasSuffix(e.Field, ".fieldPath") && strings.Contains(e.Field, "x-kubernetes-validations[") &&
			(e.Detail == "must be non-empty if specified" || e.Detail == "must not contain line breaks" || e.Detail == "must be a valid path"):
			e.Detail = "fieldPath " + e.Detail
		case strings.HasSuffix(e.Field, "selectableFields") && e.Detail == "may only be set when validations.schema is included":
			e.Detail = "selectableFields " + e.Detail
		case strings.HasSuffix(e.Field, "selectableFields") && e.Detail == "may only be set when `version.schema.openAPIV3Schema` is not included":
			e.Detail = "selectableFields may only be set when version.schema.openAPIV3Schema is not included"
		}
	}
	return errs
}

func upstreamMessage(name string, errs field.ErrorList) string {
	errs = asV133(errs)
	if err := invalid(name, errs); err != nil {
		return withoutPointers(err.Error())
	}
	return ""
}

// TestSchemaRequired: every way a version can lack a schema, worded as
// upstream v1.33's validateCustomResourceDefinitionSpec: on create, and on
// an update of a CRD whose versions all had schemas, each version without
// one is "Required value: schemas are required" (unless the schemas are
// identical and so at the top level); on an update of a CRD that already
// lacked one, only served versions without a schema are, "because
// otherwise all fields are pruned". Checked against the library as well.
func TestSchemaRequired(t *testing.T) {
	ctx := context.Background()
	const v2NoSchema = `{"op":"add","path":"/spec/versions/-","value":{"name":"v2","served":true,"storage":false}}`
	const v3Unserved = `{"op":"add","path":"/spec/versions/-","value":{"name":"v3","served":false,"storage":false}}`
	const prefix = `CustomResourceDefinition.apiextensions.k8s.io "crontabs.stable.example.com" is invalid: `
	decode := func(p string) *CRD {
		crd, _, err := decodeCRD(patchedCRD(t, baseCRD, p), "Strict")
		if err != nil {
			t.Fatal(err)
		}
		if err := prepareForCreate(crd); err != nil {
			t.Fatal(err)
		}
		return crd
	}
	for _, tc := range []struct {
		name string
		old  string // JSON patch of baseCRD; "" for a create
		new  string // JSON patch of baseCRD
		want string
	}{
		{name: "create, the only version", new: `[{"op":"remove","path":"/spec/versions/0/schema"}]`,
			want: prefix + "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"},
		{name: "create, a served and an unserved version", new: `[` + v2NoSchema + `,` + v3Unserved + `]`,
			want: prefix + "[spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required, spec.versions[2].schema.openAPIV3Schema: Required value: schemas are required]"},
		{name: "update of a CRD with every schema", old: `[]`, new: `[` + v2NoSchema + `]`,
			want: prefix + "spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"},
		{name: "update of a CRD already without", old: `[` + v2NoSchema + `]`, new: `[` + v2NoSchema + `,` + v3Unserved + `]`,
			want: prefix + "spec.versions[1].schema.openAPIV3Schema: Required value: because otherwise all fields are pruned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := decode(tc.new)
			var err error
			var upErrs field.ErrorList
			in, convErr := toInternal(crd)
			if convErr != nil {
				t.Fatal(convErr)
			}
			if tc.old == "" {
				err = validateCRDCreate(ctx, crd)
				upErrs = upstream.ValidateCustomResourceDefinition(ctx, in)
			} else {
				old := decode(tc.old)
				old.ResourceVersion = "5"
				crd.ObjectMeta = *old.ObjectMeta.DeepCopy()
				prepareForUpdate(crd, old)
				err = validateCRDUpdate(ctx, crd, old)
				if in, convErr = toInternal(crd); convErr != nil {
					t.Fatal(convErr)
				}
				oldIn, convErr := toInternal(old)
				if convErr != nil {
					t.Fatal(convErr)
				}
				upErrs = upstream.ValidateCustomResourceDefinitionUpdate(ctx, in, oldIn)
			}
			got := ""
			if err != nil {
				got = withoutPointers(err.Error())
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if up := upstreamMessage(crd.Name, upErrs); up != tc.want {
				t.Errorf("upstream says:\n%s\nwant:\n%s", up, tc.want)
			}
		})
	}
}
