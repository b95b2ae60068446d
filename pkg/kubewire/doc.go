// Package kubewire is the Kubernetes wire layer of crdplane's edge: content
// negotiation as kube-apiserver does it (Accept with several types and
// q-values, as=Table and as=PartialObjectMetadata(List) transformations,
// 406 and 415 Status errors with upstream's wording), request body decoding
// (JSON, YAML and Kubernetes protobuf to the JSON the registry takes), and
// the protobuf encoding of the built-in kinds the server serves, from the
// JSON documents the registry and storage return, with upstream's
// serializers (k8s.io/apimachinery/pkg/runtime/serializer/protobuf and the
// generated types of k8s.io/api and k8s.io/apiextensions-apiserver).
package kubewire
