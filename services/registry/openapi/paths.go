package openapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

const crdGVPath = "apis/apiextensions.k8s.io/v1"

const (
	metaPkg     = "io.k8s.apimachinery.pkg.apis.meta.v1."
	objectMeta  = metaPkg + "ObjectMeta"
	listMeta    = metaPkg + "ListMeta"
	statusRef   = metaPkg + "Status"
	deleteOpts  = metaPkg + "DeleteOptions"
	patchRef    = metaPkg + "Patch"
	watchEvent  = metaPkg + "WatchEvent"
	crdTypeName = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
)

// resource describes one REST resource of a group-version.
type resource struct {
	group, version, kind, plural string
	namespaced                   bool
	schemaName, listSchemaName   string
	status, scale                bool
	tag                          string // operation tag and operationId infix
	// noDeleteCollection: the collection has no DELETE (namespaces)
	noDeleteCollection bool
	// finalize: the resource has the finalize subresource (PUT only)
	finalize bool
	// idGroup is the group as operation ids spell it when it is not group:
	// kube-apiserver's built-in groups drop ".k8s.io" (RbacAuthorizationV1)
	idGroup string
}

// base is the prefix of r's paths: /api/<version>/ for the core group,
// else /apis/<group>/<version>/.
func (r resource) base() string {
	if r.group == "" {
		return "/api/" + r.version + "/"
	}
	return "/apis/" + r.group + "/" + r.version + "/"
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

func param(name, in, typ, desc string) map[string]any {
	p := map[string]any{"name": name, "in": in, "description": desc, "schema": map[string]any{"type": typ, "uniqueItems": true}}
	if in == "path" {
		p["required"] = true
	}
	return p
}

var (
	listParams = []map[string]any{
		param("allowWatchBookmarks", "query", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
		param("continue", "query", "string", "The continue option should be set when retrieving more results from the server."),
		param("fieldSelector", "query", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
		param("labelSelector", "query", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
		param("limit", "query", "integer", "limit is a maximum number of responses to return for a list call."),
		param("resourceVersion", "query", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
		param("resourceVersionMatch", "query", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
		param("sendInitialEvents", "query", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`."),
		param("timeoutSeconds", "query", "integer", "Timeout for the list/watch call."),
		param("watch", "query", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
	}
	writeParams = []map[string]any{
		param("dryRun", "query", "string", "When present, indicates that modifications should not be persisted."),
		param("fieldManager", "query", "string", "fieldManager is a name associated with the actor or entity that is making these changes."),
		param("fieldValidation", "query", "string", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn, Strict."),
	}
	forceParam   = param("force", "query", "boolean", "Force is going to \"force\" Apply requests.")
	deleteParams = []map[string]any{
		param("dryRun", "query", "string", "When present, indicates that modifications should not be persisted."),
		param("gracePeriodSeconds", "query", "integer", "The duration in seconds before the object should be deleted."),
		param("propagationPolicy", "query", "string", "Whether and how garbage collection will be performed."),
	}
	prettyParam = param("pretty", "query", "string", "If 'true', then the output is pretty printed.")
)

// The parameter lists rendered once: every operation of every CRD repeats
// them.
var (
	listParamsJSON       = rawJSON(listParams)
	writeParamsJSON      = rawJSON(writeParams)
	patchParamsJSON      = rawJSON(concat(writeParams, []map[string]any{forceParam}))
	deleteParamsJSON     = rawJSON(deleteParams)
	deleteCollectionJSON = rawJSON(concat(deleteParams, listParams))
	prettyOnlyJSON       = rawJSON([]map[string]any{prettyParam})
	namespacePrettyJSON  = rawJSON([]map[string]any{param("namespace", "path", "string", "object name and auth scope, such as for teams and projects"), prettyParam})
)

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	return b
}

// prependJSON returns the JSON array list with first in front.
func prependJSON(first any, list json.RawMessage) json.RawMessage {
	f := rawJSON(first)
	out := make(json.RawMessage, 0, len(f)+len(list)+1)
	out = append(out, '[')
	out = append(out, f...)
	if len(list) > 2 {
		out = append(out, ',')
		out = append(out, list[1:]...)
	} else {
		out = append(out, ']')
	}
	return out
}

func concat(lists ...[]map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func jsonBody(schema string, required bool) map[string]any {
	return map[string]any{
		"content":  map[string]any{"*/*": map[string]any{"schema": ref(schema)}},
		"required": required,
	}
}

func responses(schema string, codes ...string) map[string]any {
	out := map[string]any{}
	for _, c := range codes {
		out[c] = map[string]any{
			"description": map[string]string{"200": "OK", "201": "Created", "202": "Accepted"}[c],
			"content": map[string]any{
				"application/json": map[string]any{"schema": ref(schema)},
				"application/yaml": map[string]any{"schema": ref(schema)},
			},
		}
	}
	return out
}

func (r resource) op(action, id, desc string, params json.RawMessage, resp map[string]any, body map[string]any) map[string]any {
	op := map[string]any{
		"tags":                            []string{r.tag},
		"description":                     desc,
		"operationId":                     id,
		"responses":                       resp,
		"x-kubernetes-action":             action,
		"x-kubernetes-group-version-kind": map[string]string{"group": r.group, "version": r.version, "kind": r.kind},
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if body != nil {
		op["requestBody"] = body
	}
	return op
}

// addPaths adds r's paths to paths.
func (r resource) addPaths(paths map[string]any) {
	base := r.base()
	ns, nsInfix, nsParams := "", "", prettyOnlyJSON
	if r.namespaced {
		ns = "namespaces/{namespace}/"
		nsInfix = "Namespaced"
		nsParams = namespacePrettyJSON
	}
	id := func(verb, suffix string) string { return verb + r.tagID() + nsInfix + r.kind + suffix }
	patchBody := map[string]any{
		"content": map[string]any{
			"application/json-patch+json":  map[string]any{"schema": ref(patchRef)},
			"application/merge-patch+json": map[string]any{"schema": ref(patchRef)},
			"application/apply-patch+yaml": map[string]any{"schema": ref(patchRef)},
		},
		"required": true,
	}
	collection := map[string]any{
		"get":        r.op("list", id("list", ""), "list objects of kind "+r.kind, listParamsJSON, responses(r.listSchemaName, "200"), nil),
		"post":       r.op("post", id("create", ""), "create a "+r.kind, writeParamsJSON, responses(r.schemaName, "200", "201", "202"), jsonBody(r.schemaName, true)),
		"parameters": nsParams,
	}
	if !r.noDeleteCollection {
		collection["delete"] = r.op("deletecollection", r.deleteCollectionID(nsInfix), "delete collection of "+r.kind, deleteCollectionJSON, responses(statusRef, "200"), jsonBody(deleteOpts, false))
	}
	paths[base+ns+r.plural] = collection
	nameParams := prependJSON(param("name", "path", "string", "name of the "+r.kind), nsParams)
	paths[base+ns+r.plural+"/{name}"] = map[string]any{
		"get":        r.op("get", id("read", ""), "read the specified "+r.kind, nil, responses(r.schemaName, "200"), nil),
		"put":        r.op("put", id("replace", ""), "replace the specified "+r.kind, writeParamsJSON, responses(r.schemaName, "200", "201"), jsonBody(r.schemaName, true)),
		"patch":      r.op("patch", id("patch", ""), "partially update the specified "+r.kind, patchParamsJSON, responses(r.schemaName, "200", "201"), patchBody),
		"delete":     r.op("delete", id("delete", ""), "delete a "+r.kind, deleteParamsJSON, responses(statusRef, "200", "202"), jsonBody(deleteOpts, false)),
		"parameters": nameParams,
	}
	if r.status {
		paths[base+ns+r.plural+"/{name}/status"] = map[string]any{
			"get":        r.op("get", id("read", "Status"), "read status of the specified "+r.kind, nil, responses(r.schemaName, "200"), nil),
			"put":        r.op("put", id("replace", "Status"), "replace status of the specified "+r.kind, writeParamsJSON, responses(r.schemaName, "200", "201"), jsonBody(r.schemaName, true)),
			"patch":      r.op("patch", id("patch", "Status"), "partially update status of the specified "+r.kind, patchParamsJSON, responses(r.schemaName, "200", "201"), patchBody),
			"parameters": nameParams,
		}
	}
	if r.finalize {
		paths[base+ns+r.plural+"/{name}/finalize"] = map[string]any{
			"put":        r.op("put", id("replace", "Finalize"), "replace finalize of the specified "+r.kind, writeParamsJSON, responses(r.schemaName, "200", "201"), jsonBody(r.schemaName, true)),
			"parameters": nameParams,
		}
	}
	if r.scale {
		const scale = "io.k8s.api.autoscaling.v1.Scale"
		paths[base+ns+r.plural+"/{name}/scale"] = map[string]any{
			"get":        r.op("get", id("read", "Scale"), "read scale of the specified "+r.kind, nil, responses(scale, "200"), nil),
			"put":        r.op("put", id("replace", "Scale"), "replace scale of the specified "+r.kind, writeParamsJSON, responses(scale, "200", "201"), jsonBody(scale, true)),
			"patch":      r.op("patch", id("patch", "Scale"), "partially update scale of the specified "+r.kind, patchParamsJSON, responses(scale, "200", "201"), patchBody),
			"parameters": nameParams,
		}
	}
	if r.namespaced {
		paths[base+r.plural] = map[string]any{
			"get":        r.op("list", "list"+r.tagID()+r.kind+"ForAllNamespaces", "list objects of kind "+r.kind, listParamsJSON, responses(r.listSchemaName, "200"), nil),
			"parameters": prettyOnlyJSON,
		}
	}
}

// deleteCollectionID is the operation id of r's collection DELETE:
// deleteCollection<GV><Kind> for custom resources, as apiextensions-apiserver
// names it, delete<GV>Collection<Kind> for kube-apiserver's built-in kinds
// (deleteRbacAuthorizationV1CollectionNamespacedRole).
func (r resource) deleteCollectionID(nsInfix string) string {
	if r.idGroup != "" {
		return "delete" + r.tagID() + "Collection" + nsInfix + r.kind
	}
	return "deleteCollection" + r.tagID() + nsInfix + r.kind
}

// tagID is the group-version part of operation ids, e.g. StableExampleComV1
// (CoreV1 for the core group).
func (r resource) tagID() string {
	group := r.group
	switch {
	case r.idGroup != "":
		group = r.idGroup
	case group == "":
		group = "core"
	}
	var b strings.Builder
	for _, part := range strings.FieldsFunc(group+"."+r.version, func(c rune) bool { return c == '.' || c == '-' }) {
		rs := []rune(part)
		rs[0] = unicode.ToUpper(rs[0])
		b.WriteString(string(rs))
	}
	return b.String()
}

func schemaName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + kind
}

func newDocument(title string) (map[string]any, map[string]any, map[string]any) {
	paths, schemas := map[string]any{}, map[string]any{}
	doc := map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": title, "version": "v0.1.0"},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
	for _, n := range []string{objectMeta, listMeta, statusRef, deleteOpts, patchRef} {
		addSchemaClosure(schemas, n)
	}
	return doc, paths, schemas
}

func listKind(crd *CRD) string {
	if crd.Spec.Names.ListKind != "" {
		return crd.Spec.Names.ListKind
	}
	return crd.Spec.Names.Kind + "List"
}

// tagName is upstream's operation tag for a group-version, e.g. stableExampleCom_v1.
func tagName(group, version string) string {
	var b strings.Builder
	for i, part := range strings.FieldsFunc(group, func(c rune) bool { return c == '.' || c == '-' }) {
		rs := []rune(part)
		if i > 0 {
			rs[0] = unicode.ToUpper(rs[0])
		}
		b.WriteString(string(rs))
	}
	return b.String() + "_" + version
}

func gvkExt(r resource, kind string) []map[string]string {
	return []map[string]string{{"group": r.group, "kind": kind, "version": r.version}}
}
