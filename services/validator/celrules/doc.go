// Package celrules evaluates the CEL validation rules of a CRD schema
// (x-kubernetes-validations) as kube-apiserver does, on Kubernetes' CEL
// libraries (k8s.io/apiserver/pkg/cel/...: the base environment and its
// function libraries, the OpenAPI-to-CEL type mapping, the conversion of
// values with list-type semantics, the cost estimator) over cel-go.
//
//   - Compile compiles a CRD version's rules once (per CRD generation): a
//     tree of the schema nodes that carry rules, each with its programs.
//   - Validator.Validate evaluates them on an object (and its old version
//     on update, with ratcheting through a schema.Correlation), within
//     upstream's per-call cost limit and per-object budget, returning
//     upstream's field errors and the warnings of excused failures.
//   - CheckRules performs the CRD write-time checks: compilation,
//     correlatable transition rules, optionalOldSelf, estimated costs.
//
// Errors carry upstream's types, paths and messages; nodes are visited in
// sorted property order where upstream walks Go maps.
package celrules
