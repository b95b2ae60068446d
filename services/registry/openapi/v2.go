package openapi

// The /openapi/v2 document: one swagger 2.0 document with the paths and
// definitions of every served CRD version, next to the apiextensions.k8s.io
// API itself. CRD schemas go through upstream's lossy v3 → v2 conversion
// (the reference's "Compatibility with OpenAPI V2"): only structural schemas
// are published, with allOf/anyOf/oneOf/not dropped, nullable fields and
// nodes that preserve unknown fields left untyped and without properties,
// and defaults pruned; a version without a usable schema, or one whose root
// preserves unknown fields, is published as a bare object.

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	openapiv2 "k8s.io/apiextensions-apiserver/pkg/controller/openapi/v2"
	generated "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	v2DefPrefix   = "#/definitions/"
	v2ParamPrefix = "#/parameters/"
	typeMeta      = metaPkg + "TypeMeta"
	scaleDef      = "io.k8s.api.autoscaling.v1.Scale"

	metadataDescription     = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
	listMetadataDescription = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)

// v2Parts collect a share of the v2 document: paths and definitions, each
// rendered on its own.
type v2Parts struct {
	paths map[string][]byte
	defs  map[string][]byte
}

func newV2Parts() *v2Parts {
	return &v2Parts{paths: map[string][]byte{}, defs: map[string][]byte{}}
}

func (p *v2Parts) addPath(path string, item map[string]any) { p.paths[path] = mustMarshal(item) }
func (p *v2Parts) addDef(name string, s any)                { p.defs[name] = mustMarshal(s) }

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("openapi v2: %v", err))
	}
	return b
}

// v2Part is a rendered share of the v2 document: the members of its
// "paths" and "definitions" objects, so that the document is assembled by
// concatenation, and (on demand) the same share in protobuf form.
type v2Part struct {
	paths, defs []byte
	hash        [sha512.Size]byte

	pbOnce sync.Once
	pb     []byte
	pbErr  error
}

func (p *v2Parts) render() *v2Part {
	out := &v2Part{paths: appendMembers(nil, p.paths), defs: appendMembers(nil, p.defs)}
	h := sha512.New()
	h.Write(out.paths)
	h.Write([]byte{0})
	h.Write(out.defs)
	h.Sum(out.hash[:0])
	return out
}

// proto is the part as a protobuf openapi_v2.Document holding only its
// paths and definitions: serialized documents concatenate into their merge.
func (p *v2Part) proto() ([]byte, error) {
	p.pbOnce.Do(func() {
		doc := make([]byte, 0, len(p.paths)+len(p.defs)+64)
		doc = append(doc, `{"swagger":"2.0","info":{"title":"","version":""},"paths":{`...)
		doc = append(doc, p.paths...)
		doc = append(doc, `},"definitions":{`...)
		doc = append(doc, p.defs...)
		doc = append(doc, "}}"...)
		d, err := openapi_v2.ParseDocument(doc)
		if err != nil {
			p.pbErr = fmt.Errorf("openapi v2 to protobuf: %w", err)
			return
		}
		p.pb, p.pbErr = proto.Marshal(&openapi_v2.Document{Paths: d.GetPaths(), Definitions: d.GetDefinitions()})
	})
	return p.pb, p.pbErr
}

// renderV2Part renders the v2 paths and definitions of one CRD
// group-version.
func renderV2Part(gvPath string, crds map[string]*CRD) *v2Part {
	p := newV2Parts()
	for _, name := range sortedNames(crds) {
		crd := crds[name]
		for i := range crd.Spec.Versions {
			v := &crd.Spec.Versions[i]
			if !v.Served || "apis/"+crd.Spec.Group+"/"+v.Name != gvPath {
				continue
			}
			r := crdResource(crd, v)
			r.addV2Paths(p)
			p.addDef(r.schemaName, kubeNativeV2(crd, v, r))
			p.addDef(r.listSchemaName, listSchemaV2(r, listKind(crd)))
		}
	}
	return p.render()
}

