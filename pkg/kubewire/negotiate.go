package kubewire

import (
	"errors"
	"net/http"
	"net/url"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

// Target is the kind of endpoint a request is negotiated for: each has
// upstream's serializer set and endpoint restrictions.
type Target int

const (
	// TargetCRD is apiextensions.k8s.io/v1 customresourcedefinitions (and
	// their status): a typed endpoint with JSON, YAML and protobuf; Table
	// in JSON or YAML; PartialObjectMetadata(List) in any of them.
	TargetCRD Target = iota
	// TargetCustomResource is a custom resource (and its status): the
	// crdHandler's JSON, YAML and protobuf serializers, protobuf only for a
	// transformation (PartialObjectMetadata(List)); Table in JSON or YAML.
	TargetCustomResource
	// TargetScale is a custom resource's scale subresource: the autoscaling
	// codecs (JSON, YAML, protobuf) with the custom resource's standard
	// serializers (JSON, YAML) when not transforming.
	TargetScale
	// TargetDiscovery is /api, /apis, /apis/<group> and
	// /apis/<group>/<version>: the typed codecs without transformations,
	// except that /apis and /api (RootDiscovery) may ask for aggregated
	// discovery (as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2).
	TargetDiscovery
	// TargetRootDiscovery is /apis and /api, which serve aggregated
	// discovery when asked for it.
	TargetRootDiscovery
)

// Transform is a conversion of the response object a client asked for
// with Accept parameters (as=<kind>;g=<group>;v=<version>).
type Transform string

// Transformations served.
const (
	// TransformNone is the object itself.
	TransformNone Transform = ""
	// TransformTable is meta.k8s.io Table.
	TransformTable Transform = "Table"
	// TransformPartialObjectMetadata is meta.k8s.io PartialObjectMetadata.
	TransformPartialObjectMetadata Transform = "PartialObjectMetadata"
	// TransformPartialObjectMetadataList is meta.k8s.io
	// PartialObjectMetadataList.
	TransformPartialObjectMetadataList Transform = "PartialObjectMetadataList"
	// TransformAPIGroupDiscoveryList is aggregated discovery
	// (apidiscovery.k8s.io/v2 APIGroupDiscoveryList).
	TransformAPIGroupDiscoveryList Transform = "APIGroupDiscoveryList"
)

// Request is what negotiation reads from an HTTP request.
type Request struct {
	// Accept is the Accept header ("" when absent).
	Accept string
	// RawQuery is the URL's raw query: its pretty parameter, when
	// given, decides pretty printing (pretty=false too).
	RawQuery string
	// UserAgent is the User-Agent header: curl, Wget and browsers get
	// pretty JSON unless ?pretty says otherwise.
	UserAgent string
}

// Output is a negotiated response encoding.
type Output struct {
	// MediaType is the encoding: ContentTypeJSON, ContentTypeYAML or
	// ContentTypeProtobuf.
	MediaType string
	// Pretty is pretty-printed JSON (never set for other encodings).
	Pretty bool
	// Transform is the conversion asked for (TransformNone for the object
	// itself) and TransformGV its group/version (meta.k8s.io/v1 or
	// v1beta1, apidiscovery.k8s.io/v2).
	Transform   Transform
	TransformGV schema.GroupVersion
	// Stream is the stream parameter asked for ("watch" or "").
	Stream string
}

// Protobuf reports whether the response is Kubernetes protobuf.
func (o Output) Protobuf() bool { return o.MediaType == ContentTypeProtobuf }

// ContentType is the Content-Type of the response; for a watch
// (WatchContentType) see there.
func (o Output) ContentType() string { return o.MediaType }

// WatchContentType is the Content-Type of a watch stream as upstream sets
// it: application/json as is, other media types with ;stream=watch.
func (o Output) WatchContentType() string {
	if o.MediaType == ContentTypeJSON {
		return ContentTypeJSON
	}
	return o.MediaType + ";stream=watch"
}

// restrictions is upstream's RequestScope endpoint restrictions
// (negotiation.EndpointRestrictions) for a kind of endpoint.
type restrictions struct {
	// standard, when set, are the media types served without a
	// transformation (the crdHandler's StandardSerializers).
	standard []string
	// table reports whether the endpoint has a table convertor.
	table bool
}

// AllowsMediaTypeTransform is upstream's RequestScope rule: without a
// transformation, the standard media types; Table (JSON or YAML only) and
// PartialObjectMetadata(List) of meta.k8s.io v1 and v1beta1.
func (r restrictions) AllowsMediaTypeTransform(mimeType, mimeSubType string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil {
		if len(r.standard) == 0 {
			return true
		}
		for _, mt := range r.standard {
			if mt == mimeType+"/"+mimeSubType {
				return true
			}
		}
		return false
	}
	if gv := gvk.GroupVersion(); gv != metav1.SchemeGroupVersion && gv != metav1beta1.SchemeGroupVersion {
		return false
	}
	switch gvk.Kind {
	case string(TransformTable):
		return r.table && mimeType == "application" && (mimeSubType == "json" || mimeSubType == "yaml")
	case string(TransformPartialObjectMetadata), string(TransformPartialObjectMetadataList):
		return true
	}
	return false
}

// AllowsServerVersion allows sv=v1 (the meta group version).
func (restrictions) AllowsServerVersion(v string) bool { return v == metav1.SchemeGroupVersion.Version }

// AllowsStreamSchema allows stream=watch.
func (restrictions) AllowsStreamSchema(s string) bool { return s == "watch" }

// aggregatedRestrictions is upstream's aggregated discovery restriction
// (v1.33, where AggregatedDiscoveryRemoveBetaType is on): only
// as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2.
type aggregatedRestrictions struct{}

func (aggregatedRestrictions) AllowsMediaTypeTransform(_, _ string, gvk *schema.GroupVersionKind) bool {
	return isAggregatedDiscovery(gvk)
}
func (aggregatedRestrictions) AllowsServerVersion(string) bool  { return false }
func (aggregatedRestrictions) AllowsStreamSchema(s string) bool { return s == "watch" }

func isAggregatedDiscovery(gvk *schema.GroupVersionKind) bool {
	return gvk != nil && gvk.GroupVersion() == apidiscoveryv2.SchemeGroupVersion && gvk.Kind == string(TransformAPIGroupDiscoveryList)
}

// mediaTypes is a negotiated serializer offering media types only (what
// negotiation reads).
type mediaTypes []runtime.SerializerInfo

func (m mediaTypes) SupportedMediaTypes() []runtime.SerializerInfo { return m }
func (m mediaTypes) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}
func (m mediaTypes) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// targetSerializers returns the serializer set and restrictions of an
// endpoint kind.
func targetSerializers(t Target) (runtime.NegotiatedSerializer, negotiation.EndpointRestrictions) {
	switch t {
	case TargetCustomResource:
		return customResourceCodecs, restrictions{standard: []string{ContentTypeJSON, ContentTypeYAML}, table: true}
	case TargetScale:
		return builtinCodecs, restrictions{standard: []string{ContentTypeJSON, ContentTypeYAML}, table: true}
	case TargetDiscovery, TargetRootDiscovery:
		return builtinCodecs, negotiation.DefaultEndpointRestrictions
	default:
		return builtinCodecs, restrictions{table: true}
	}
}

