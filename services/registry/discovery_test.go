package registry

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/grpcx"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

func TestStorageVersionHash(t *testing.T) {
	if got := storageVersionHash("stable.example.com", "v1", "CronTab"); got != "EdX2FP+L0js=" {
		t.Errorf("hash = %s", got)
	}
}

func TestVersionPriority(t *testing.T) {
	crd := &CRD{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "x.example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "ys", Kind: "Y"}}}
	// the example of the versioning page, shuffled
	for _, v := range []string{"foo10", "v11alpha2", "v2", "v10beta3", "v1", "v12alpha1", "foo1", "v3beta1", "v10", "v11beta2"} {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == "v1"})
	}
	setCondition(crd, condition{Type: condEstablished, Status: apiextensionsv1.ConditionTrue})
	g := buildGroup("x.example.com", map[string]*CRD{crd.Name: crd}).apiGroup(true)
	var got []string
	for _, v := range g.Versions {
		got = append(got, v.Version)
	}
	want := "v10 v2 v1 v11beta2 v10beta3 v3beta1 v12alpha1 v11alpha2 foo1 foo10"
	if strings.Join(got, " ") != want {
		t.Errorf("order = %v\nwant    %s", got, want)
	}
	if g.PreferredVersion.Version != "v10" {
		t.Errorf("preferred = %v", g.PreferredVersion)
	}
}

func discover(t *testing.T, group, version, accept string) (string, []byte, error) {
	t.Helper()
	resp, err := testRegistry.GetDiscovery(testCtx(t), &registryv1.GetDiscoveryRequest{Group: group, Version: version, Accept: accept})
	if err != nil {
		return "", nil, err
	}
	return resp.GetContentType(), resp.GetBody(), nil
}

