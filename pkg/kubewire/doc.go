// Package kubewire is the Kubernetes wire layer of crdplane's edge: content
// negotiation as kube-apiserver does it (Accept with several types and
// q-values, as=Table and as=PartialObjectMetadata(List) transformations,
// go-restful's Accept check on the typed routes, 406 and 415 Status errors
// with upstream's wording), request body decoding (Kubernetes protobuf to
// the JSON the registry takes, with upstream's 400 wording), and the
// protobuf encoding of the built-in kinds the server serves, from the JSON
// documents the registry and storage return, with upstream's libraries:
// k8s.io/apiserver's negotiation package, the serializers of
// k8s.io/apimachinery and the generated types of k8s.io/api,
// k8s.io/apiextensions-apiserver and meta.k8s.io.
//
// The behaviour is upstream's as observed on apiextensions-apiserver
// v0.33.13 (bin/apiextensions-upstream): the table tests hold the observed
// answers, the files of testdata/upstream upstream's bytes, and
// TestProbeUpstream (with KUBEWIRE_UPSTREAM set to the line the server
// prints) replays the requests against a running upstream.
//
// # How an edge uses it
//
// Every read negotiates its response with Negotiate (NegotiateWatch for a
// watch) and the endpoint's Target; a negotiation error is a 406 Status to
// render with ErrorOutput, which is also how every other error Status of
// the request is encoded (a protobuf client of a custom resource gets its
// 406 in protobuf; an Accept nothing serves gets indented JSON, Raw).
// When the Output is protobuf, the JSON document is encoded with an
// Encoder (one per process: it caches item encodings):
//
//   - CRD GET (TargetCRD; status too): Encoder.Object(doc) for protobuf;
//     Transform PartialObjectMetadata: the PartialObjectMetadata JSON, then
//     Object. Table is JSON or YAML only.
//   - CRD LIST (TargetCRDCollection): Encoder.List("apiextensions.k8s.io/v1",
//     "CustomResourceDefinitionList", ListMeta{...}, items) with the
//     registry's item documents as they are; PartialObjectMetadataList:
//     List("meta.k8s.io/v1" or "meta.k8s.io/v1beta1",
//     "PartialObjectMetadataList", ...) of the items' PartialObjectMetadata.
//   - CRD WATCH (TargetCRDCollection, NegotiateWatch): Content-Type
//     Output.WatchContentType(); each event (BOOKMARK and ERROR included)
//     is Encoder.WatchEvent(type, objectJSON), a length-prefixed frame.
//   - CRD create/update (TargetCRD): DecodeBody first (415 for an
//     unsupported Content-Type, 400 for a protobuf body that does not
//     decode, nothing written); Body.JSON goes to the registry. The
//     response negotiates as a GET does.
//   - CRD patch: patch types are the caller's; the response as a GET.
//   - CRD delete and deletecollection: DecodeDeleteOptions for the body.
//   - Custom resources (TargetCustomResource; TargetScale for /scale):
//     JSON and YAML as today; protobuf only with a PartialObjectMetadata
//     transformation (Encoder.Object or List of the PartialObjectMetadata
//     documents, WatchEvent for a watch); a plain protobuf Accept is the
//     406. A protobuf body of a custom resource is DecodeBody's 400, or
//     ErrAbortConnection (upstream's handler panics: field validation
//     other than Ignore); one of /scale decodes (TargetScale) to Scale
//     JSON.
//   - Discovery: TargetBuiltinDiscovery (/apis/apiextensions.k8s.io[/v1]),
//     TargetDiscovery (custom resource groups), TargetRootDiscovery (/apis,
//     /api: aggregated discovery when Transform is APIGroupDiscoveryList);
//     Encoder.Object of the APIGroupList, APIGroup, APIResourceList,
//     APIVersions or APIGroupDiscoveryList JSON.
package kubewire
