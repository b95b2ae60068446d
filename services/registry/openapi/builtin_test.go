package openapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func TestCoreDocument(t *testing.T) {
	b := New()
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b.Index().Body, &index); err != nil {
		t.Fatal(err)
	}
	d, ok := b.Get("api/v1")
	if !ok {
		t.Fatal("no api/v1 document")
	}
	if got, want := index.Paths["api/v1"].ServerRelativeURL, "/openapi/v3/api/v1?hash="+d.Hash; got != want {
		t.Fatalf("index entry of api/v1 = %q, want %q", got, want)
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(d.Body, doc); err != nil {
		t.Fatalf("api/v1 does not decode as OpenAPI v3: %v", err)
	}
	// the paths kubectl explain finds the kind by, with their operations
	for path, ops := range map[string][]string{
		"/api/v1/namespaces":                 {"listCoreV1Namespace", "createCoreV1Namespace"},
		"/api/v1/namespaces/{name}":          {"readCoreV1Namespace", "replaceCoreV1Namespace", "patchCoreV1Namespace", "deleteCoreV1Namespace"},
		"/api/v1/namespaces/{name}/status":   {"readCoreV1NamespaceStatus", "replaceCoreV1NamespaceStatus", "patchCoreV1NamespaceStatus"},
		"/api/v1/namespaces/{name}/finalize": {"replaceCoreV1NamespaceFinalize"},
	} {
		p := doc.Paths.Paths[path]
		if p == nil {
			t.Fatalf("no path %s", path)
		}
		var got []string
		for _, op := range []*spec3.Operation{p.Get, p.Post, p.Put, p.Patch, p.Delete} {
			if op == nil {
				continue
			}
			got = append(got, op.OperationId)
			var gvk map[string]string
			if err := op.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil || gvk["group"] != "" || gvk["version"] != "v1" || gvk["kind"] != "Namespace" {
				t.Fatalf("%s %s: gvk %v (%v)", path, op.OperationId, gvk, err)
			}
		}
		slices.Sort(got)
		slices.Sort(ops)
		if !slices.Equal(got, ops) {
			t.Fatalf("%s: operations %v, want %v", path, got, ops)
		}
	}
	ns := doc.Components.Schemas["io.k8s.api.core.v1.Namespace"]
	if ns == nil || !strings.HasPrefix(ns.Description, "Namespace provides a scope for Names.") {
		t.Fatalf("Namespace schema: %+v", ns)
	}
	assertGVK(t, ns.Extensions, "", "Namespace")
	// every reference resolves within the document
	body := string(d.Body)
	for _, name := range []string{"io.k8s.api.core.v1.NamespaceSpec", "io.k8s.api.core.v1.NamespaceStatus", "io.k8s.api.core.v1.NamespaceCondition", "io.k8s.api.core.v1.NamespaceList", objectMeta, listMeta, statusRef, deleteOpts, patchRef} {
		if doc.Components.Schemas[name] == nil {
			t.Fatalf("api/v1 lacks %s", name)
		}
	}
	for _, m := range strings.Split(body, `"#/components/schemas/`)[1:] {
		name, _, _ := strings.Cut(m, `"`)
		if doc.Components.Schemas[name] == nil {
			t.Fatalf("api/v1 references %s, which it lacks", name)
		}
	}
}

// The recorded meta/v1 schemas are the ones recorded beside the CRD
// documents: both come from v1.33's generated definitions.
func TestCoreRecordedAsV133(t *testing.T) {
	v133 := v133Schemas()
	n := 0
	for name, raw := range coreGroup.recorded().V3 {
		want, ok := v133[name]
		if !ok {
			continue
		}
		var got spec.Schema
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		gb, _ := json.Marshal(&got)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			t.Fatalf("%s differs from v133_components.json:\n%s\n%s", name, gb, wb)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("only %d shared schemas", n)
	}
}

func TestCoreInV2(t *testing.T) {
	var v2 struct {
		Paths       map[string]json.RawMessage `json:"paths"`
		Definitions map[string]spec.Schema     `json:"definitions"`
	}
	if err := json.Unmarshal(New().V2().Body, &v2); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/v1/namespaces", "/api/v1/namespaces/{name}", "/api/v1/namespaces/{name}/status", "/api/v1/namespaces/{name}/finalize"} {
		if v2.Paths[p] == nil {
			t.Fatalf("/openapi/v2 lacks path %s", p)
		}
	}
	for _, kind := range []string{"Namespace", "NamespaceList"} {
		s, ok := v2.Definitions["io.k8s.api.core.v1."+kind]
		if !ok {
			t.Fatalf("/openapi/v2 lacks %s", kind)
		}
		assertGVK(t, s.Extensions, "", kind)
	}
	spc := v2.Definitions["io.k8s.api.core.v1.Namespace"].Properties["spec"]
	if ref := spc.Ref.String(); ref != "#/definitions/io.k8s.api.core.v1.NamespaceSpec" {
		t.Fatalf("Namespace.spec refers to %q", ref)
	}
	if _, err := New().V2Proto(); err != nil {
		t.Fatal(err)
	}
}

func assertGVK(t *testing.T, ext spec.Extensions, group, kind string) {
	t.Helper()
	var gvks []map[string]string
	if err := ext.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil || len(gvks) != 1 || gvks[0]["group"] != group || gvks[0]["version"] != "v1" || gvks[0]["kind"] != kind {
		t.Fatalf("%s: x-kubernetes-group-version-kind %v (%v)", kind, gvks, err)
	}
}

