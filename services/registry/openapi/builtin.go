package openapi

// The documents of the built-in groups crdplane serves beside CRDs, with
// kube-apiserver v1.33's own schemas of their kinds, recorded by
// hack/record-core-openapi/record.sh (openapi-gen and kube-openapi's
// builders on k8s.io/api v0.33.13, as kube-apiserver builds them; the
// library this module builds with has no generated definitions of these
// groups):
//   - core/v1 (/openapi/v3/api/v1): Namespace, in v133_core_namespace.json;
//   - rbac.authorization.k8s.io/v1: Role, RoleBinding, ClusterRole and
//     ClusterRoleBinding, in v133_rbac.json.
//
// The kinds carry x-kubernetes-group-version-kind, which is what kubectl
// explain looks a kind up by. Each group is also a share of /openapi/v2.

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"
)

const (
	coreGVPath = "api/v1"
	rbacGVPath = "apis/rbac.authorization.k8s.io/v1"
)

var (
	//go:embed v133_core_namespace.json
	v133CoreJSON []byte
	//go:embed v133_rbac.json
	v133RBACJSON []byte
	// v133APIExtensionsV1 is apis/apiextensions.k8s.io/v1 (the CRD API's
	// routes and v1.33's models) as upstream v1.33 serves it, byte for
	// byte, recorded by hack/record-apiextensions-openapi.sh.
	//go:embed v133_apiextensions_v1.json
	v133APIExtensionsV1 []byte
)

// builtinGroup is one built-in group-version: its resources as
// kube-apiserver routes them and its recorded schemas.
type builtinGroup struct {
	gvPath    string
	resources []resource
	recorded  func() recordedSchemas
}

// recordedSchemas are a group's recorded schemas, by name, in their v3
// and v2 forms.
type recordedSchemas struct {
	V3 map[string]json.RawMessage `json:"v3"`
	V2 map[string]json.RawMessage `json:"v2"`
}

func recorded(file string, body []byte) func() recordedSchemas {
	return sync.OnceValue(func() recordedSchemas {
		var s recordedSchemas
		if err := json.Unmarshal(body, &s); err != nil {
			panic(fmt.Sprintf("openapi: %s: %v", file, err))
		}
		return s
	})
}

// namespaceResource is core/v1 namespaces as kube-apiserver routes them:
// cluster-scoped, status and finalize subresources, no deletecollection.
var namespaceResource = resource{
	version: "v1", kind: "Namespace", plural: "namespaces",
	schemaName: "io.k8s.api.core.v1.Namespace", listSchemaName: "io.k8s.api.core.v1.NamespaceList",
	status: true, finalize: true, noDeleteCollection: true, tag: "core_v1",
}

// rbacResource is one kind of rbac.authorization.k8s.io/v1: no
// subresources, every collection verb.
func rbacResource(kind, plural string, namespaced bool) resource {
	const pkg = "io.k8s.api.rbac.v1."
	return resource{
		group: "rbac.authorization.k8s.io", idGroup: "rbac.authorization", version: "v1",
		kind: kind, plural: plural, namespaced: namespaced,
		schemaName: pkg + kind, listSchemaName: pkg + kind + "List", tag: "rbacAuthorization_v1",
	}
}

var (
	coreGroup = builtinGroup{gvPath: coreGVPath, resources: []resource{namespaceResource}, recorded: recorded("v133_core_namespace.json", v133CoreJSON)}
	rbacGroup = builtinGroup{gvPath: rbacGVPath, resources: []resource{
		rbacResource("ClusterRole", "clusterroles", false),
		rbacResource("ClusterRoleBinding", "clusterrolebindings", false),
		rbacResource("Role", "roles", true),
		rbacResource("RoleBinding", "rolebindings", true),
	}, recorded: recorded("v133_rbac.json", v133RBACJSON)}
	// builtinGroups are served in every crdplane, in this order.
	builtinGroups = []builtinGroup{coreGroup, rbacGroup}
)

// document renders g's v3 document: its schemas beside the ones every
// document carries.
func (g builtinGroup) document() map[string]any {
	doc, paths, schemas := newDocument("Kubernetes")
	for _, r := range g.resources {
		r.addPaths(paths)
	}
	for name, s := range g.recorded().V3 {
		schemas[name] = s
	}
	return doc
}

// addV2 adds g's paths and definitions to the static share of
// /openapi/v2.
func (g builtinGroup) addV2(p *v2Parts) {
	for _, r := range g.resources {
		r.addV2Paths(p)
	}
	for name, s := range g.recorded().V2 {
		if _, ok := p.defs[name]; !ok {
			p.addDef(name, s)
		}
	}
}
