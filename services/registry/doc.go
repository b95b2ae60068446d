// Package registry is crdplane's registry service: it owns
// CustomResourceDefinitions (apiextensions.k8s.io/v1).
//
// It validates and stores CRDs through the StorageService (under
// /registry/apiextensions.k8s.io/customresourcedefinitions/<name>), serves
// them over the RegistryService gRPC API (create, get, list, update, patch,
// delete, watch), renders the discovery documents built from them, and runs
// the controllers that upstream kube-apiserver runs for CRDs: names
// acceptance (NamesAccepted), establishing (Established), API approval
// (KubernetesAPIApprovalPolicyConformant), non-structural schemas
// (NonStructuralSchema) and the cleanup finalizer that deletes a CRD's
// objects before the CRD itself (Terminating). It also publishes the
// OpenAPI v2 and v3 documents built from the CRDs (package openapi).
//
// The controllers follow a local, watch-fed copy of every CRD (the informer)
// and write status with compare-and-swap updates, so that any number of
// replicas can serve requests while the controllers run where an Elector lets
// them: on the replica holding an etcd lease (package leader).
package registry
