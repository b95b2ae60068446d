package registry

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// fakeValidator answers ValidateCRD with canned causes or an error and
// records what it was asked.
type fakeValidator struct {
	validatorv1.ValidatorServiceClient
	resp  *validatorv1.ValidateCRDResponse
	err   error
	calls []*validatorv1.ValidateCRDRequest
}

func (f *fakeValidator) ValidateCRD(_ context.Context, req *validatorv1.ValidateCRDRequest, _ ...grpc.CallOption) (*validatorv1.ValidateCRDResponse, error) {
	f.calls = append(f.calls, req)
	return f.resp, f.err
}

const celCause = `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`

func celResponse() *validatorv1.ValidateCRDResponse {
	return &validatorv1.ValidateCRDResponse{
		Causes: []*commonv1.StatusCause{
			{Reason: "FieldValueInvalid", Field: celCause, Message: `Invalid value: "self.x >": compilation failed: ERROR: <input>:1:8: Syntax error: mismatched input '<EOF>'`},
			{Reason: "FieldValueForbidden", Field: "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule", Message: "Forbidden: estimated rule cost exceeds budget by factor of 2.5x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"},
			{Reason: "FieldValueRequired", Field: "spec.validation.openAPIV3Schema.properties[spec].default", Message: "Required value"},
		},
		Warnings: []string{"a warning"},
	}
}

func preparedCRD(t *testing.T, patch string) *CRD {
	t.Helper()
	crd, _, err := decodeCRD(patchedCRD(t, baseCRD, patch), "Strict")
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareForCreate(crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func TestValidateCRDCausesJoinThe422(t *testing.T) {
	f := &fakeValidator{resp: celResponse()}
	checks := validatorChecks{client: f}
	// a name error of the registry's own and the validator's causes
	crd := preparedCRD(t, `[{"op":"add","path":"/spec/names/shortNames/-","value":"Bad Name"}]`)
	warnings, err := validateCRDWithWarnings(context.Background(), checks, crd, nil)
	if len(f.calls) != 1 || len(f.calls[0].GetOldCrd()) != 0 || len(f.calls[0].GetCrd()) == 0 {
		t.Fatalf("ValidateCRD calls: %v", f.calls)
	}
	want := `CustomResourceDefinition.apiextensions.k8s.io "crontabs.stable.example.com" is invalid: [` +
		`spec.names.shortNames[1]: Invalid value: "Bad Name": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), ` +
		celCause + `: Invalid value: "self.x >": compilation failed: ERROR: <input>:1:8: Syntax error: mismatched input '<EOF>', ` +
		`spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: Forbidden: estimated rule cost exceeds budget by factor of 2.5x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared), ` +
		`spec.validation.openAPIV3Schema.properties[spec].default: Required value]`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
	causes := err.(apierrors.APIStatus).Status().Details.Causes
	if len(causes) != 4 || causes[1].Field != celCause || causes[1].Type != "FieldValueInvalid" ||
		causes[1].Message != `Invalid value: "self.x >": compilation failed: ERROR: <input>:1:8: Syntax error: mismatched input '<EOF>'` ||
		causes[3].Type != "FieldValueRequired" || causes[3].Message != "Required value" {
		t.Fatalf("causes: %+v", causes)
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings: %v", warnings)
	}
}

func TestValidateCRDOnUpdateSendsTheOldCRD(t *testing.T) {
	f := &fakeValidator{resp: &validatorv1.ValidateCRDResponse{}}
	old := preparedCRD(t, "")
	old.ResourceVersion = "5"
	crd := old.DeepCopy()
	crd.Spec.Names.ShortNames = []string{"cts"}
	prepareForUpdate(crd, old)
	if _, err := validateCRDWithWarnings(context.Background(), validatorChecks{client: f}, crd, old); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 1 || len(f.calls[0].GetOldCrd()) == 0 {
		t.Fatalf("ValidateCRD calls: %v", f.calls)
	}
}

func TestValidateCRDSkippedWhenSchemasAreInvalid(t *testing.T) {
	f := &fakeValidator{resp: celResponse()}
	crd := preparedCRD(t, `[{"op":"add","path":"`+schemaPath+`/properties/spec/properties/x","value":{"description":"no type"}}]`)
	_, err := validateCRDWithWarnings(context.Background(), validatorChecks{client: f}, crd, nil)
	want := `CustomResourceDefinition.apiextensions.k8s.io "crontabs.stable.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].properties[x].type: Required value: must not be empty for specified object fields`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v", err)
	}
	if len(f.calls) != 0 {
		t.Fatal("ValidateCRD called for a schema with errors")
	}
}

func TestValidateCRDUnavailable(t *testing.T) {
	crd := preparedCRD(t, "")
	// a validator without ValidateCRD adds nothing
	f := &fakeValidator{err: grpcstatus.Error(codes.Unimplemented, "unknown method ValidateCRD")}
	if _, err := validateCRDWithWarnings(context.Background(), validatorChecks{client: f}, crd, nil); err != nil {
		t.Fatalf("Unimplemented: %v", err)
	}
	// an unreachable one fails the write
	f = &fakeValidator{err: grpcstatus.Error(codes.Unavailable, "connection refused")}
	_, err := validateCRDWithWarnings(context.Background(), validatorChecks{client: f}, crd, nil)
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("Unavailable: %v", err)
	}
}

func TestFieldErrorsFromCauses(t *testing.T) {
	for _, c := range []*commonv1.StatusCause{
		{Reason: "FieldValueInvalid", Field: "a", Message: `Invalid value: 3: must be small`},
		{Reason: "FieldValueRequired", Field: "b", Message: "Required value"},
		{Reason: "FieldValueForbidden", Field: "c", Message: "Forbidden: no"},
		{Reason: "FieldValueNotSupported", Field: "d", Message: `Unsupported value: "x": supported values: "a", "b"`},
		{Reason: "FieldValueTooLong", Field: "e", Message: "Too long: may not be more than 5 bytes"},
		{Reason: "FieldValueTypeInvalid", Field: "f", Message: `Invalid value: "string": must be integer`},
	} {
		got := fieldErrorsFromCauses([]*commonv1.StatusCause{c})[0]
		if got.ErrorBody() != c.GetMessage() || got.Field != c.GetField() || string(got.Type) != c.GetReason() {
			t.Errorf("%s: %s (%s) → %s (%s)", c.GetReason(), c.GetMessage(), c.GetField(), got.ErrorBody(), got.Field)
		}
	}
}
