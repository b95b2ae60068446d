package kubewire

import (
	"errors"
	"io"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// Media types served and consumed.
const (
	// ContentTypeJSON is application/json.
	ContentTypeJSON = runtime.ContentTypeJSON
	// ContentTypeYAML is application/yaml.
	ContentTypeYAML = runtime.ContentTypeYAML
	// ContentTypeProtobuf is the Kubernetes protobuf encoding
	// (application/vnd.kubernetes.protobuf): the 4-byte prefix k8s\x00 and a
	// runtime.Unknown envelope around the generated message.
	ContentTypeProtobuf = runtime.ContentTypeProtobuf
	// ContentTypeProtobufWatch is the Content-Type of a protobuf watch
	// stream: length-delimited frames of metav1.WatchEvent.
	ContentTypeProtobufWatch = ContentTypeProtobuf + ";stream=watch"
)

// The built-in scheme of the server's typed API: what upstream's
// apiextensions-apiserver registers in its Scheme (apiextensions internal,
// v1 and v1beta1; the meta options of the empty v1 group; the
// unversioned discovery and Status types), plus the types its endpoints
// transform into or wrap (meta.k8s.io Table and PartialObjectMetadata,
// autoscaling/v1 Scale, apidiscovery.k8s.io v2 and v2beta1).
var (
	builtinScheme = runtime.NewScheme()
	// builtinCodecs is the codec factory of the typed endpoints: JSON,
	// YAML and protobuf (no CBOR: v1.33 serves none by default).
	builtinCodecs serializer.CodecFactory
)

// apiextensionsScheme holds what upstream's apiextensions Scheme holds
// (no autoscaling, no meta transformations): the typer upstream's
// handlers word decode errors with.
var apiextensionsScheme = runtime.NewScheme()

// unversioned is the group version of upstream's unversioned types.
var unversioned = schema.GroupVersion{Version: "v1"}

func init() {
	apiextensionsinstall.Install(apiextensionsScheme)
	metav1.AddToGroupVersion(apiextensionsScheme, unversioned)
	apiextensionsScheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})

	apiextensionsinstall.Install(builtinScheme)
	metav1.AddToGroupVersion(builtinScheme, unversioned)
	builtinScheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	utilruntime.Must(addMetaTransforms(builtinScheme))
	utilruntime.Must(autoscalingv1.AddToScheme(builtinScheme))
	utilruntime.Must(apidiscoveryv2.AddToScheme(builtinScheme))
	utilruntime.Must(apidiscoveryv2beta1.AddToScheme(builtinScheme))
	// the part of core/v1 crdplane serves (kube-apiserver's legacy group)
	builtinScheme.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Namespace{}, &corev1.NamespaceList{})
	utilruntime.Must(rbacv1.AddToScheme(builtinScheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(builtinScheme))
	builtinCodecs = serializer.NewCodecFactory(builtinScheme)
}

func addMetaTransforms(s *runtime.Scheme) error {
	s.AddKnownTypes(metav1.SchemeGroupVersion,
		&metav1.Table{}, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{})
	s.AddKnownTypes(metav1beta1.SchemeGroupVersion,
		&metav1beta1.Table{}, &metav1beta1.PartialObjectMetadata{}, &metav1beta1.PartialObjectMetadataList{})
	return nil
}

// wireType is a built-in kind the server encodes to protobuf.
type wireType struct {
	// newObject returns an empty typed object of the kind.
	newObject func() protoObject
	// item is the kind of a list's items ("" for a kind that is no list).
	item string
	// marshal, when set, replaces the generated marshaler (for what the
	// v0.37 types encode that v1.33 does not).
	marshal func(protoObject) ([]byte, error)
}

