package kubewire

import (
	"bytes"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
)

// Paths of the probed endpoints (the CronTab CRD of testdata/crontab-crd.yaml
// and one CronTab).
const (
	crdsPath   = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	crdPath    = crdsPath + "/crontabs.stable.example.com"
	crsPath    = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	crPath     = crsPath + "/my-new-cron-object"
	scalePath  = crPath + "/scale"
	protoTable = "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"
	protoPOM   = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	protoPOML  = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	aggregated = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

// readJSON reads a YAML or JSON testdata file as JSON.
func readJSON(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	j, err := utilyaml.ToJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// testCRD returns testdata/crontab-crd.yaml renamed (plural name.group).
func testCRD(t testing.TB, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(readJSON(t, "crontab-crd.yaml"), crd); err != nil {
		t.Fatal(err)
	}
	if plural != "" {
		crd.Name = plural + "." + crd.Spec.Group
		crd.Spec.Names.Plural = plural
		crd.Spec.Names.Singular = plural[:len(plural)-1]
		crd.Spec.Names.Kind = "K" + plural[:len(plural)-1]
		crd.Spec.Names.ShortNames = nil
	}
	return crd
}

// protoBody encodes obj (typed, its TypeMeta set) with upstream's protobuf
// serializer.
func protoBody(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(nil, nil).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// envelope wraps raw message bytes in the protobuf envelope of a kind.
func envelope(t testing.TB, gvk schema.GroupVersionKind, raw []byte) []byte {
	t.Helper()
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}, Raw: raw}
	b, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), b...)
}

// The bad protobuf bodies of a CRD create.
func crdProto(t testing.TB, plural string) []byte {
	crd := testCRD(t, plural)
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return protoBody(t, crd)
}

func crdProtoUnknownField(t testing.TB, plural string) []byte {
	raw, err := testCRD(t, plural).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw = protowire.AppendTag(raw, 99, protowire.VarintType)
	raw = protowire.AppendVarint(raw, 7)
	raw = protowire.AppendTag(raw, 100, protowire.BytesType)
	raw = protowire.AppendString(raw, "surprise")
	return envelope(t, apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"), raw)
}

func crdProtoV1beta1(t testing.TB, plural string) []byte {
	crd := &apiextensionsv1beta1.CustomResourceDefinition{}
	v1 := testCRD(t, plural)
	crd.ObjectMeta = v1.ObjectMeta
	crd.Spec.Group = v1.Spec.Group
	crd.Spec.Scope = apiextensionsv1beta1.ResourceScope(v1.Spec.Scope)
	crd.Spec.Names = apiextensionsv1beta1.CustomResourceDefinitionNames{Plural: v1.Spec.Names.Plural, Singular: v1.Spec.Names.Singular, Kind: v1.Spec.Names.Kind, ListKind: v1.Spec.Names.Kind + "List"}
	crd.Spec.Versions = []apiextensionsv1beta1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}
	crd.SetGroupVersionKind(apiextensionsv1beta1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return protoBody(t, crd)
}

func statusProto(t testing.TB) []byte {
	s := &metav1.Status{Status: metav1.StatusSuccess, Message: "not a CRD"}
	s.SetGroupVersionKind(schema.GroupVersion{Version: "v1"}.WithKind("Status"))
	return protoBody(t, s)
}

func podKindProto(t testing.TB, plural string) []byte {
	raw, err := testCRD(t, plural).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return envelope(t, schema.GroupVersion{Version: "v1"}.WithKind("Pod"), raw)
}

func noKindProto(t testing.TB, plural string) []byte {
	raw, err := testCRD(t, plural).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return envelope(t, schema.GroupVersionKind{}, raw)
}

func deleteOptionsProto(t testing.TB) []byte {
	grace := int64(0)
	do := &metav1.DeleteOptions{GracePeriodSeconds: &grace}
	do.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	return protoBody(t, do)
}
