package openapi

import (
	"encoding/json"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kubeproto "k8s.io/kube-openapi/pkg/util/proto"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// lossyCronTab has every construct the v3 → v2 conversion changes.
func lossyCronTab() *CRD {
	crd := crontab(true)
	crd.Spec.Versions[0].SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.image"}}
	s := &apiextensionsv1.JSONSchemaProps{}
	if err := json.Unmarshal([]byte(`{
	  "type": "object",
	  "properties": {
	    "spec": {
	      "type": "object",
	      "description": "the spec",
	      "required": ["image", "maybe"],
	      "properties": {
	        "image": {"type": "string", "default": "nginx"},
	        "replicas": {"type": "integer", "minimum": 1, "allOf": [{"maximum": 10}], "anyOf": [{"minimum": 2}]},
	        "maybe": {"type": "string", "nullable": true},
	        "port": {"x-kubernetes-int-or-string": true},
	        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}},
	        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
	        "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
	      },
	      "not": {"required": ["forbidden"]}
	    }
	  }
	}`), s); err != nil {
		panic(err)
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema = s
	return crd
}

func v2Doc(t *testing.T, b *Builder) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b.V2().Body, &doc); err != nil {
		t.Fatalf("v2 document is not JSON: %v", err)
	}
	return doc
}

func definition(t *testing.T, doc map[string]any, name string) map[string]any {
	t.Helper()
	d, ok := doc["definitions"].(map[string]any)[name].(map[string]any)
	if !ok {
		t.Fatalf("definition %s missing", name)
	}
	return d
}

func props(s map[string]any) map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

func TestV2LossyConversion(t *testing.T) {
	b := New()
	b.Update(nil, lossyCronTab())
	doc := v2Doc(t, b)
	if doc["swagger"] != "2.0" {
		t.Fatalf("swagger = %v", doc["swagger"])
	}
	ct := definition(t, doc, "com.example.stable.v1.CronTab")
	if !strings.Contains(string(mustMarshal(ct["x-kubernetes-group-version-kind"])), `"kind":"CronTab"`) {
		t.Errorf("no GVK: %v", ct["x-kubernetes-group-version-kind"])
	}
	if sf := string(mustMarshal(ct["x-kubernetes-selectable-fields"])); sf != `[{"fieldPath":"spec.image"}]` {
		t.Errorf("selectable fields %s", sf)
	}
	for _, p := range []string{"apiVersion", "kind", "metadata", "spec"} {
		if _, ok := props(ct)[p]; !ok {
			t.Errorf("CronTab lacks %s", p)
		}
	}
	if ref := string(mustMarshal(props(ct)["metadata"])); !strings.Contains(ref, `"$ref":"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"`) {
		t.Errorf("metadata %s", ref)
	}
	spec := props(ct)["spec"].(map[string]any)
	sp := props(spec)
	// junctors are dropped
	if _, ok := spec["not"]; ok {
		t.Error("not kept")
	}
	replicas := sp["replicas"].(map[string]any)
	if _, ok := replicas["allOf"]; ok || replicas["anyOf"] != nil || replicas["minimum"] != float64(1) || replicas["type"] != "integer" {
		t.Errorf("replicas %v", replicas)
	}
	// nullable: untyped, and no longer required
	if maybe := sp["maybe"].(map[string]any); maybe["type"] != nil || maybe["nullable"] != nil {
		t.Errorf("nullable field %v", maybe)
	}
	if req := string(mustMarshal(spec["required"])); req != `["image"]` {
		t.Errorf("required %s", req)
	}
	// defaults pruned
	if image := sp["image"].(map[string]any); image["default"] != nil || image["type"] != "string" {
		t.Errorf("image %v", image)
	}
	// int-or-string keeps its marker, loses the unfolded anyOf
	if port := sp["port"].(map[string]any); port["x-kubernetes-int-or-string"] != true || port["anyOf"] != nil {
		t.Errorf("port %v", port)
	}
	// preserve-unknown-fields: untyped, no properties
	if free := sp["free"].(map[string]any); free["type"] != nil || free["properties"] != nil || free["x-kubernetes-preserve-unknown-fields"] != true {
		t.Errorf("free %v", free)
	}
	// embedded resources get apiVersion, kind and metadata
	tmpl := sp["template"].(map[string]any)
	for _, p := range []string{"apiVersion", "kind", "metadata", "spec"} {
		if _, ok := props(tmpl)[p]; !ok {
			t.Errorf("template lacks %s", p)
		}
	}
	if l := sp["list"].(map[string]any); l["x-kubernetes-list-type"] != "set" {
		t.Errorf("list %v", l)
	}
	list := definition(t, doc, "com.example.stable.v1.CronTabList")
	if list["description"] != "CronTabList is a list of CronTab" {
		t.Errorf("list %v", list)
	}
}