// protoObject is a typed object with upstream's generated protobuf
// marshalers.
type protoObject interface {
	runtime.Object
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

// wireTypes are the kinds Encoder encodes, by group/version and kind.
var wireTypes = map[schema.GroupVersionKind]wireType{
	apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"):     {newObject: func() protoObject { return &apiextensionsv1.CustomResourceDefinition{} }, marshal: marshalCRDv133},
	apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"): {newObject: func() protoObject { return &apiextensionsv1.CustomResourceDefinitionList{} }, item: "CustomResourceDefinition"},
	unversioned.WithKind("Status"):                                              {newObject: func() protoObject { return &metav1.Status{} }},
	unversioned.WithKind("APIVersions"):                                         {newObject: func() protoObject { return &metav1.APIVersions{} }},
	unversioned.WithKind("APIGroupList"):                                        {newObject: func() protoObject { return &metav1.APIGroupList{} }},
	unversioned.WithKind("APIGroup"):                                            {newObject: func() protoObject { return &metav1.APIGroup{} }},
	unversioned.WithKind("APIResourceList"):                                     {newObject: func() protoObject { return &metav1.APIResourceList{} }},
	metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"):                 {newObject: func() protoObject { return &metav1.PartialObjectMetadata{} }},
	metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"):             {newObject: func() protoObject { return &metav1.PartialObjectMetadataList{} }, item: "PartialObjectMetadata"},
	metav1beta1.SchemeGroupVersion.WithKind("PartialObjectMetadata"):            {newObject: func() protoObject { return &metav1beta1.PartialObjectMetadata{} }},
	metav1beta1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"):        {newObject: func() protoObject { return &metav1beta1.PartialObjectMetadataList{} }, item: "PartialObjectMetadata"},
	autoscalingv1.SchemeGroupVersion.WithKind("Scale"):                          {newObject: func() protoObject { return &autoscalingv1.Scale{} }},
	corev1.SchemeGroupVersion.WithKind("Namespace"):                             {newObject: func() protoObject { return &corev1.Namespace{} }},
	corev1.SchemeGroupVersion.WithKind("NamespaceList"):                         {newObject: func() protoObject { return &corev1.NamespaceList{} }, item: "Namespace"},
	apiregistrationv1.SchemeGroupVersion.WithKind("APIService"):                 {newObject: func() protoObject { return &apiregistrationv1.APIService{} }},
	apiregistrationv1.SchemeGroupVersion.WithKind("APIServiceList"):             {newObject: func() protoObject { return &apiregistrationv1.APIServiceList{} }, item: "APIService"},
	rbacv1.SchemeGroupVersion.WithKind("Role"):                                  {newObject: func() protoObject { return &rbacv1.Role{} }},
	rbacv1.SchemeGroupVersion.WithKind("RoleList"):                              {newObject: func() protoObject { return &rbacv1.RoleList{} }, item: "Role"},
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):                           {newObject: func() protoObject { return &rbacv1.ClusterRole{} }},
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleList"):                       {newObject: func() protoObject { return &rbacv1.ClusterRoleList{} }, item: "ClusterRole"},
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):                           {newObject: func() protoObject { return &rbacv1.RoleBinding{} }},
	rbacv1.SchemeGroupVersion.WithKind("RoleBindingList"):                       {newObject: func() protoObject { return &rbacv1.RoleBindingList{} }, item: "RoleBinding"},
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):                    {newObject: func() protoObject { return &rbacv1.ClusterRoleBinding{} }},
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBindingList"):                {newObject: func() protoObject { return &rbacv1.ClusterRoleBindingList{} }, item: "ClusterRoleBinding"},
	apidiscoveryv2.SchemeGroupVersion.WithKind("APIGroupDiscoveryList"):         {newObject: func() protoObject { return &apidiscoveryv2.APIGroupDiscoveryList{} }},
	apidiscoveryv2beta1.SchemeGroupVersion.WithKind("APIGroupDiscoveryList"):    {newObject: func() protoObject { return &apidiscoveryv2beta1.APIGroupDiscoveryList{} }},
}

// lookupWireType returns the wire type of a kind, or the protobuf
// serializer's not-marshalable error for a kind without a protobuf message
// (custom resources).
func lookupWireType(gvk schema.GroupVersionKind) (wireType, error) {
	if gvk.Group == "" && gvk.Version == "" {
		gvk.Version = unversioned.Version
	}
	wt, ok := wireTypes[gvk]
	if !ok {
		return wireType{}, NotMarshalableError()
	}
	return wt, nil
}

// NotMarshalableError is upstream's protobuf serializer's error for an
// object without a protobuf message, as it reports a custom resource
// (*unstructured.Unstructured): a 406 NotAcceptable Status error.
func NotMarshalableError() error {
	err := protobuf.NewSerializer(nil, nil).Encode(&unstructured.Unstructured{}, io.Discard)
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		return &apierrors.StatusError{ErrStatus: as.Status()}
	}
	return err
}