// Negotiate picks the response encoding of a GET, LIST, create, update,
// patch or delete as upstream does for the endpoint kind: the first Accept
// clause (by q-value, then order) that a serializer of the endpoint
// offers and whose transformation the endpoint allows. No Accept is JSON.
// Nothing acceptable is upstream's 406 NotAcceptable Status error.
func Negotiate(r Request, t Target) (Output, error) {
	ns, restrict := targetSerializers(t)
	if t == TargetRootDiscovery {
		// upstream's aggregated discovery wrapper: a clause asking for
		// APIGroupDiscoveryList v2 selects the aggregated handler.
		if mt, ok := negotiation.NegotiateMediaTypeOptions(r.Accept, ns.SupportedMediaTypes(), aggregatedRestrictions{}); ok && isAggregatedDiscovery(mt.Convert) {
			restrict = aggregatedRestrictions{}
		}
	}
	req := r.httpRequest()
	mt, info, err := negotiation.NegotiateOutputMediaType(req, ns, restrict)
	if err != nil {
		return Output{}, statusError(err)
	}
	out := Output{MediaType: info.MediaType, Pretty: info.Serializer != mt.Accepted.Serializer, Stream: mt.Stream}
	if mt.Convert != nil {
		out.Transform = Transform(mt.Convert.Kind)
		out.TransformGV = mt.Convert.GroupVersion()
	}
	return out, nil
}

// NegotiateWatch picks the encoding of a watch stream as upstream does:
// the endpoint's negotiation (Negotiate) for the transformation, then a
// media type with a stream serializer (JSON or protobuf; not YAML). Nothing
// acceptable is the 406 listing the streaming media types.
func NegotiateWatch(r Request, t Target) (Output, error) {
	out, err := Negotiate(r, t)
	if err != nil {
		return Output{}, err
	}
	ns, restrict := targetSerializers(t)
	info, err := negotiation.NegotiateOutputMediaTypeStream(r.httpRequest(), ns, restrict)
	if err != nil {
		return Output{}, statusError(err)
	}
	out.MediaType = info.MediaType
	out.Pretty = false
	return out, nil
}

func (r Request) httpRequest() *http.Request {
	h := http.Header{}
	if r.Accept != "" {
		h.Set("Accept", r.Accept)
	}
	if r.UserAgent != "" {
		h.Set("User-Agent", r.UserAgent)
	}
	return &http.Request{Header: h, URL: &url.URL{RawQuery: r.RawQuery}}
}

// statusError turns a negotiation error (it carries its Status) into an
// *apierrors.StatusError.
func statusError(err error) error {
	var as apierrors.APIStatus
	if errors.As(err, &as) {
		return &apierrors.StatusError{ErrStatus: as.Status()}
	}
	return err
}
