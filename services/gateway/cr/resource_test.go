package cr

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

func testResource() *resource {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "crontabs.stable.example.com"
	crd.Spec.Group = "stable.example.com"
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Kind: "CronTab"}
	crd.Spec.Scope = apiextensionsv1.NamespaceScoped
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true},
		{Name: "v1beta1", Served: true},
	}
	r, err := newResource(crd, "v1")
	if err != nil {
		panic(err)
	}
	return r
}

func TestDeprecationWarning(t *testing.T) {
	spec := apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "g", Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "W"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1alpha1", Served: true, Deprecated: true}, {Name: "v1beta1", Served: true}, {Name: "v1", Served: true}, {Name: "v2", Served: false},
		},
	}
	if got, want := deprecationWarning("v1alpha1", spec), "g/v1alpha1 W is deprecated; use g/v1 W"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if got := httpx.WarningHeader(`say "hi"`); got != `299 - "say \"hi\""` {
		t.Fatalf("warning header %q", got)
	}
}

func TestSetAPIVersion(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"apiVersion":"g/v1","kind":"K"}`, `{"apiVersion":"g/v1","kind":"K"}`, true},
		{`{"kind":"K","apiVersion":"g/v2","spec":{"apiVersion":"x","a":[1,"}",{"b":"\""}]}}`, `{"kind":"K","apiVersion":"g/v1","spec":{"apiVersion":"x","a":[1,"}",{"b":"\""}]}}`, true},
		{` { "apiVersion" : "g/v2" , "n": 1.5e3 }`, ` { "apiVersion" : "g/v1" , "n": 1.5e3 }`, true},
		{`{"kind":"K"}`, "", false},
		{`{"apiVersion":"a","apiVersion":"b"}`, "", false},
		{`{"apiVers\u0069on":"g/v2"}`, "", false},
		{`[1]`, "", false},
		{`{"apiVersion":"g/v2"`, "", false},
	}
	for _, tt := range tests {
		got, ok := setAPIVersion([]byte(tt.in), "g/v1")
		if ok != tt.ok || ok && string(got) != tt.want {
			t.Errorf("%s: got %s %v", tt.in, got, ok)
		}
	}
}

func TestSetAPIVersionFastPath(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"apiVersion":"g/v1","kind":"K","metadata":{"ownerReferences":[{"apiVersion":"x/v1"}]}}`, `{"apiVersion":"g/v1","kind":"K","metadata":{"ownerReferences":[{"apiVersion":"x/v1"}]}}`},
		{`{"apiVersion":"g/v1x","kind":"K"}`, `{"apiVersion":"g/v1","kind":"K"}`},
		{`{"apiVersion":"g/v1x","apiVersion":"g/v2"}`, `ok=false`},
		{`{"apiVersion":"g/v1","s":"\"apiVersion\""}`, `{"apiVersion":"g/v1","s":"\"apiVersion\""}`},
	} {
		got, ok := setAPIVersion([]byte(tt.in), "g/v1")
		if !ok {
			got = []byte("ok=false")
		}
		if string(got) != tt.want {
			t.Errorf("%s: got %s", tt.in, got)
		}
	}
}

// TestUnresolvable: upstream's CRD handler takes requests for a served
// version of a CRD whose names were accepted, and answers 500 "error
// resolving resource" when its conversion webhook's caBundle holds no PEM
// certificate (Established False "InvalidCABundle").
func TestUnresolvable(t *testing.T) {
	crd := func(ca []byte, strategy apiextensionsv1.ConversionStrategyType, names apiextensionsv1.ConditionStatus) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{}
		c.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}, {Name: "v2"}}
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
		if strategy == apiextensionsv1.WebhookConverter {
			url := "https://example.com/convert"
			c.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: ca}}
		}
		c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: names},
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "InvalidCABundle"},
		}
		return c
	}
	bad := []byte("not a cert")
	for _, tc := range []struct {
		name string
		crd  *apiextensionsv1.CustomResourceDefinition
		ver  string
		want bool
	}{
		{"invalid caBundle", crd(bad, apiextensionsv1.WebhookConverter, apiextensionsv1.ConditionTrue), "v1", true},
		{"version not served", crd(bad, apiextensionsv1.WebhookConverter, apiextensionsv1.ConditionTrue), "v2", false},
		{"names not accepted", crd(bad, apiextensionsv1.WebhookConverter, apiextensionsv1.ConditionFalse), "v1", false},
		{"no caBundle", crd(nil, apiextensionsv1.WebhookConverter, apiextensionsv1.ConditionTrue), "v1", false},
		{"no webhook", crd(nil, apiextensionsv1.NoneConverter, apiextensionsv1.ConditionTrue), "v1", false},
	} {
		if got := unresolvable(tc.crd, tc.ver); got != tc.want {
			t.Errorf("%s: unresolvable = %v", tc.name, got)
		}
	}
	s := kstatus.FromError(errResolvingResource())
	if s.Code != 500 || s.Reason != "InternalError" || s.Message != "Internal error occurred: error resolving resource" ||
		len(s.Details.Causes) != 1 || s.Details.Causes[0].Message != "error resolving resource" {
		t.Errorf("error: %+v", s)
	}
}