func TestDiscovery(t *testing.T) {
	group := newGroup(t)
	schema := map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
	createT(t, crdJSON(group, "widgets", "Widget", func(o map[string]any) {
		spec(o)["names"].(map[string]any)["shortNames"] = []any{"wd"}
		spec(o)["names"].(map[string]any)["categories"] = []any{"all"}
		spec(o)["versions"] = []any{
			map[string]any{"name": "v1beta1", "served": true, "storage": false, "schema": schema},
			map[string]any{"name": "v1", "served": true, "storage": true, "schema": schema, "subresources": map[string]any{
				"status": map[string]any{}, "scale": map[string]any{"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
			}},
			map[string]any{"name": "v2alpha1", "served": true, "storage": false, "schema": schema},
			map[string]any{"name": "v3", "served": false, "storage": false, "schema": schema},
		}
	}))
	// a group whose only CRD serves no version is not listed
	other := newGroup(t)
	createT(t, crdJSON(other, "hiddens", "Hidden", func(o map[string]any) {
		spec(o)["versions"].([]any)[0].(map[string]any)["served"] = false
	}))
	waitEstablished(t, "widgets."+group)

	// discovery follows the informer, a moment behind the storage
	var body []byte
	eventually(t, 5*time.Second, "group in /apis", func() bool {
		_, b, err := discover(t, "", "", "application/json")
		body = b
		return err == nil && strings.Contains(string(b), `"name":"`+group+`"`)
	})
	var list metav1.APIGroupList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "APIGroupList" || list.APIVersion != "v1" || list.Groups[0].Name != "apiregistration.k8s.io" || list.Groups[1].Name != "authentication.k8s.io" || list.Groups[2].Name != "authorization.k8s.io" || list.Groups[3].Name != "rbac.authorization.k8s.io" || list.Groups[4].Name != "apiextensions.k8s.io" {
		t.Errorf("/apis starts with %+v", list.Groups[:5])
	}
	wantGroup := fmt.Sprintf(`{"name":"%[1]s","versions":[{"groupVersion":"%[1]s/v1","version":"v1"},{"groupVersion":"%[1]s/v1beta1","version":"v1beta1"},{"groupVersion":"%[1]s/v2alpha1","version":"v2alpha1"}],"preferredVersion":{"groupVersion":"%[1]s/v1","version":"v1"}}`, group)
	if !strings.Contains(string(body), wantGroup) {
		t.Errorf("/apis = %s\nwant it to contain %s", body, wantGroup)
	}

	ct, body, err := discover(t, group, "", "")
	if err != nil || ct != "application/json" {
		t.Fatal(err, ct)
	}
	if want := `{"kind":"APIGroup","apiVersion":"v1",` + wantGroup[1:]; string(body) != want {
		t.Errorf("/apis/%s =\n%s\nwant\n%s", group, body, want)
	}

	_, body, err = discover(t, group, "v1", "")
	if err != nil {
		t.Fatal(err)
	}
	hash := storageVersionHash(group, "v1", "Widget")
	want := fmt.Sprintf(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s/v1","resources":[`+
		`{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["delete","deletecollection","get","list","patch","create","update","watch"],"shortNames":["wd"],"categories":["all"],"storageVersionHash":"%s"},`+
		`{"name":"widgets/status","singularName":"","namespaced":true,"kind":"Widget","verbs":["get","patch","update"]},`+
		`{"name":"widgets/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]}]}`, group, hash)
	if string(body) != want {
		t.Errorf("/apis/%s/v1 =\n%s\nwant\n%s", group, body, want)
	}
	_, body, _ = discover(t, group, "v1beta1", "")
	if strings.Contains(string(body), "/status") {
		t.Errorf("v1beta1 has no subresources: %s", body)
	}

	_, body, err = discover(t, "apiextensions.k8s.io", "v1", "")
	if err != nil {
		t.Fatal(err)
	}
	want = `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apiextensions.k8s.io/v1","resources":[` +
		`{"name":"customresourcedefinitions","singularName":"customresourcedefinition","namespaced":false,"kind":"CustomResourceDefinition","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["crd","crds"],"categories":["api-extensions"],"storageVersionHash":"jfWCUB31mvA="},` +
		`{"name":"customresourcedefinitions/status","singularName":"","namespaced":false,"kind":"CustomResourceDefinition","verbs":["get","patch","update"]}]}`
	if string(body) != want {
		t.Errorf("/apis/apiextensions.k8s.io/v1 =\n%s\nwant\n%s", body, want)
	}

	for _, tt := range [][2]string{{group, "v3"}, {group, "v9"}, {"nothing.example.com", ""}, {other, ""}} {
		_, _, err := discover(t, tt[0], tt[1], "")
		if s := status(err); s.Code != http.StatusNotFound || s.Reason != metav1.StatusReasonNotFound || s.Message != "the server could not find the requested resource" {
			t.Errorf("/apis/%s/%s: %+v", tt[0], tt[1], s)
		}
	}
}

func TestAggregatedDiscovery(t *testing.T) {
	group := newGroup(t)
	createT(t, crdJSON(group, "cogs", "Cog"))
	waitEstablished(t, "cogs."+group)
	accept := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
	var ct string
	var body []byte
	eventually(t, 5*time.Second, "group in aggregated discovery", func() bool {
		var err error
		ct, body, err = discover(t, "", "", accept)
		return err == nil && strings.Contains(string(body), `"name":"`+group+`"`)
	})
	if ct != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" {
		t.Errorf("content type %q", ct)
	}
	// kube-apiserver's order: apiregistration.k8s.io (first, as the
	// aggregator puts it), authentication.k8s.io and authorization.k8s.io
	// (the reviews, create only),
	// rbac.authorization.k8s.io, apiextensions.k8s.io, then the CRD groups.
	if !strings.HasPrefix(string(body), `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apiregistration.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"apiservices","responseKind":{"group":"","version":"","kind":"APIService"},"scope":"Cluster","singularResource":"apiservice","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"categories":["api-extensions"],"subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"APIService"},"verbs":["get","patch","update"]}]}],"freshness":"Current"}]},{"metadata":{"name":"authentication.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"selfsubjectreviews","responseKind":{"group":"","version":"","kind":"SelfSubjectReview"},"scope":"Cluster","singularResource":"selfsubjectreview","verbs":["create"]},{"resource":"tokenreviews","responseKind":{"group":"","version":"","kind":"TokenReview"},"scope":"Cluster","singularResource":"tokenreview","verbs":["create"]}],"freshness":"Current"}]},{"metadata":{"name":"authorization.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"localsubjectaccessreviews","responseKind":{"group":"","version":"","kind":"LocalSubjectAccessReview"},"scope":"Namespaced","singularResource":"localsubjectaccessreview","verbs":["create"]},{"resource":"selfsubjectaccessreviews","responseKind":{"group":"","version":"","kind":"SelfSubjectAccessReview"},"scope":"Cluster","singularResource":"selfsubjectaccessreview","verbs":["create"]},{"resource":"selfsubjectrulesreviews","responseKind":{"group":"","version":"","kind":"SelfSubjectRulesReview"},"scope":"Cluster","singularResource":"selfsubjectrulesreview","verbs":["create"]},{"resource":"subjectaccessreviews","responseKind":{"group":"","version":"","kind":"SubjectAccessReview"},"scope":"Cluster","singularResource":"subjectaccessreview","verbs":["create"]}],"freshness":"Current"}]},{"metadata":{"name":"rbac.authorization.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"clusterrolebindings","responseKind":{"group":"","version":"","kind":"ClusterRoleBinding"},"scope":"Cluster","singularResource":"clusterrolebinding","verbs":["create","delete","deletecollection","get","list","patch","update","watch"]},{"resource":"clusterroles","responseKind":{"group":"","version":"","kind":"ClusterRole"},"scope":"Cluster","singularResource":"clusterrole","verbs":["create","delete","deletecollection","get","list","patch","update","watch"]},{"resource":"rolebindings","responseKind":{"group":"","version":"","kind":"RoleBinding"},"scope":"Namespaced","singularResource":"rolebinding","verbs":["create","delete","deletecollection","get","list","patch","update","watch"]},{"resource":"roles","responseKind":{"group":"","version":"","kind":"Role"},"scope":"Namespaced","singularResource":"role","verbs":["create","delete","deletecollection","get","list","patch","update","watch"]}],"freshness":"Current"}]},{"metadata":{"name":"apiextensions.k8s.io"},"versions":[{"version":"v1","resources":[{"resource":"customresourcedefinitions","responseKind":{"group":"","version":"","kind":"CustomResourceDefinition"},"scope":"Cluster","singularResource":"customresourcedefinition","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["crd","crds"],"categories":["api-extensions"],"subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"CustomResourceDefinition"},"verbs":["get","patch","update"]}]}],"freshness":"Current"}]}`) {
		t.Errorf("aggregated = %s", body)
	}
	want := fmt.Sprintf(`{"metadata":{"name":"%[1]s"},"versions":[{"version":"v1","resources":[{"resource":"cogs","responseKind":{"group":"%[1]s","version":"v1","kind":"Cog"},"scope":"Namespaced","singularResource":"cog","verbs":["delete","deletecollection","get","list","patch","create","update","watch"],"subresources":[{"subresource":"status","responseKind":{"group":"%[1]s","version":"v1","kind":"Cog"},"verbs":["get","patch","update"]}]}],"freshness":"Current"}]}`, group)
	if !strings.Contains(string(body), want) {
		t.Errorf("aggregated = %s\nwant it to contain %s", body, want)
	}
	// a client that prefers plain JSON gets the legacy document
	ct, _, _ = discover(t, "", "", "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	if ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
}

func TestReady(t *testing.T) {
	if err := testService.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

func TestOpenAPIDocuments(t *testing.T) {
	group := newGroup(t)
	createT(t, crdJSON(group, "springs", "Spring"))
	waitEstablished(t, "springs."+group)
	conn, err := grpcx.Dial("inproc://registry-test")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registryv1.NewOpenAPIServiceClient(conn)
	eventually(t, 5*time.Second, "OpenAPI document", func() bool {
		resp, err := client.GetDocument(testCtx(t), &registryv1.GetDocumentRequest{Version: "v3", Path: "apis/" + group + "/v1"})
		return err == nil && strings.Contains(string(resp.GetBody()), "Spring")
	})
	resp, err := client.GetDocument(testCtx(t), &registryv1.GetDocumentRequest{Version: "v3"})
	if err != nil || !strings.Contains(string(resp.GetBody()), "apis/"+group+"/v1") {
		t.Errorf("index: %v %s", err, resp.GetBody())
	}
}

func discoverResp(t *testing.T, group, version, accept string) *registryv1.GetDiscoveryResponse {
	t.Helper()
	resp, err := testRegistry.GetDiscovery(testCtx(t), &registryv1.GetDiscoveryRequest{Group: group, Version: version, Accept: accept})
	if err != nil {
		t.Fatalf("discovery /apis/%s/%s: %v", group, version, err)
	}
	return resp
}

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

// TestDiscoveryETags: every document has a strong ETag of its body, which
// moves when the document changes and only then.
func TestDiscoveryETags(t *testing.T) {
	group := newGroup(t)
	createT(t, crdJSON(group, "nuts", "Nut"))
	waitEstablished(t, "nuts."+group)
	eventually(t, 5*time.Second, "group in /apis", func() bool {
		return strings.Contains(string(discoverResp(t, "", "", "").GetBody()), `"name":"`+group+`"`)
	})
	docs := map[string]*registryv1.GetDiscoveryResponse{
		"list":       discoverResp(t, "", "", ""),
		"aggregated": discoverResp(t, "", "", aggregatedAccept),
		"group":      discoverResp(t, group, "", ""),
		"version":    discoverResp(t, group, "v1", ""),
	}
	for name, d := range docs {
		if want := fmt.Sprintf(`"%X"`, sha512.Sum512(d.GetBody())); d.GetEtag() != want {
			t.Errorf("%s: etag %s, want %s", name, d.GetEtag(), want)
		}
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(docs["aggregated"].GetBody(), &agg); err != nil || agg.Kind != "APIGroupDiscoveryList" || len(agg.Items) < 2 {
		t.Fatalf("aggregated document: %v %s", err, docs["aggregated"].GetBody())
	}
	if again := discoverResp(t, "", "", aggregatedAccept); again.GetEtag() != docs["aggregated"].GetEtag() {
		t.Error("etag moved without a change")
	}

	// another group appears: the documents of every group change, this
	// group's do not
	other := newGroup(t)
	createT(t, crdJSON(other, "bolts", "Bolt"))
	waitEstablished(t, "bolts."+other)
	eventually(t, 5*time.Second, "other group in /apis", func() bool {
		return strings.Contains(string(discoverResp(t, "", "", "").GetBody()), `"name":"`+other+`"`)
	})
	if discoverResp(t, "", "", "").GetEtag() == docs["list"].GetEtag() || discoverResp(t, "", "", aggregatedAccept).GetEtag() == docs["aggregated"].GetEtag() {
		t.Error("/apis etag did not change")
	}
	if discoverResp(t, group, "", "").GetEtag() != docs["group"].GetEtag() || discoverResp(t, group, "v1", "").GetEtag() != docs["version"].GetEtag() {
		t.Error("an unrelated group's etag changed")
	}
}

// TestDiscoveryIncremental: a CRD change re-renders its own group only, and
// status-only changes leave the documents of every group alone.
func TestDiscoveryIncremental(t *testing.T) {
	x := newDiscoveryIndex()
	a := establishedCRD("as.a.example.com", "a.example.com", "As", "A")
	b := establishedCRD("bs.b.example.com", "b.example.com", "Bs", "B")
	x.update(nil, a)
	x.update(nil, b)
	_, agg, _ := x.document("", "", aggregatedAccept)
	groupB := x.groups["b.example.com"]

	a2 := a.DeepCopy()
	a2.ResourceVersion = "2"
	setCondition(a2, condition{Type: condNonStructural, Status: apiextensionsv1.ConditionTrue})
	x.update(a, a2)
	if x.top == nil {
		t.Fatal("a status-only change dropped the documents of every group")
	}
	a3 := a2.DeepCopy()
	a3.Status.AcceptedNames.ShortNames = []string{"aa"}
	x.update(a2, a3)
	if x.groups["b.example.com"] != groupB {
		t.Fatal("an unrelated group was re-rendered")
	}
	_, agg2, _ := x.document("", "", aggregatedAccept)
	if agg2.etag == agg.etag {
		t.Fatal("aggregated /apis unchanged after a names change")
	}
	x.update(a3, nil)
	if _, _, err := x.document("a.example.com", "", ""); status(err).Code != http.StatusNotFound {
		t.Fatalf("deleted CRD's group: %v", err)
	}
	if x.order[0] != apiRegistrationGroup || x.order[1] != authenticationGroup || x.order[2] != authorizationGroup || x.order[3] != rbacGroup || x.order[4] != groupName || len(x.order) != 6 || x.order[5] != "b.example.com" {
		t.Fatalf("order %v", x.order)
	}
}

func establishedCRD(name, group, plural, kind string) *CRD {
	crd := &CRD{}
	crd.Name, crd.ResourceVersion = name, "1"
	crd.Spec.Group, crd.Spec.Scope = group, apiextensionsv1.NamespaceScoped
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: strings.ToLower(plural), Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"}
	crd.Status.AcceptedNames = crd.Spec.Names
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}
	setCondition(crd, condition{Type: condEstablished, Status: apiextensionsv1.ConditionTrue})
	return crd
}

// TestDiscoveryAuthorizationGroup: authorization.k8s.io/v1 lists the
// access reviews as kube-apiserver does (create only, not stored: no
// storageVersionHash).
func TestDiscoveryAuthorizationGroup(t *testing.T) {
	x := newDiscoveryIndex()
	_, d, err := x.document(authorizationGroup, "v1", "")
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"authorization.k8s.io/v1","resources":[{"name":"localsubjectaccessreviews","singularName":"localsubjectaccessreview","namespaced":true,"kind":"LocalSubjectAccessReview","verbs":["create"]},{"name":"selfsubjectaccessreviews","singularName":"selfsubjectaccessreview","namespaced":false,"kind":"SelfSubjectAccessReview","verbs":["create"]},{"name":"selfsubjectrulesreviews","singularName":"selfsubjectrulesreview","namespaced":false,"kind":"SelfSubjectRulesReview","verbs":["create"]},{"name":"subjectaccessreviews","singularName":"subjectaccessreview","namespaced":false,"kind":"SubjectAccessReview","verbs":["create"]}]}`
	if string(d.body) != want {
		t.Errorf("got  %s\nwant %s", d.body, want)
	}
	_, g, err := x.document(authorizationGroup, "", "")
	if err != nil || string(g.body) != `{"kind":"APIGroup","apiVersion":"v1","name":"authorization.k8s.io","versions":[{"groupVersion":"authorization.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"authorization.k8s.io/v1","version":"v1"}}` {
		t.Errorf("group: %s %v", g.body, err)
	}
	// A CRD cannot add to the group.
	x.update(nil, establishedCRD("things.authorization.k8s.io", authorizationGroup, "things", "Thing"))
	if _, d2, _ := x.document(authorizationGroup, "v1", ""); string(d2.body) != want {
		t.Errorf("a CRD changed the group: %s", d2.body)
	}
}
