package openapi

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/spec3"
)

func crontab(established bool) *CRD {
	crd := &CRD{}
	crd.Name = "crontabs.stable.example.com"
	crd.Spec.Group = "stable.example.com"
	crd.Spec.Scope = apiextensionsv1.NamespaceScoped
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ListKind: "CronTabList"}
	min, max := 1.0, 10.0
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{
		Name: "v1", Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"replicas": {Type: "integer", Minimum: &min, Maximum: &max},
				}},
			},
		}},
		Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
	}}
	if established {
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	}
	return crd
}

// patchHasFieldValidation is what kubectl checks: a PATCH operation for the
// GVK that lists the fieldValidation query parameter.
func patchHasFieldValidation(t *testing.T, body []byte, group, version, kind string) bool {
	t.Helper()
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(body, doc); err != nil {
		t.Fatalf("document does not decode as OpenAPI v3: %v", err)
	}
	for _, p := range doc.Paths.Paths {
		op := p.Patch
		if op == nil {
			continue
		}
		var gvk map[string]string
		if err := op.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil {
			continue
		}
		if gvk["group"] != group || gvk["version"] != version || gvk["kind"] != kind {
			continue
		}
		for _, prm := range op.Parameters {
			if prm.Name == "fieldValidation" {
				return true
			}
		}
	}
	return false
}

func TestBuilder(t *testing.T) {
	b := New()
	if _, ok := b.Get("apis/stable.example.com/v1"); ok {
		t.Fatal("document before any CRD")
	}
	crdDoc, ok := b.Get(crdGVPath)
	if !ok || !patchHasFieldValidation(t, crdDoc.Body, "apiextensions.k8s.io", "v1", "CustomResourceDefinition") {
		t.Fatal("apiextensions.k8s.io/v1 document lacks the CRD patch operation")
	}
	if !strings.Contains(string(crdDoc.Body), `"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec"`) {
		t.Fatal("CRD schemas missing")
	}

	b.Update(nil, crontab(false))
	if _, ok := b.Get("apis/stable.example.com/v1"); ok {
		t.Fatal("a CRD that is not Established is published")
	}
	indexBefore := string(b.Index().Body)
	b.Update(crontab(false), crontab(true))
	doc, ok := b.Get("apis/stable.example.com/v1")
	if !ok {
		t.Fatal("Established CRD not published")
	}
	if !patchHasFieldValidation(t, doc.Body, "stable.example.com", "v1", "CronTab") {
		t.Fatal("CronTab patch operation lacks fieldValidation")
	}
	for _, want := range []string{`"com.example.stable.v1.CronTab"`, `"com.example.stable.v1.CronTabList"`, `"/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/status"`, `"/apis/stable.example.com/v1/crontabs"`, `"maximum":10`, `"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"`} {
		if !strings.Contains(string(doc.Body), want) {
			t.Errorf("document lacks %s", want)
		}
	}
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b.Index().Body, &index); err != nil {
		t.Fatal(err)
	}
	if got := index.Paths["apis/stable.example.com/v1"].ServerRelativeURL; got != "/openapi/v3/apis/stable.example.com/v1?hash="+doc.Hash {
		t.Fatalf("index entry %q", got)
	}
	if string(b.Index().Body) == indexBefore {
		t.Fatal("index unchanged")
	}

	crdDocAfter, _ := b.Get(crdGVPath)
	if crdDocAfter != crdDoc {
		t.Fatal("an unrelated group-version's document was rebuilt")
	}

	b.Update(crontab(true), nil)
	if _, ok := b.Get("apis/stable.example.com/v1"); ok {
		t.Fatal("deleted CRD still published")
	}
}

func TestStatusChangesKeepDocuments(t *testing.T) {
	b := New()
	crd := crontab(true)
	crd.Generation, crd.UID = 1, "u1"
	b.Update(nil, crd)
	doc, _ := b.Get("apis/stable.example.com/v1")
	v2 := b.V2()
	upd := crd.DeepCopy()
	upd.Status.StoredVersions = []string{"v1"}
	b.Update(crd, upd)
	if d, _ := b.Get("apis/stable.example.com/v1"); d != doc || b.V2() != v2 {
		t.Fatal("documents rebuilt for a status change")
	}
	spec := upd.DeepCopy()
	spec.Generation = 2
	spec.Spec.Names.Kind = "CronTab2"
	b.Update(upd, spec)
	if d, _ := b.Get("apis/stable.example.com/v1"); d == doc || !strings.Contains(string(d.Body), "CronTab2") || !strings.Contains(string(b.V2().Body), "CronTab2") {
		t.Fatal("documents not rebuilt for a spec change")
	}
}
