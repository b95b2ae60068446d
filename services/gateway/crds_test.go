package gateway

import (
	"net/http"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

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

// TestOpenAPIV3WithoutDocument: a group-version without an OpenAPI v3
// document is answered as upstream's handler does: 200, no body, no
// Content-Type (and no ETag); a published one is JSON.
func TestOpenAPIV3WithoutDocument(t *testing.T) {
	g := newTestGateway(t)
	resp, body := g.do("GET", "/openapi/v3/apis/nothing.example.com/v1", nil)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != "" || resp.Header.Get("ETag") != "" {
		t.Fatalf("no document: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = g.do("GET", "/openapi/v3/apis/apiextensions.k8s.io/v1", nil)
	if resp.StatusCode != 200 || len(body) == 0 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("apiextensions.k8s.io/v1: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestCreateOptionsAsV133: invalid CreateOptions are v1.33's 422, the value
// rendered with %#v.
func TestCreateOptionsAsV133(t *testing.T) {
	g := newTestGateway(t)
	s := g.expect(http.StatusUnprocessableEntity, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=Some", cronTabCRD())
	if want := `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Some"}: supported values: "All"`; s["message"] != want {
		t.Fatalf("%v", s["message"])
	}
}
