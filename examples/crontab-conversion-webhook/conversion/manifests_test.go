package conversion

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestManifests keeps the example manifests in step with the code: the CRD
// decodes strictly and names the webhook, and its CronTabs convert.
func TestManifests(t *testing.T) {
	b, err := os.ReadFile("../manifests/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.ReplaceAll(string(b), "CA_BUNDLE", base64.StdEncoding.EncodeToString([]byte("ca")))
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(doc), &crd); err != nil {
		t.Fatal(err)
	}
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	if crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || cc.Service.Name != "crontab-conversion" || *cc.Service.Path != "/convert" {
		t.Fatalf("conversion: %+v", crd.Spec.Conversion)
	}
	b, err = os.ReadFile("../manifests/crontabs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(b), "\n---\n") {
		obj, err := yaml.YAMLToJSON([]byte(part))
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"example.com/v1beta1", "example.com/v1"} {
			if _, err := ConvertJSON(obj, to); err != nil {
				t.Fatalf("%s to %s: %v", obj, to, err)
			}
		}
	}
}
