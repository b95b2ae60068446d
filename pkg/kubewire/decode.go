package kubewire

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

// customResourceCodecs is the serializer set of upstream's crdHandler for
// custom resources, built from the library serializers with an
// unstructured creator and typer: JSON (with its pretty variant), YAML and
// protobuf (which encodes no custom resource; it serves the
// PartialObjectMetadata transformations and decodes nothing).
var customResourceCodecs = func() mediaTypes {
	creator, typer := unstructuredscheme.NewUnstructuredCreator(), unstructuredscheme.NewUnstructuredObjectTyper()
	return mediaTypes{
		{
			MediaType: ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json", EncodesAsText: true,
			Serializer:       kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, creator, typer, kjson.SerializerOptions{}),
			PrettySerializer: kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, creator, typer, kjson.SerializerOptions{Pretty: true}),
			StrictSerializer: kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, creator, typer, kjson.SerializerOptions{Strict: true}),
			StreamSerializer: &runtime.StreamSerializerInfo{
				EncodesAsText: true,
				Serializer:    kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, creator, typer, kjson.SerializerOptions{}),
				Framer:        kjson.Framer,
			},
		},
		{
			MediaType: ContentTypeYAML, MediaTypeType: "application", MediaTypeSubType: "yaml", EncodesAsText: true,
			Serializer:       kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, creator, typer, kjson.SerializerOptions{Yaml: true}),
			StrictSerializer: kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, creator, typer, kjson.SerializerOptions{Yaml: true, Strict: true}),
		},
		{
			MediaType: ContentTypeProtobuf, MediaTypeType: "application", MediaTypeSubType: "vnd.kubernetes.protobuf",
			Serializer: protobuf.NewSerializer(creator, typer),
			StreamSerializer: &runtime.StreamSerializerInfo{
				Serializer: protobuf.NewRawSerializer(creator, typer),
				Framer:     protobuf.LengthDelimitedFramer,
			},
		},
	}
}()

// Body is a request body after content negotiation.
type Body struct {
	// MediaType is the body's negotiated media type (ContentTypeJSON,
	// ContentTypeYAML or ContentTypeProtobuf).
	MediaType string
	// JSON is the object as JSON when the body was protobuf (decoded with
	// upstream's serializer, defaulted, and encoded as the registry takes
	// it). For JSON and YAML it is the body as sent: the caller's JSON
	// and YAML paths (strict decoding, their error wording) apply.
	JSON []byte
}

// BodyRequest is a create or update request body.
type BodyRequest struct {
	// ContentType is the Content-Type header ("" is JSON).
	ContentType string
	Body        []byte
	// Target is TargetCRD (create and update of CustomResourceDefinitions
	// and their status), TargetCustomResource or TargetScale.
	Target Target
	// Kind is the custom resource's kind (TargetCustomResource), which
	// upstream's decode errors name.
	Kind string
	// Group and Version are the request's (TargetCustomResource): with
	// Kind, the defaults upstream's handler decodes with, which its decode
	// errors name when the body's TypeMeta is empty.
	Group, Version string
	// FieldValidation is the request's fieldValidation parameter.
	FieldValidation string
}

// ErrAbortConnection reports a request upstream answers by closing the
// connection without a response: a protobuf body for a custom resource
// with field validation Warn (the default) or Strict, where upstream's
// handler looks for a strict protobuf decoder the crdHandler does not
// have and panics (its panic recovery aborts the connection; the server
// keeps serving). The caller should abort the request the same way
// (panic(http.ErrAbortHandler) in a net/http handler) or decide otherwise.
var ErrAbortConnection = errors.New("upstream aborts the connection: no strict protobuf decoder for custom resources")

