package kubewire

import (
	"bytes"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// TestNamespaceProtobuf: a protobuf core/v1 Namespace body decodes to its
// JSON, the JSON encodes back to the same message, and a body of another
// kind is upstream's 400.
func TestNamespaceProtobuf(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ser := protobuf.NewSerializer(scheme, scheme)
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"a": "b"}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
	}
	var buf bytes.Buffer
	if err := ser.Encode(ns, &buf); err != nil {
		t.Fatal(err)
	}
	body, err := DecodeBody(BodyRequest{ContentType: ContentTypeProtobuf, Body: buf.Bytes(), Target: TargetNamespace})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Namespace
	if err := json.Unmarshal(body.JSON, &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "team" || got.Labels["a"] != "b" || got.Kind != "Namespace" || got.APIVersion != "v1" || len(got.Spec.Finalizers) != 1 {
		t.Fatalf("decoded %s", body.JSON)
	}
	pb, err := NewEncoder(EncoderConfig{}).Object(body.JSON)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := ser.Decode(pb, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := back.(*corev1.Namespace); !ok || b.Name != "team" || b.Labels["a"] != "b" {
		t.Fatalf("encoded back: %#v", back)
	}

	other := &corev1.NamespaceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
	buf.Reset()
	if err := ser.Encode(other, &buf); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeBody(BodyRequest{ContentType: ContentTypeProtobuf, Body: buf.Bytes(), Target: TargetNamespace}); !apierrors.IsBadRequest(err) {
		t.Fatalf("a NamespaceList body: %v", err)
	}
}
