package openapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/spec3"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// flows is a CRD with the schema features whose OpenAPI v3 rendering
// differed from upstream's: an embedded resource, an int-or-string, status
// and scale subresources; v1 and v2 served, v0 not.
func flows() *CRD {
	crd := crontab(true)
	crd.Name = "flows.stable.example.com"
	crd.UID, crd.Generation = "u1", 1
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "flows", Singular: "flow", Kind: "Flow", ListKind: "FlowList"}
	v1 := crd.Spec.Versions[0]
	v1.Schema.OpenAPIV3Schema.Properties["spec"].Properties["emb"] = apiextensionsv1.JSONSchemaProps{Type: "object", XEmbeddedResource: true, XPreserveUnknownFields: ptr(true)}
	v1.Schema.OpenAPIV3Schema.Properties["spec"].Properties["ios"] = apiextensionsv1.JSONSchemaProps{XIntOrString: true}
	v1.Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}
	v2 := *v1.DeepCopy()
	v2.Name, v2.Storage = "v2", false
	v0 := *v1.DeepCopy()
	v0.Name, v0.Storage, v0.Served = "v0", false, false
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v1, v2, v0}
	return crd
}

func decodeV3(t *testing.T, body []byte) *spec3.OpenAPI {
	t.Helper()
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(body, doc); err != nil {
		t.Fatalf("document does not decode as OpenAPI v3: %v", err)
	}
	return doc
}

// TestV3AsUpstream: a CRD group-version's document is upstream's builder's,
// with v1.33's Kubernetes models (the recorded io.k8s.* schemas, no
// ShardInfo) and list parameters (no shardSelector); the CRD's own parts
// as upstream renders them (an embedded resource's apiVersion, kind and
// metadata, int-or-string as anyOf).
func TestV3AsUpstream(t *testing.T) {
	b := New()
	b.Update(nil, flows())
	d, ok := b.Get("apis/stable.example.com/v1")
	if !ok {
		t.Fatal("no document")
	}
	doc := decodeV3(t, d.Body)
	v133 := v133Schemas()
	k8s := 0
	for name, s := range doc.Components.Schemas {
		if !strings.HasPrefix(name, "io.k8s.") {
			continue
		}
		k8s++
		want, ok := v133[name]
		if !ok {
			t.Errorf("%s: not a v1.33 schema", name)
			continue
		}
		got, _ := json.Marshal(s)
		exp, _ := json.Marshal(want)
		if string(got) != string(exp) {
			t.Errorf("%s differs from v1.33's", name)
		}
	}
	if k8s != len(v133) {
		t.Errorf("%d io.k8s.* schemas, v1.33 has %d for a CRD with status and scale", k8s, len(v133))
	}
	if strings.Contains(string(d.Body), "shardSelector") || strings.Contains(string(d.Body), "ShardInfo") {
		t.Error("v0.37's shard selection in a v1.33 document")
	}
	spec := doc.Components.Schemas["com.example.stable.v1.Flow"].Properties["spec"]
	emb := spec.Properties["emb"]
	if _, ok := emb.Properties["metadata"]; !ok || len(emb.Required) != 2 {
		t.Errorf("embedded resource: properties %v required %v", emb.Properties, emb.Required)
	}
	if ios := spec.Properties["ios"]; len(ios.AnyOf) != 2 {
		t.Errorf("int-or-string: %+v", ios)
	}
	if !patchHasFieldValidation(t, d.Body, "stable.example.com", "v1", "Flow") {
		t.Error("patch operation lacks fieldValidation")
	}
}

// TestV3SnapshotCoversBuilder: every io.k8s.* schema the library's builder
// puts in a CRD document is in the recorded v1.33 set (or is known to be
// v0.37's only), so that asV133 leaves nothing of v0.37 behind.
func TestV3SnapshotCoversBuilder(t *testing.T) {
	crd := flows()
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	for _, c := range []*CRD{flows(), crd} {
		s, err := builder.BuildOpenAPIV3(c, "v1", builder.Options{IncludeSelectableFields: true})
		if err != nil {
			t.Fatal(err)
		}
		for name := range s.Components.Schemas {
			if strings.HasPrefix(name, "io.k8s.") && v133Schemas()[name] == nil && name != v137Only[0] {
				t.Errorf("%s: no v1.33 schema recorded", name)
			}
		}
	}
}

// TestV3VersionsAsUpstream: as upstream's openapiv3 controller, a version
// that stops being served keeps its last document (the controller only
// builds served versions) until its CRD is deleted or not Established; a
// version never served has none, which the server answers as upstream's
// handler (an empty response).
func TestV3VersionsAsUpstream(t *testing.T) {
	b := New()
	crd := flows()
	b.Update(nil, crd)
	if _, ok := b.Get("apis/stable.example.com/v0"); ok {
		t.Fatal("a version never served has a document")
	}
	v2doc, ok := b.Get("apis/stable.example.com/v2")
	if !ok {
		t.Fatal("no v2 document")
	}
	unserved := crd.DeepCopy()
	unserved.Generation = 2
	unserved.Spec.Versions[1].Served = false
	b.Update(crd, unserved)
	if d, ok := b.Get("apis/stable.example.com/v2"); !ok || d != v2doc {
		t.Fatal("the document of a version made unserved changed")
	}
	if !strings.Contains(string(b.Index().Body), "apis/stable.example.com/v2?hash=") {
		t.Error("index lacks the kept document")
	}
	if strings.Contains(string(b.V2().Body), "com.example.stable.v2.Flow") {
		t.Error("/openapi/v2 still has the unserved version")
	}
	notEstablished := unserved.DeepCopy()
	notEstablished.Status.Conditions = nil
	b.Update(unserved, notEstablished)
	for _, v := range []string{"v1", "v2"} {
		if _, ok := b.Get("apis/stable.example.com/" + v); ok {
			t.Errorf("%s published for a CRD that is not Established", v)
		}
	}

	resp, err := NewServer(b).GetDocument(context.Background(), &registryv1.GetDocumentRequest{Version: "v3", Path: "apis/stable.example.com/v0"})
	if err != nil || len(resp.GetBody()) != 0 || resp.GetContentType() != "" || resp.GetEtag() != "" {
		t.Errorf("no document: %v %+v", err, resp)
	}
}

// TestV3AssembledAsMerged: a group-version document assembled from its
// parts' bytes is byte for byte what json.Marshal renders of upstream's
// MergeSpecsV3 of the parts.
func TestV3AssembledAsMerged(t *testing.T) {
	cluster := flows()
	cluster.Name = "sinks.stable.example.com"
	cluster.Spec.Scope = apiextensionsv1.ClusterScoped
	cluster.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "sinks", Singular: "sink", Kind: "Sink", ListKind: "SinkList"}
	cluster.Spec.Versions[0].Subresources = nil
	cluster.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "a <b> & c"
	gv := &v3GV{parts: map[string]*v3Part{}}
	var specs []*spec3.OpenAPI
	for _, c := range []*CRD{flows(), cluster} {
		gv.parts[c.Name] = &v3Part{crd: c, version: "v1"}
		s, err := buildV3(c, "v1")
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	if got := renderV3(gv).Body; string(got) != string(want) {
		t.Errorf("assembled document differs from the merged one:\n%s\n%s", got, want)
	}
}
