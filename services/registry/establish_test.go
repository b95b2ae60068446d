package registry

import (
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// TestInvalidCABundleWrittenOnce: a CRD whose conversion webhook's caBundle
// is no PEM bundle gets Established False "InvalidCABundle" once; the
// controllers do not rewrite its status afterwards (upstream's update of
// an unchanged object stores nothing), so a client's update at the
// resourceVersion it read goes through.
func TestInvalidCABundleWrittenOnce(t *testing.T) {
	group := newGroup(t)
	name := "things." + group
	createT(t, crdJSON(group, "things", "Thing", func(o map[string]any) {
		spec(o)["conversion"] = map[string]any{"strategy": "Webhook", "webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig":             map[string]any{"url": "https://example.com/convert", "caBundle": "bm90IGEgY2VydA=="},
		}}
	}))
	var crd *CRD
	eventually(t, 5*time.Second, "Established False InvalidCABundle", func() bool {
		crd = getT(t, name)
		c := findCondition(crd, condEstablished)
		return c != nil && c.Status == apiextensionsv1.ConditionFalse && c.Reason == "InvalidCABundle"
	})
	if c := findCondition(crd, condEstablished); c.Message != "The conversion webhook CABundle is invalid" {
		t.Errorf("Established = %+v", c)
	}
	time.Sleep(500 * time.Millisecond)
	if again := getT(t, name); again.ResourceVersion != crd.ResourceVersion {
		t.Fatalf("status rewritten: resourceVersion %s, then %s", crd.ResourceVersion, again.ResourceVersion)
	}

	// a valid bundle establishes it
	edit := getT(t, name)
	edit.Spec.Conversion.Webhook.ClientConfig.CABundle = nil
	body, err := json.Marshal(edit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testRegistry.Update(testCtx(t), &registryv1.UpdateRequest{Name: name, Object: body}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, name)
}