// The rbac.authorization.k8s.io/v1 document: in the index, the four kinds'
// paths with kube-apiserver's operation ids, their schemas as v1.33
// records them (what kubectl explain role reads), and in /openapi/v2.
func TestRBACDocument(t *testing.T) {
	const group = "rbac.authorization.k8s.io"
	b := New()
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(b.Index().Body, &index); err != nil {
		t.Fatal(err)
	}
	d, ok := b.Get(rbacGVPath)
	if !ok {
		t.Fatalf("no %s document", rbacGVPath)
	}
	if got, want := index.Paths[rbacGVPath].ServerRelativeURL, "/openapi/v3/"+rbacGVPath+"?hash="+d.Hash; got != want {
		t.Fatalf("index entry = %q, want %q", got, want)
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(d.Body, doc); err != nil {
		t.Fatalf("%s does not decode as OpenAPI v3: %v", rbacGVPath, err)
	}
	const base = "/apis/rbac.authorization.k8s.io/v1/"
	for path, ops := range map[string][]string{
		base + "namespaces/{namespace}/roles":        {"listRbacAuthorizationV1NamespacedRole", "createRbacAuthorizationV1NamespacedRole", "deleteRbacAuthorizationV1CollectionNamespacedRole"},
		base + "namespaces/{namespace}/roles/{name}": {"readRbacAuthorizationV1NamespacedRole", "replaceRbacAuthorizationV1NamespacedRole", "patchRbacAuthorizationV1NamespacedRole", "deleteRbacAuthorizationV1NamespacedRole"},
		base + "roles": {"listRbacAuthorizationV1RoleForAllNamespaces"},
		base + "namespaces/{namespace}/rolebindings/{name}": {"readRbacAuthorizationV1NamespacedRoleBinding", "replaceRbacAuthorizationV1NamespacedRoleBinding", "patchRbacAuthorizationV1NamespacedRoleBinding", "deleteRbacAuthorizationV1NamespacedRoleBinding"},
		base + "rolebindings":                               {"listRbacAuthorizationV1RoleBindingForAllNamespaces"},
		base + "clusterroles":                               {"listRbacAuthorizationV1ClusterRole", "createRbacAuthorizationV1ClusterRole", "deleteRbacAuthorizationV1CollectionClusterRole"},
		base + "clusterrolebindings/{name}":                 {"readRbacAuthorizationV1ClusterRoleBinding", "replaceRbacAuthorizationV1ClusterRoleBinding", "patchRbacAuthorizationV1ClusterRoleBinding", "deleteRbacAuthorizationV1ClusterRoleBinding"},
	} {
		p := doc.Paths.Paths[path]
		if p == nil {
			t.Fatalf("no path %s", path)
		}
		var got []string
		for _, op := range []*spec3.Operation{p.Get, p.Post, p.Put, p.Patch, p.Delete} {
			if op != nil {
				got = append(got, op.OperationId)
			}
		}
		slices.Sort(got)
		slices.Sort(ops)
		if !slices.Equal(got, ops) {
			t.Fatalf("%s: operations %v, want %v", path, got, ops)
		}
	}
	for kind, desc := range map[string]string{
		"Role":               "Role is a namespaced, logical grouping of PolicyRules",
		"ClusterRole":        "ClusterRole is a cluster level, logical grouping of PolicyRules",
		"RoleBinding":        "RoleBinding references a role",
		"ClusterRoleBinding": "ClusterRoleBinding references a ClusterRole",
	} {
		for _, k := range []string{kind, kind + "List"} {
			s := doc.Components.Schemas["io.k8s.api.rbac.v1."+k]
			if s == nil {
				t.Fatalf("no schema of %s", k)
			}
			assertGVK(t, s.Extensions, group, k)
		}
		if s := doc.Components.Schemas["io.k8s.api.rbac.v1."+kind]; !strings.HasPrefix(s.Description, desc) {
			t.Fatalf("%s: description %q", kind, s.Description)
		}
	}
	for _, m := range strings.Split(string(d.Body), `"#/components/schemas/`)[1:] {
		name, _, _ := strings.Cut(m, `"`)
		if doc.Components.Schemas[name] == nil {
			t.Fatalf("%s references %s, which it lacks", rbacGVPath, name)
		}
	}

	var v2 struct {
		Paths       map[string]json.RawMessage `json:"paths"`
		Definitions map[string]spec.Schema     `json:"definitions"`
	}
	if err := json.Unmarshal(b.V2().Body, &v2); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{base + "namespaces/{namespace}/roles", base + "clusterrolebindings/{name}", base + "rolebindings"} {
		if v2.Paths[p] == nil {
			t.Fatalf("/openapi/v2 lacks path %s", p)
		}
	}
	for _, kind := range []string{"Role", "RoleList", "ClusterRole", "ClusterRoleBinding", "RoleBinding"} {
		s, ok := v2.Definitions["io.k8s.api.rbac.v1."+kind]
		if !ok {
			t.Fatalf("/openapi/v2 lacks %s", kind)
		}
		assertGVK(t, s.Extensions, group, kind)
	}
	if _, err := b.V2Proto(); err != nil {
		t.Fatal(err)
	}
}
