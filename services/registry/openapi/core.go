package openapi

// The core/v1 document (/openapi/v3/api/v1) and the core/v1 share of
// /openapi/v2 carry the schemas of the one core resource crdplane serves,
// Namespace: kube-apiserver v1.33's own, recorded in
// v133_core_namespace.json by hack/record-core-openapi/record.sh (openapi-gen
// and kube-openapi's builders on k8s.io/api v0.33.13, as kube-apiserver
// builds them; the library this module builds with has no generated
// definitions of core/v1). Namespace and NamespaceList carry
// x-kubernetes-group-version-kind, which is what kubectl explain looks the
// kind up by.

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"
)

const coreGVPath = "api/v1"

//go:embed v133_core_namespace.json
var v133CoreJSON []byte

// namespaceResource is core/v1 namespaces as kube-apiserver routes them:
// cluster-scoped, status and finalize subresources, no deletecollection.
var namespaceResource = resource{
	version: "v1", kind: "Namespace", plural: "namespaces",
	schemaName: "io.k8s.api.core.v1.Namespace", listSchemaName: "io.k8s.api.core.v1.NamespaceList",
	status: true, finalize: true, noDeleteCollection: true, tag: "core_v1",
}

// coreSchemas are the recorded schemas, by name, in their v3 and v2 forms.
type coreSchemas struct {
	V3 map[string]json.RawMessage `json:"v3"`
	V2 map[string]json.RawMessage `json:"v2"`
}

var coreRecorded = sync.OnceValue(func() coreSchemas {
	var s coreSchemas
	if err := json.Unmarshal(v133CoreJSON, &s); err != nil {
		panic(fmt.Sprintf("openapi: v133_core_namespace.json: %v", err))
	}
	return s
})

// coreDocument renders api/v1: the Namespace schemas beside the ones every
// document carries.
func coreDocument() map[string]any {
	doc, paths, schemas := newDocument("Kubernetes")
	namespaceResource.addPaths(paths)
	for name, s := range coreRecorded().V3 {
		schemas[name] = s
	}
	return doc
}

// addCoreV2 adds the Namespace definitions to the static share of
// /openapi/v2.
func addCoreV2(p *v2Parts) {
	namespaceResource.addV2Paths(p)
	for name, s := range coreRecorded().V2 {
		if _, ok := p.defs[name]; !ok {
			p.addDef(name, s)
		}
	}
}