func TestV2BareObjects(t *testing.T) {
	b := New()
	preserve := lossyCronTab()
	preserve.Spec.Versions[0].Schema.OpenAPIV3Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
	b.Update(nil, preserve)
	doc := v2Doc(t, b)
	ct := definition(t, doc, "com.example.stable.v1.CronTab")
	if ct["type"] != "object" || ct["properties"] != nil {
		t.Errorf("root preserving unknown fields: %v", ct)
	}

	// a non-structural schema (a stored v1beta1 CRD) is not published
	nonStructural := lossyCronTab()
	nonStructural.Spec.Versions[0].Schema.OpenAPIV3Schema = &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {}}}
	b.Update(preserve, nonStructural)
	if ct := definition(t, v2Doc(t, b), "com.example.stable.v1.CronTab"); ct["properties"] != nil {
		t.Errorf("non-structural schema published: %v", ct)
	}
}

func ptr[T any](v T) *T { return &v }

// TestV2ForKubectl: the protobuf form parses, every reference resolves
// (kubectl's model parser fails on a dangling one), and the PATCH operation
// of a CRD lists fieldValidation, which kubectl looks for.
func TestV2ForKubectl(t *testing.T) {
	b := New()
	b.Update(nil, lossyCronTab())
	pb, err := b.V2Proto()
	if err != nil {
		t.Fatal(err)
	}
	doc := &openapi_v2.Document{}
	if err := proto.Unmarshal(pb.Body, doc); err != nil {
		t.Fatal(err)
	}
	models, err := kubeproto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("kubectl's model parser: %v", err)
	}
	m := models.LookupModel("com.example.stable.v1.CronTab")
	kind, ok := m.(*kubeproto.Kind)
	if !ok {
		t.Fatalf("CronTab model %T", m)
	}
	spec, ok := kind.Fields["spec"].(*kubeproto.Kind)
	if !ok || spec.Fields["replicas"] == nil || spec.GetDescription() != "the spec" {
		t.Fatalf("spec model %#v", kind.Fields["spec"])
	}
	if models.LookupModel("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition") == nil {
		t.Error("CRD model missing")
	}

	params := map[string]string{}
	for _, p := range doc.GetParameters().GetAdditionalProperties() {
		params["#/parameters/"+p.GetName()] = p.GetValue().GetNonBodyParameter().GetQueryParameterSubSchema().GetName()
	}
	found := false
	for _, path := range doc.GetPaths().GetPath() {
		op := path.GetValue().GetPatch()
		if op == nil || !strings.Contains(path.GetName(), "crontabs") {
			continue
		}
		for _, p := range op.GetParameters() {
			if params[p.GetJsonReference().GetXRef()] == "fieldValidation" {
				found = true
			}
		}
	}
	if !found {
		t.Error("no CronTab PATCH operation with fieldValidation")
	}
	// the proto is cached until the next change
	if again, _ := b.V2Proto(); again != pb {
		t.Error("protobuf form rebuilt without a change")
	}
	b.Update(lossyCronTab(), nil)
	if again, _ := b.V2Proto(); again == pb {
		t.Error("protobuf form kept after a change")
	}
	if strings.Contains(string(b.V2().Body), "CronTab") {
		t.Error("deleted CRD still in v2")
	}
}

func TestV2Negotiation(t *testing.T) {
	s := NewServer(New())
	for accept, want := range map[string]string{
		"":                 v2JSON,
		"application/json": v2JSON,
		"application/com.github.proto-openapi.spec.v2@v1.0+protobuf":                               v2Protobuf,
		"application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json;q=0.9":       v2Protobuf,
		"application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.9": v2Protobuf,
		"*/*": v2JSON,
	} {
		resp, err := s.GetDocument(t.Context(), registryGetV2(accept))
		if err != nil || resp.GetContentType() != want || !strings.HasPrefix(resp.GetEtag(), `"`) {
			t.Errorf("Accept %q: %v %s", accept, err, resp.GetContentType())
		}
	}
	if _, err := s.GetDocument(t.Context(), registryGetV2("text/html")); err == nil || !strings.Contains(err.Error(), "only the following media types are accepted") {
		t.Errorf("text/html: %v", err)
	}
}

func registryGetV2(accept string) *registryv1.GetDocumentRequest {
	return &registryv1.GetDocumentRequest{Version: "v2", Accept: accept}
}