// DecodeBody negotiates a create or update body's Content-Type as upstream
// does for the endpoint (an empty Content-Type is JSON; anything the
// endpoint's serializers do not offer is upstream's 415) and decodes a
// protobuf body: for CustomResourceDefinitions (TargetCRD) with the
// apiextensions codecs into the typed object, checked to be of
// apiextensions.k8s.io/v1, defaulted, and returned as JSON for the
// registry (unknown protobuf fields are dropped, as upstream drops them);
// for the scale subresource (TargetScale) into autoscaling/v1 Scale; for
// custom resources with the crdHandler's protobuf serializer, which
// decodes none: upstream's 400 (field validation Ignore) or
// ErrAbortConnection. What does not decode is upstream's 400 BadRequest
// with its wording. JSON and YAML bodies are returned as they are.
func DecodeBody(r BodyRequest) (Body, error) {
	ns, _ := targetSerializers(r.Target)
	info, err := negotiation.NegotiateInputSerializerForMediaType(r.ContentType, false, ns)
	if err != nil {
		return Body{}, statusError(err)
	}
	b := Body{MediaType: info.MediaType, JSON: r.Body}
	if info.MediaType != ContentTypeProtobuf {
		return b, nil
	}
	switch r.Target {
	case TargetCRD, TargetCRDCollection:
		doc, err := decodeCRD(info.Serializer, r.Body)
		if err != nil {
			return Body{}, err
		}
		b.JSON = doc
		return b, nil
	case TargetNamespace, TargetNamespaceCollection:
		doc, err := decodeNamespace(info.Serializer, r.Body)
		if err != nil {
			return Body{}, err
		}
		b.JSON = doc
		return b, nil
	case TargetRBAC, TargetRBACCollection:
		doc, err := decodeRBAC(info.Serializer, r.Body, r.Kind)
		if err != nil {
			return Body{}, err
		}
		b.JSON = doc
		return b, nil
	case TargetScale:
		doc, err := decodeScale(info.Serializer, r.Body)
		if err != nil {
			return Body{}, err
		}
		b.JSON = doc
		return b, nil
	}
	if r.FieldValidation != metav1.FieldValidationIgnore {
		return Body{}, ErrAbortConnection
	}
	// the crdHandler's protobuf decoder, into the empty object its
	// versioning decoder uses: it types no custom resource
	var defaults *schema.GroupVersionKind
	if r.Version != "" {
		defaults = &schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	}
	_, gvk, err := info.Serializer.Decode(r.Body, defaults, &unstructured.Unstructured{})
	if err == nil {
		err = NotMarshalableError()
	}
	return Body{}, decodeError(err, r.Kind, gvk, r.Body)
}

var crdV1 = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// decodeCRD decodes a protobuf CustomResourceDefinition as upstream's
// create and update handlers do (to the internal version, defaulted), and
// returns it as apiextensions.k8s.io/v1 JSON.
func decodeCRD(s runtime.Decoder, body []byte) ([]byte, error) {
	decoder := builtinCodecs.DecoderToVersion(s, apiextensions.SchemeGroupVersion)
	into := &apiextensions.CustomResourceDefinition{}
	def := crdV1
	obj, gvk, err := decoder.Decode(body, &def, into)
	if err != nil {
		return nil, decodeError(err, "CustomResourceDefinition", gvk, body)
	}
	if gv := gvk.GroupVersion(); gv != apiextensionsv1.SchemeGroupVersion {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)", gv.String(), apiextensionsv1.SchemeGroupVersion.String()))
	}
	out := &apiextensionsv1.CustomResourceDefinition{}
	if err := builtinScheme.Convert(obj, out, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out.SetGroupVersionKind(crdV1)
	doc, err := json.Marshal(out)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return doc, nil
}

var namespaceV1 = corev1.SchemeGroupVersion.WithKind("Namespace")

// decodeNamespace decodes a protobuf core/v1 Namespace (decodeTyped).
func decodeNamespace(s runtime.Decoder, body []byte) ([]byte, error) {
	return decodeTyped(s, body, namespaceV1, &corev1.Namespace{})
}

// decodeRBAC decodes a protobuf rbac.authorization.k8s.io/v1 object of
// kind (decodeTyped).
func decodeRBAC(s runtime.Decoder, body []byte, kind string) ([]byte, error) {
	gvk := rbacv1.SchemeGroupVersion.WithKind(kind)
	obj, err := builtinScheme.New(gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return decodeTyped(s, body, gvk, obj)
}

// decodeTyped decodes a protobuf built-in object of kind gvk as
// kube-apiserver's create and update handlers do and returns it as JSON
// (unknown protobuf fields dropped); what does not decode is upstream's
// 400.
func decodeTyped(s runtime.Decoder, body []byte, want schema.GroupVersionKind, into runtime.Object) ([]byte, error) {
	def := want
	obj, gvk, err := builtinCodecs.DecoderToVersion(s, want.GroupVersion()).Decode(body, &def, into)
	if err != nil {
		return nil, decodeError(err, want.Kind, gvk, body)
	}
	if gv := gvk.GroupVersion(); gv != want.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)", gv.String(), want.GroupVersion().String()))
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return doc, nil
}

