package registry

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/validation"

	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

const wardleSpec = `"group":"wardle.example.com","version":"v1alpha1","groupPriorityMinimum":1000,"versionPriority":15`

func apiServiceJSON(name, spec string) string {
	return `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"` + name + `"},"spec":{` + spec + `}}`
}

// TestAPIServiceValidation: kube-aggregator's ValidateAPIService, worded as
// v1.33, and the same errors as the v0.37 library's (differential: the
// library runs on the internal type).
func TestAPIServiceValidation(t *testing.T) {
	svc := `,"service":{"namespace":"wardle","name":"api"}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"remote", apiServiceJSON("v1alpha1.wardle.example.com", wardleSpec+svc+`,"caBundle":"Zm9v"`), ""},
		{"local", apiServiceJSON("v1alpha1.wardle.example.com", wardleSpec), ""},
		{"insecure", apiServiceJSON("v1alpha1.wardle.example.com", wardleSpec+svc+`,"insecureSkipTLSVerify":true`), ""},
		{"name", apiServiceJSON("v1.wardle.example.com", wardleSpec),
			"metadata.name: Invalid value: \"v1.wardle.example.com\": must be `spec.version+\".\"+spec.group`: \"v1alpha1.wardle.example.com\""},
		{"name path segment", apiServiceJSON("a/b", wardleSpec), `metadata.name: Invalid value: "a/b": may not contain '/'`},
		{"empty group", apiServiceJSON("v2.", `"version":"v2","groupPriorityMinimum":1,"versionPriority":1`),
			"spec.group: Required value: only v1 may have an empty group and it better be legacy kube"},
		{"group", apiServiceJSON("v1.Bad_Group", `"group":"Bad_Group","version":"v1","groupPriorityMinimum":1,"versionPriority":1`),
			`spec.group: Invalid value: "Bad_Group": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"version", apiServiceJSON("1v.g.example.com", `"group":"g.example.com","version":"1v","groupPriorityMinimum":1,"versionPriority":1`),
			`spec.version: Invalid value: "1v": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		{"priorities", apiServiceJSON("v1alpha1.wardle.example.com", `"group":"wardle.example.com","version":"v1alpha1","groupPriorityMinimum":20001,"versionPriority":0`),
			`[spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000, spec.versionPriority: Invalid value: 0: must be positive and less than 1000]`},
		{"local caBundle", apiServiceJSON("v1alpha1.wardle.example.com", wardleSpec+`,"caBundle":"Zm9v","insecureSkipTLSVerify":true`),
			`[spec.caBundle: Invalid value: "3 bytes": local APIServices may not have a caBundle, spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify]`},
		{"service", apiServiceJSON("v1alpha1.wardle.example.com", wardleSpec+`,"service":{"port":70000}`),
			`[spec.service.namespace: Required value, spec.service.name: Required value, spec.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive]`},
		{"caBundle and insecure", apiServiceJSON("v1alpha1.wardle.example.com", wardleSpec+svc+`,"caBundle":"Zm9v","insecureSkipTLSVerify":true`),
			`spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := apiServiceKind
			obj, _, err := k.decode([]byte(tc.body), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := prepareRBACCreate(k, obj); err != nil {
				t.Fatal(err)
			}
			err = k.validateCreate(obj)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
			} else if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant 422 containing %q", err, tc.want)
			}
			// the library agrees on the fields in error
			var internal apiregistration.APIService
			if err := apiregistrationv1.Convert_v1_APIService_To_apiregistration_APIService(obj.(*apiregistrationv1.APIService), &internal, nil); err != nil {
				t.Fatal(err)
			}
			libErrs := validation.ValidateAPIService(context.Background(), &internal)
			var ours []string
			if st, ok := err.(apierrors.APIStatus); ok && st.Status().Details != nil {
				for _, c := range st.Status().Details.Causes {
					ours = append(ours, c.Field)
				}
			}
			var lib []string
			for _, e := range libErrs {
				lib = append(lib, e.Field)
			}
			if strings.Join(ours, ",") != strings.Join(lib, ",") {
				t.Errorf("fields %v, the library's %v (%v)", ours, lib, libErrs)
			}
		})
	}
}

// TestAPIServiceStore: the APIRegistrationService over storage: create
// clears the status (a local APIService is Available "Local"), an update
// needs a resourceVersion and keeps the status, the status subresource
// keeps the spec, and each service serves its own group only.
func TestAPIServiceStore(t *testing.T) {
	ctx := testCtx(t)
	conn := testConn(t)
	c := registryv1.NewAPIRegistrationServiceClient(conn)
	target := &registryv1.RBACTarget{Resource: "apiservices"}
	decode := func(b []byte) *apiregistrationv1.APIService {
		t.Helper()
		var s apiregistrationv1.APIService
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	body := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1alpha1.wardle.example.com"},"spec":{` + wardleSpec +
		`,"service":{"namespace":"wardle","name":"api"},"insecureSkipTLSVerify":true},"status":{"conditions":[{"type":"Available","status":"True","reason":"Forged","lastTransitionTime":null}]}}`
	created, err := c.Create(ctx, &registryv1.RBACServiceCreateRequest{Target: target, Request: &registryv1.CreateRequest{Object: []byte(body)}})
	if err != nil {
		t.Fatal(err)
	}
	s := decode(created.GetObject())
	if len(s.Status.Conditions) != 0 || *s.Spec.Service.Port != 443 || s.UID == "" {
		t.Fatalf("created %+v", s)
	}
	local, err := c.Create(ctx, &registryv1.RBACServiceCreateRequest{Target: target, Request: &registryv1.CreateRequest{
		Object: []byte(apiServiceJSON("v1.local.example.com", `"group":"local.example.com","version":"v1","groupPriorityMinimum":1,"versionPriority":1`))}})
	if err != nil {
		t.Fatal(err)
	}
	if c := decode(local.GetObject()).Status.Conditions; len(c) != 1 || c[0].Status != "True" || c[0].Reason != "Local" || c[0].Message != "Local APIServices are always available" {
		t.Errorf("local conditions %+v", c)
	}

	// no resourceVersion: 422, as AllowUnconditionalUpdate is false
	_, err = c.Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: target, Request: &registryv1.UpdateRequest{Name: s.Name, Object: []byte(body)}})
	if st := kstatus.FromError(err); st.Code != 422 || st.Message != `APIService.apiregistration.k8s.io "v1alpha1.wardle.example.com" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update` {
		t.Errorf("update without resourceVersion: %v", st)
	}
	// create on update: 404 (AllowCreateOnUpdate is false)
	_, err = c.Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: target, Request: &registryv1.UpdateRequest{Name: "v1.none.example.com",
		Object: []byte(apiServiceJSON("v1.none.example.com", `"group":"none.example.com","version":"v1","groupPriorityMinimum":1,"versionPriority":1`))}})
	if st := kstatus.FromError(err); st.Code != 404 || st.Message != `apiservices.apiregistration.k8s.io "v1.none.example.com" not found` {
		t.Errorf("update of a missing APIService: %v", st)
	}

	// the status subresource: its spec changes are dropped
	s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse, Reason: "FailedDiscoveryCheck", Message: "m"}}
	s.Spec.VersionPriority = 99
	b, _ := json.Marshal(s)
	st, err := c.Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: target, Request: &registryv1.UpdateRequest{Name: s.Name, Subresource: "status", Object: b}})
	if err != nil {
		t.Fatal(err)
	}
	s = decode(st.GetObject())
	if s.Spec.VersionPriority != 15 || len(s.Status.Conditions) != 1 || s.Status.Conditions[0].Reason != "FailedDiscoveryCheck" {
		t.Fatalf("status update %+v", s)
	}
	// an invalid condition status
	bad := s.DeepCopy()
	bad.Status.Conditions[0].Status = "Maybe"
	b, _ = json.Marshal(bad)
	_, err = c.Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: target, Request: &registryv1.UpdateRequest{Name: s.Name, Subresource: "status", Object: b}})
	if st := kstatus.FromError(err); st.Code != 422 || !strings.Contains(st.Message, `status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"`) {
		t.Errorf("bad condition: %v", st)
	}
	// the main resource: its status changes are dropped
	s.Status.Conditions = nil
	s.Spec.VersionPriority = 20
	b, _ = json.Marshal(s)
	up, err := c.Update(ctx, &registryv1.RBACServiceUpdateRequest{Target: target, Request: &registryv1.UpdateRequest{Name: s.Name, Object: b}})
	if err != nil {
		t.Fatal(err)
	}
	if s = decode(up.GetObject()); s.Spec.VersionPriority != 20 || len(s.Status.Conditions) != 1 {
		t.Fatalf("main update %+v", s)
	}
	// a merge patch of the status
	p, err := c.Patch(ctx, &registryv1.RBACServicePatchRequest{Target: target, Request: &registryv1.PatchRequest{Name: s.Name, Subresource: "status",
		PatchType: "application/merge-patch+json", Patch: []byte(`{"status":{"conditions":[{"type":"Available","status":"True","reason":"Passed","message":"all checks passed"}]}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if s = decode(p.GetObject()); s.Status.Conditions[0].Reason != "Passed" {
		t.Fatalf("status patch %+v", s)
	}

	// each service its own group
	_, err = c.Get(ctx, &registryv1.RBACServiceGetRequest{Target: &registryv1.RBACTarget{Resource: "clusterroles"}, Request: &registryv1.GetRequest{Name: "admin"}})
	if st := kstatus.FromError(err); st.Code != 404 {
		t.Errorf("clusterroles through the APIRegistrationService: %v", st)
	}
	_, err = registryv1.NewRBACServiceClient(conn).Get(ctx, &registryv1.RBACServiceGetRequest{Target: target, Request: &registryv1.GetRequest{Name: s.Name}})
	if st := kstatus.FromError(err); st.Code != 404 {
		t.Errorf("apiservices through the RBACService: %v", st)
	}
	for _, name := range []string{s.Name, "v1.local.example.com"} {
		if _, err := c.Delete(ctx, &registryv1.RBACServiceDeleteRequest{Target: target, Request: &registryv1.DeleteRequest{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
}