// crdResource describes a served version of a CRD.
func crdResource(crd *CRD, v *crdVersion) resource {
	r := resource{
		group: crd.Spec.Group, version: v.Name, kind: crd.Spec.Names.Kind, plural: crd.Spec.Names.Plural,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		schemaName: schemaName(crd.Spec.Group, v.Name, crd.Spec.Names.Kind),
		tag:        tagName(crd.Spec.Group, v.Name),
	}
	r.listSchemaName = schemaName(crd.Spec.Group, v.Name, listKind(crd))
	if v.Subresources != nil {
		r.status = v.Subresources.Status != nil
		r.scale = v.Subresources.Scale != nil
	}
	return r
}

// structuralSchema is the schema upstream publishes for a version: its
// structural form, unfolded, or nil when the schema is missing, has
// invalid types or is not structural.
func structuralSchema(v *crdVersion) *structuralschema.Structural {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil
	}
	in := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, in, nil); err != nil {
		return nil
	}
	if hasInvalidTypes(in.OpenAPIV3Schema) {
		return nil
	}
	s, err := structuralschema.NewStructural(in.OpenAPIV3Schema)
	if err != nil || len(structuralschema.ValidateStructural(nil, s)) > 0 {
		return nil
	}
	return s.Unfold()
}

var validTypes = map[string]bool{"": true, "array": true, "boolean": true, "integer": true, "number": true, "object": true, "string": true}

// hasInvalidTypes reports a type outside OpenAPI's anywhere in s.
func hasInvalidTypes(s *apiextensions.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if !validTypes[s.Type] {
		return true
	}
	if s.Items != nil {
		if hasInvalidTypes(s.Items.Schema) {
			return true
		}
		for i := range s.Items.JSONSchemas {
			if hasInvalidTypes(&s.Items.JSONSchemas[i]) {
				return true
			}
		}
	}
	for _, l := range [][]apiextensions.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range l {
			if hasInvalidTypes(&l[i]) {
				return true
			}
		}
	}
	if hasInvalidTypes(s.Not) {
		return true
	}
	for _, m := range []map[string]apiextensions.JSONSchemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k := range m {
			p := m[k]
			if hasInvalidTypes(&p) {
				return true
			}
		}
	}
	if s.AdditionalProperties != nil && hasInvalidTypes(s.AdditionalProperties.Schema) {
		return true
	}
	if s.AdditionalItems != nil && hasInvalidTypes(s.AdditionalItems.Schema) {
		return true
	}
	for _, d := range s.Dependencies {
		if hasInvalidTypes(d.Schema) {
			return true
		}
	}
	return false
}

// kubeNativeV2 is a version's object schema in v2: the converted CRD schema
// with apiVersion, kind and metadata.
func kubeNativeV2(crd *CRD, v *crdVersion, r resource) *spec.Schema {
	s := structuralSchema(v)
	var out *spec.Schema
	if s == nil || s.XPreserveUnknownFields || crd.Spec.PreserveUnknownFields {
		// kubectl would reject fields of an object it knows some
		// properties of: publish nothing but the type
		out = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	} else {
		out = openapiv2.ToStructuralOpenAPIV2(s).ToKubeOpenAPI()
		out.SetProperty("metadata", *spec.RefSchema(v2DefPrefix + objectMeta).WithDescription(metadataDescription))
		addTypeMetaV2(out)
		addEmbeddedPropertiesV2(out)
		pruneDefaults(out)
	}
	out.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": r.group, "version": r.version, "kind": r.kind}})
	if sf := selectableFields(v); sf != nil {
		out.AddExtension("x-kubernetes-selectable-fields", sf)
	}
	return out
}

func selectableFields(v *crdVersion) []any {
	if len(v.SelectableFields) == 0 {
		return nil
	}
	out := make([]any, 0, len(v.SelectableFields))
	for _, f := range v.SelectableFields {
		out = append(out, map[string]any{"fieldPath": strings.TrimPrefix(f.JSONPath, ".")})
	}
	return out
}