// decodeScale decodes a protobuf autoscaling/v1 Scale as upstream's scale
// handlers do. What does not decode is the error upstream's handler
// reports when it words it: its typer (the custom resource's, over the
// apiextensions scheme) does not know Scale.
func decodeScale(s runtime.Decoder, body []byte) ([]byte, error) {
	scaleGVK := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	into := &autoscalingv1.Scale{}
	obj, gvk, err := builtinCodecs.DecoderToVersion(s, autoscalingv1.SchemeGroupVersion).Decode(body, &scaleGVK, into)
	if err != nil {
		if _, _, terr := apiextensionsScheme.ObjectKinds(into); terr != nil {
			return nil, apierrors.NewBadRequest(upstreamSchemeName(terr.Error()))
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if gv := gvk.GroupVersion(); gv != autoscalingv1.SchemeGroupVersion {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)", gv.String(), autoscalingv1.SchemeGroupVersion.String()))
	}
	obj.GetObjectKind().SetGroupVersionKind(scaleGVK)
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return doc, nil
}

// decodeError words a body that does not decode as upstream's handlers
// do: "<Kind> in version "<v>" cannot be handled as a <into>: <err>" when
// the body named a kind, else "the object provided is unrecognized (must
// be of type <into>): <err> (<summary of the body>)".
func decodeError(err error, intoKind string, gvk *schema.GroupVersionKind, body []byte) error {
	msg := upstreamSchemeName(err.Error())
	if gvk != nil && gvk.Kind != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", gvk.Kind, gvk.Version, intoKind, msg))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %s (%s)", intoKind, msg, summarize(body, 30)))
}

// UnrecognizedError is upstream's 400 for a body its decoder could not
// read at all (no kind known), as its handlers word it: "the object
// provided is unrecognized (must be of type <into>): <err> (<summary of
// the body>)", the summary the body as text when it is JSON, else in hex,
// cut at 30 bytes. A YAML body that does not convert is answered so.
func UnrecognizedError(err error, intoKind string, body []byte) error {
	return decodeError(err, intoKind, nil, body)
}

// summarize abbreviates a body for an error message as upstream's
// handlers do: JSON as text, anything else in hex, cut at max bytes.
func summarize(data []byte, maxLen int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLen {
			return string(data[:maxLen]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLen {
			return hex.EncodeToString(data[:maxLen]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// builtinSchemeName and apiextensionsSchemeName are this package's
// schemes' names in their errors; upstreamSchemeName rewrites them to the
// name upstream's apiextensions scheme has.
var (
	builtinSchemeName       = schemeName(builtinScheme)
	apiextensionsSchemeName = schemeName(apiextensionsScheme)
)

func schemeName(s *runtime.Scheme) string {
	_, _, err := s.ObjectKinds(&metav1.List{})
	if err == nil {
		return ""
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ` in scheme "`); i >= 0 {
		return msg[i+len(` in scheme "`) : len(msg)-1]
	}
	return ""
}

// upstreamApiextensionsSchemeName is the name upstream's apiextensions
// Scheme has in v1.33's "no kind is registered" errors (observed: the
// callsite name apimachinery v0.33's NewScheme gives it; v0.37's names
// this package's scheme pkg/runtime/scheme.go:111).
const upstreamApiextensionsSchemeName = "pkg/runtime/scheme.go:110"

func upstreamSchemeName(msg string) string {
	for _, name := range []string{builtinSchemeName, apiextensionsSchemeName} {
		if name != "" {
			msg = strings.ReplaceAll(msg, `in scheme "`+name+`"`, `in scheme "`+upstreamApiextensionsSchemeName+`"`)
		}
	}
	return msg
}

// DecodeDeleteOptions negotiates a DELETE body's Content-Type with the
// meta internal version codecs as upstream's delete handlers do (415 for
// what they do not offer) and decodes a protobuf body into meta.k8s.io/v1
// DeleteOptions, returned as JSON for the caller's JSON path; its decode
// failures are plain errors (upstream answers them 500 with the
// decoder's message). JSON and YAML bodies are returned as they are.
func DecodeDeleteOptions(contentType string, body []byte) (Body, error) {
	codecs := metainternalversionscheme.Codecs
	info, err := negotiation.NegotiateInputSerializerForMediaType(contentType, false, codecs)
	if err != nil {
		return Body{}, statusError(err)
	}
	b := Body{MediaType: info.MediaType, JSON: body}
	if info.MediaType != ContentTypeProtobuf {
		return b, nil
	}
	opts := &metav1.DeleteOptions{}
	def := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
	obj, _, err := codecs.DecoderToVersion(info.Serializer, def.GroupVersion()).Decode(body, &def, opts)
	if err != nil {
		return Body{}, err
	}
	if obj != opts {
		return Body{}, errors.New("decoded object cannot be converted to DeleteOptions")
	}
	opts.SetGroupVersionKind(def)
	doc, err := json.Marshal(opts)
	if err != nil {
		return Body{}, apierrors.NewInternalError(err)
	}
	b.JSON = doc
	return b, nil
}
