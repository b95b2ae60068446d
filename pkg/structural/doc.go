// Package structural applies a CustomResourceDefinition's structural OpenAPI v3
// schema to custom resources, as kube-apiserver does:
//
//   - Compile turns an apiextensions.k8s.io/v1 JSONSchemaProps into a Schema
//     (regular expressions compiled, enums indexed, formats resolved, defaults
//     parsed and pruned) once per CRD generation and version.
//   - Normalize does what upstream's request decoder does to a custom
//     resource: ObjectMeta at the root and in embedded resources is
//     round-tripped through metav1.ObjectMeta, unknown fields are pruned
//     (Prune) and non-nullable nulls without a default are dropped. It
//     returns the pruned paths, which upstream reports as
//     `unknown field "<path>"` warnings (or errors, with strict field
//     validation).
//   - Default applies defaults.
//   - Validate and ValidateUpdate (with ratcheting) validate against the
//     schema with upstream's error types, field paths and messages: the
//     OpenAPI keywords (ValidateSchema), the metadata of embedded resources
//     (ValidateEmbeddedResources) and x-kubernetes-list-type uniqueness
//     (ValidateListTypes).
//
// Objects are JSON values as decoded by k8s.io/apimachinery/pkg/util/json:
// map[string]any, []any, string, bool, int64, float64 and nil.
//
// Where upstream iterates Go maps (and so reports sibling errors in random
// order), this package visits keys in sorted order, so its output is
// deterministic.
package structural
