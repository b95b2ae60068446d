package conformance

import (
	"bytes"
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"
)

// The oracle speaks protobuf as client-go does for built-in kinds: request
// bodies are encoded with the upstream serializer from the YAML a case
// gives, and protobuf answers (objects and watch frames) are decoded back
// into JSON, so they are normalised and compared like every other answer.

const contentTypeProtobuf = "application/vnd.kubernetes.protobuf"

var (
	pbScheme = newProtobufScheme()
	// pbSerializer writes and reads the "k8s\x00" envelope (runtime.Unknown).
	pbSerializer = protobuf.NewSerializer(pbScheme, pbScheme)
	// pbRaw reads the un-enveloped messages of a watch stream's frames.
	pbRaw = protobuf.NewRawSerializer(pbScheme, pbScheme)
)

func newProtobufScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		apiextensionsv1.AddToScheme,
		apiextensionsv1beta1.AddToScheme,
		autoscalingv1.AddToScheme,
		apidiscoveryv2.AddToScheme,
		apidiscoveryv2beta1.AddToScheme,
		metav1.AddMetaToScheme,
		metav1beta1.AddMetaToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
}

// isProtobuf reports whether a Content-Type names the protobuf encoding.
func isProtobuf(contentType string) bool {
	return strings.HasPrefix(strings.TrimSpace(contentType), contentTypeProtobuf)
}

// encodeProtobuf turns a JSON document of a kind the scheme knows into its
// enveloped protobuf encoding, the body client-go sends.
func encodeProtobuf(doc []byte) ([]byte, error) {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	obj, err := pbScheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("a protobuf body of %s: %w", gvk, err)
	}
	if err := json.Unmarshal(doc, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	var b bytes.Buffer
	if err := pbSerializer.Encode(obj, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Ways a case spoils a protobuf body, as a client or an attacker might.
const (
	// mangleTruncate keeps the first half of the body.
	mangleTruncate = "truncate"
	// mangleMagic replaces the "k8s\x00" prefix.
	mangleMagic = "badMagic"
	// mangleUnknownField appends a field the message does not define to the
	// enveloped object.
	mangleUnknownField = "unknownField"
	// mangleNoEnvelope sends the object's message without the envelope.
	mangleNoEnvelope = "noEnvelope"
)

func mangleProtobuf(b []byte, how string) ([]byte, error) {
	switch how {
	case "":
		return b, nil
	case mangleTruncate:
		return b[:len(b)/2], nil
	case mangleMagic:
		out := append([]byte(nil), b...)
		copy(out, "k9s\x01")
		return out, nil
	case mangleUnknownField, mangleNoEnvelope:
		var u runtime.Unknown
		if len(b) < 4 {
			return nil, fmt.Errorf("a protobuf body of %d bytes", len(b))
		}
		if err := u.Unmarshal(b[4:]); err != nil {
			return nil, err
		}
		if how == mangleNoEnvelope {
			return u.Raw, nil
		}
		// Field 999, wire type 0 (varint), value 1.
		u.Raw = be.AppendUvarint(u.Raw, 999<<3)
		u.Raw = append(u.Raw, 1)
		out, err := u.Marshal()
		if err != nil {
			return nil, err
		}
		return append([]byte("k8s\x00"), out...), nil
	}
	return nil, fmt.Errorf("unknown protobuf mangling %q", how)
}

// protobufToJSON decodes an enveloped protobuf answer into JSON with its
// apiVersion and kind; ok is false for bytes that are not one.
func protobufToJSON(b []byte) ([]byte, bool) {
	obj, gvk, err := pbSerializer.Decode(b, nil, nil)
	if err != nil || gvk == nil {
		return unversionedToJSON(b)
	}
	return objectJSON(obj, *gvk)
}

// unversionedToJSON decodes an enveloped message whose TypeMeta names a
// kind of the unversioned types without an apiVersion (upstream's root
// discovery handlers encode APIGroupList so): the JSON has its kind and no
// apiVersion, as the envelope says.
func unversionedToJSON(b []byte) ([]byte, bool) {
	var u runtime.Unknown
	if len(b) < 4 || string(b[:4]) != "k8s\x00" || u.Unmarshal(b[4:]) != nil || u.APIVersion != "" || u.Kind == "" {
		return nil, false
	}
	obj, err := pbScheme.New(schema.GroupVersionKind{Version: "v1", Kind: u.Kind})
	if err != nil {
		return nil, false
	}
	m, ok := obj.(interface{ Unmarshal([]byte) error })
	if !ok || m.Unmarshal(u.Raw) != nil {
		return nil, false
	}
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, false
	}
	var doc map[string]any
	if json.Unmarshal(j, &doc) != nil {
		return nil, false
	}
	delete(doc, "apiVersion")
	doc["kind"] = u.Kind
	out, err := json.Marshal(doc)
	return out, err == nil
}

func objectJSON(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, bool) {
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	if ev, ok := obj.(*metav1.WatchEvent); ok {
		inner := ev.Object.Raw
		if j, ok := protobufToJSON(inner); ok {
			inner = j
		}
		out, err := json.Marshal(map[string]any{"type": ev.Type, "object": json.RawMessage(inner)})
		return out, err == nil
	}
	out, err := json.Marshal(obj)
	return out, err == nil
}

// readProtobufFrames reads a protobuf watch stream: 4-byte big-endian
// lengths, each followed by a WatchEvent message (raw or enveloped),
// delivered as JSON {"type","object"}; a frame that does not decode is
// delivered as a description of its bytes.
func readProtobufFrames(r io.Reader, out chan<- []byte) {
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := be.BigEndian.Uint32(hdr[:])
		if n > 64<<20 {
			out <- []byte(fmt.Sprintf("%q", fmt.Sprintf("(a frame of %d bytes)", n)))
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		out <- watchFrameJSON(frame)
	}
}

func watchFrameJSON(frame []byte) []byte {
	if bytes.HasPrefix(frame, []byte("k8s\x00")) {
		if j, ok := protobufToJSON(frame); ok {
			return j
		}
	}
	var ev metav1.WatchEvent
	gvk := metav1.SchemeGroupVersion.WithKind("WatchEvent")
	if _, _, err := pbRaw.Decode(frame, &gvk, &ev); err == nil {
		if j, ok := objectJSON(&ev, gvk); ok {
			return j
		}
	}
	q, _ := json.Marshal(fmt.Sprintf("(an undecodable frame of %d bytes)", len(frame)))
	return q
}

// protobufBody builds a request's protobuf body from its YAML/JSON body.
func protobufBody(doc []byte, mangle string) ([]byte, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	b, err := encodeProtobuf(j)
	if err != nil {
		return nil, err
	}
	return mangleProtobuf(b, mangle)
}