func listSchemaV2(r resource, listKind string) *spec.Schema {
	s := new(spec.Schema).
		Typed("object", "").
		WithDescription(fmt.Sprintf("%s is a list of %s", listKind, r.kind)).
		WithRequired("items").
		SetProperty("items", *spec.ArrayProperty(spec.RefSchema(v2DefPrefix + r.schemaName)).WithDescription(fmt.Sprintf("List of %s. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", r.plural))).
		SetProperty("metadata", *spec.RefSchema(v2DefPrefix + listMeta).WithDescription(listMetadataDescription))
	addTypeMetaV2(s)
	s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": r.group, "version": r.version, "kind": listKind}})
	return s
}

func addTypeMetaV2(s *spec.Schema) {
	tm := definitionsV2()[typeMeta].Schema
	s.SetProperty("apiVersion", tm.Properties["apiVersion"])
	s.SetProperty("kind", tm.Properties["kind"])
}

// addEmbeddedPropertiesV2 gives embedded resources their apiVersion, kind
// and metadata (not where unknown fields are preserved: kubectl would then
// reject the unknown ones).
func addEmbeddedPropertiesV2(s *spec.Schema) {
	if s == nil {
		return
	}
	for k := range s.Properties {
		p := s.Properties[k]
		addEmbeddedPropertiesV2(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		addEmbeddedPropertiesV2(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		addEmbeddedPropertiesV2(s.AdditionalProperties.Schema)
	}
	if preserve, ok := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields"); ok && preserve {
		return
	}
	if embedded, ok := s.Extensions.GetBool("x-kubernetes-embedded-resource"); !ok || !embedded {
		return
	}
	tm := definitionsV2()[typeMeta].Schema
	s.SetProperty("apiVersion", *withDescription(tm.Properties["apiVersion"], "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"))
	s.SetProperty("kind", *withDescription(tm.Properties["kind"], "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"))
	s.SetProperty("metadata", *spec.RefSchema(v2DefPrefix + objectMeta).WithDescription(metadataDescription))
	for _, f := range []string{"kind", "apiVersion"} {
		if !contains(s.Required, f) {
			s.Required = append(s.Required, f)
		}
	}
}

func withDescription(s spec.Schema, desc string) *spec.Schema { return s.WithDescription(desc) }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// pruneDefaults drops every default (upstream publishes v2 without them).
func pruneDefaults(s *spec.Schema) {
	if s == nil {
		return
	}
	s.Default = nil
	for k := range s.Properties {
		p := s.Properties[k]
		pruneDefaults(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		pruneDefaults(s.Items.Schema)
		for i := range s.Items.Schemas {
			pruneDefaults(&s.Items.Schemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		pruneDefaults(s.AdditionalProperties.Schema)
	}
	for _, l := range [][]spec.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range l {
			pruneDefaults(&l[i])
		}
	}
	pruneDefaults(s.Not)
}

// ---- paths ----

// v2Params are the shared query and path parameters, referenced from the
// operations as #/parameters/<name>.
var v2Params = func() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, l := range [][]map[string]any{listParams, writeParams, deleteParams, {prettyParam, forceParam}} {
		for _, p := range l {
			out[p["name"].(string)] = v2Param(p)
		}
	}
	ns := v2Param(param("namespace", "path", "string", "object name and auth scope, such as for teams and projects"))
	out["namespace"] = ns
	return out
}()

// v2Param turns a v3 parameter into v2's form (the type on the parameter).
func v2Param(p map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range p {
		if k == "schema" {
			for sk, sv := range v.(map[string]any) {
				out[sk] = sv
			}
			continue
		}
		out[k] = v
	}
	return out
}

func paramRefs(ps ...[]map[string]any) json.RawMessage {
	var out []any
	for _, l := range ps {
		for _, p := range l {
			out = append(out, map[string]any{"$ref": v2ParamPrefix + p["name"].(string)})
		}
	}
	return rawJSON(out)
}

// The parameter references rendered once.
var (
	v2ListRefs             = paramRefs(listParams)
	v2WriteRefs            = paramRefs(writeParams)
	v2PatchRefs            = paramRefs(writeParams, []map[string]any{forceParam})
	v2DeleteRefs           = paramRefs(deleteParams)
	v2DeleteCollectionRefs = paramRefs(deleteParams, listParams)
	v2PrettyRefs           = paramRefs([]map[string]any{prettyParam})
	v2NamespacePrettyRefs  = rawJSON([]any{map[string]any{"$ref": v2ParamPrefix + "namespace"}, map[string]any{"$ref": v2ParamPrefix + "pretty"}})
)

func v2Ref(name string) map[string]any { return map[string]any{"$ref": v2DefPrefix + name} }

func v2Body(schema string, required bool) map[string]any {
	return map[string]any{"name": "body", "in": "body", "required": required, "schema": v2Ref(schema)}
}

func v2Responses(schema string, codes ...string) map[string]any {
	out := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
	for _, c := range codes {
		out[c] = map[string]any{
			"description": map[string]string{"200": "OK", "201": "Created", "202": "Accepted"}[c],
			"schema":      v2Ref(schema),
		}
	}
	return out
}

func (r resource) v2Op(action, id, desc string, params json.RawMessage, resp map[string]any, consumes []string) map[string]any {
	op := map[string]any{
		"description":                     desc,
		"consumes":                        consumes,
		"produces":                        []string{"application/json", "application/yaml"},
		"schemes":                         []string{"https"},
		"tags":                            []string{r.tag},
		"operationId":                     id,
		"responses":                       resp,
		"x-kubernetes-action":             action,
		"x-kubernetes-group-version-kind": map[string]string{"group": r.group, "version": r.version, "kind": r.kind},
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	return op
}

var (
	v2Consumes      = []string{"*/*"}
	v2PatchConsumes = []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
)

// addV2Paths adds r's paths to p.
func (r resource) addV2Paths(p *v2Parts) {
	base := r.base()
	ns, nsInfix := "", ""
	scope := v2PrettyRefs
	if r.namespaced {
		ns, nsInfix = "namespaces/{namespace}/", "Namespaced"
		scope = v2NamespacePrettyRefs
	}
	id := func(verb, suffix string) string { return verb + r.tagID() + nsInfix + r.kind + suffix }
	patchBody := v2Body(patchRef, true)

	collection := map[string]any{
		"get":        r.v2Op("list", id("list", ""), "list objects of kind "+r.kind, v2ListRefs, v2Responses(r.listSchemaName, "200"), v2Consumes),
		"post":       r.v2Op("post", id("create", ""), "create a "+r.kind, prependJSON(v2Body(r.schemaName, true), v2WriteRefs), v2Responses(r.schemaName, "200", "201", "202"), v2Consumes),
		"parameters": scope,
	}
	if !r.noDeleteCollection {
		collection["delete"] = r.v2Op("deletecollection", r.deleteCollectionID(nsInfix), "delete collection of "+r.kind, prependJSON(v2Body(deleteOpts, false), v2DeleteCollectionRefs), v2Responses(statusRef, "200"), v2Consumes)
	}
	p.addPath(base+ns+r.plural, collection)
	name := map[string]any{"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "name of the " + r.kind}
	named := prependJSON(name, scope)
	p.addPath(base+ns+r.plural+"/{name}", map[string]any{
		"get":        r.v2Op("get", id("read", ""), "read the specified "+r.kind, nil, v2Responses(r.schemaName, "200"), v2Consumes),
		"put":        r.v2Op("put", id("replace", ""), "replace the specified "+r.kind, prependJSON(v2Body(r.schemaName, true), v2WriteRefs), v2Responses(r.schemaName, "200", "201"), v2Consumes),
		"patch":      r.v2Op("patch", id("patch", ""), "partially update the specified "+r.kind, prependJSON(patchBody, v2PatchRefs), v2Responses(r.schemaName, "200", "201"), v2PatchConsumes),
		"delete":     r.v2Op("delete", id("delete", ""), "delete a "+r.kind, prependJSON(v2Body(deleteOpts, false), v2DeleteRefs), v2Responses(statusRef, "200", "202"), v2Consumes),
		"parameters": named,
	})
	for _, sub := range []struct {
		on     bool
		name   string
		schema string
	}{{r.status, "status", r.schemaName}, {r.scale, "scale", scaleDef}} {
		if !sub.on {
			continue
		}
		suffix := strings.ToUpper(sub.name[:1]) + sub.name[1:]
		p.addPath(base+ns+r.plural+"/{name}/"+sub.name, map[string]any{
			"get":        r.v2Op("get", id("read", suffix), "read "+sub.name+" of the specified "+r.kind, nil, v2Responses(sub.schema, "200"), v2Consumes),
			"put":        r.v2Op("put", id("replace", suffix), "replace "+sub.name+" of the specified "+r.kind, prependJSON(v2Body(sub.schema, true), v2WriteRefs), v2Responses(sub.schema, "200", "201"), v2Consumes),
			"patch":      r.v2Op("patch", id("patch", suffix), "partially update "+sub.name+" of the specified "+r.kind, prependJSON(patchBody, v2PatchRefs), v2Responses(sub.schema, "200", "201"), v2PatchConsumes),
			"parameters": named,
		})
	}
	if r.finalize {
		p.addPath(base+ns+r.plural+"/{name}/finalize", map[string]any{
			"put":        r.v2Op("put", id("replace", "Finalize"), "replace finalize of the specified "+r.kind, prependJSON(v2Body(r.schemaName, true), v2WriteRefs), v2Responses(r.schemaName, "200", "201"), v2Consumes),
			"parameters": named,
		})
	}
	if r.namespaced {
		p.addPath(base+r.plural, map[string]any{
			"get":        r.v2Op("list", "list"+r.tagID()+r.kind+"ForAllNamespaces", "list objects of kind "+r.kind, v2ListRefs, v2Responses(r.listSchemaName, "200"), v2Consumes),
			"parameters": v2PrettyRefs,
		})
	}
}

// ---- the static part: apiextensions.k8s.io/v1 and shared definitions ----

var (
	defsV2Once sync.Once
	defsV2     map[string]common.OpenAPIDefinition
)

// definitionsV2 are upstream's generated definitions with v2 references.
func definitionsV2() map[string]common.OpenAPIDefinition {
	defsV2Once.Do(func() {
		raw := generated.GetOpenAPIDefinitions(func(path string) spec.Ref {
			return spec.MustCreateRef(v2DefPrefix + friendlyName(path))
		})
		defsV2 = make(map[string]common.OpenAPIDefinition, len(raw))
		for k, v := range raw {
			defsV2[friendlyName(k)] = v
		}
	})
	return defsV2
}

func addDefClosureV2(p *v2Parts, name string) {
	if _, ok := p.defs[name]; ok {
		return
	}
	def, ok := definitionsV2()[name]
	if !ok {
		return
	}
	s := copySchema(def.Schema)
	pruneDefaults(&s)
	p.addDef(name, s)
	for _, dep := range def.Dependencies {
		addDefClosureV2(p, friendlyName(dep))
	}
}

var (
	v2BaseOnce sync.Once
	v2Base     *v2Part
	v2BasePB   []byte
	v2BaseErr  error
)

const v2Head = `{"swagger":"2.0","info":{"title":"Kubernetes","version":"v1.33.0"},"paths":{`

// v2Tail ends the document: the shared parameters and the security
// definitions.
var v2Tail = func() []byte {
	params := map[string][]byte{}
	for k, v := range v2Params {
		params[k] = mustMarshal(v)
	}
	b := []byte(`},"parameters":{`)
	b = appendMembers(b, params)
	return append(b, `},"securityDefinitions":{"BearerToken":{"description":"Bearer Token authentication","type":"apiKey","name":"authorization","in":"header"}},"security":[{"BearerToken":[]}]}`...)
}()

// v2BasePart is the static share: the paths of apiextensions.k8s.io/v1,
// the definitions every document needs and the built-in groups' ones.
func v2BasePart() *v2Part {
	v2BaseOnce.Do(func() {
		p := newV2Parts()
		for _, n := range []string{objectMeta, listMeta, statusRef, deleteOpts, patchRef, scaleDef, crdTypeName, crdTypeName + "List"} {
			addDefClosureV2(p, n)
		}
		r := resource{
			group: "apiextensions.k8s.io", version: "v1", kind: "CustomResourceDefinition", plural: "customresourcedefinitions",
			schemaName: crdTypeName, listSchemaName: crdTypeName + "List", status: true, tag: "apiextensions_v1",
		}
		r.addV2Paths(p)
		for _, g := range builtinGroups {
			g.addV2(p)
		}
		for _, kind := range []string{"CustomResourceDefinition", "CustomResourceDefinitionList"} {
			name := "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1." + kind
			s := copySchema(definitionsV2()[name].Schema)
			pruneDefaults(&s)
			s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": r.group, "version": r.version, "kind": kind}})
			p.addDef(name, s)
		}
		v2Base = p.render()
		// the base in protobuf is a whole document: head, its share, tail
		whole := concatV2([]*v2Part{v2Base})
		d, err := openapi_v2.ParseDocument(whole.Body)
		if err != nil {
			v2BaseErr = fmt.Errorf("openapi v2 to protobuf: %w", err)
			return
		}
		v2BasePB, v2BaseErr = proto.Marshal(d)
	})
	return v2Base
}

// assembleV2 concatenates the document from the base and the
// group-versions' parts.
func assembleV2(parts []*v2Part) *Document {
	return concatV2(append([]*v2Part{v2BasePart()}, parts...))
}

func concatV2(all []*v2Part) *Document {
	size := len(v2Head) + len(v2Tail) + 32
	for _, p := range all {
		size += len(p.paths) + len(p.defs) + 2
	}
	b := make([]byte, 0, size)
	b = append(b, v2Head...)
	for i, p := range all {
		if i > 0 && len(p.paths) > 0 {
			b = append(b, ',')
		}
		b = append(b, p.paths...)
	}
	b = append(b, `},"definitions":{`...)
	for i, p := range all {
		if i > 0 && len(p.defs) > 0 {
			b = append(b, ',')
		}
		b = append(b, p.defs...)
	}
	b = append(b, v2Tail...)
	return &Document{Body: b, Hash: partsHash("json", all), Modified: time.Now()}
}

// assembleV2Proto concatenates the protobuf document: the base document
// followed by every part (a concatenation of serialized messages parses as
// their merge, which appends the parts' paths and definitions).
func assembleV2Proto(parts []*v2Part) (*Document, error) {
	v2BasePart()
	if v2BaseErr != nil {
		return nil, v2BaseErr
	}
	pbs := make([][]byte, len(parts))
	size := len(v2BasePB)
	for i, p := range parts {
		pb, err := p.proto()
		if err != nil {
			return nil, err
		}
		pbs[i] = pb
		size += len(pb)
	}
	b := make([]byte, 0, size)
	b = append(b, v2BasePB...)
	for _, pb := range pbs {
		b = append(b, pb...)
	}
	return &Document{Body: b, Hash: partsHash("protobuf", append([]*v2Part{v2BasePart()}, parts...)), Modified: time.Now()}, nil
}

// partsHash identifies a document assembled from parts.
func partsHash(kind string, parts []*v2Part) string {
	h := sha512.New()
	h.Write([]byte(kind))
	for _, p := range parts {
		h.Write(p.hash[:])
	}
	return fmt.Sprintf("%X", h.Sum(nil))
}

// appendMembers writes the members of a JSON object, keys sorted.
func appendMembers(b []byte, m map[string][]byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, mustMarshal(k)...)
		b = append(b, ':')
		b = append(b, m[k]...)
	}
	return b
}
