package kubewire

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

// Target is the kind of endpoint a request is negotiated for: each has
// upstream's serializer set and endpoint restrictions, and the typed
// (go-restful) routes their Accept pre-check.
type Target int

const (
	// TargetCRD is a go-restful route of one CustomResourceDefinition (GET,
	// create, update, patch, delete, deletecollection, and the status
	// subresource): JSON, YAML and protobuf; Table in JSON or YAML;
	// PartialObjectMetadata(List) in any of them.
	TargetCRD Target = iota
	// TargetCRDCollection is the LIST and WATCH route of
	// customresourcedefinitions: as TargetCRD, its go-restful route also
	// producing the watch stream types.
	TargetCRDCollection
	// TargetCustomResource is a custom resource (and its status): the
	// crdHandler's JSON, YAML and protobuf serializers, protobuf only for a
	// transformation (PartialObjectMetadata(List)); Table in JSON or YAML.
	TargetCustomResource
	// TargetScale is a custom resource's scale subresource: the autoscaling
	// codecs with the custom resource's standard serializers (JSON, YAML)
	// when not transforming.
	TargetScale
	// TargetBuiltinDiscovery is /apis/apiextensions.k8s.io and
	// /apis/apiextensions.k8s.io/v1 (go-restful routes): the typed codecs,
	// no transformations.
	TargetBuiltinDiscovery
	// TargetDiscovery is /apis/<group> and /apis/<group>/<version> of the
	// custom resources' groups: the typed codecs, no transformations.
	TargetDiscovery
	// TargetRootDiscovery is /apis and /api: legacy discovery, or
	// aggregated discovery when asked for with
	// as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2.
	TargetRootDiscovery
	// TargetNamespace is a go-restful route of one core/v1 Namespace (GET,
	// create, update, patch, delete, and the status and finalize
	// subresources): as TargetCRD.
	TargetNamespace
	// TargetNamespaceCollection is the LIST and WATCH route of namespaces:
	// as TargetCRDCollection.
	TargetNamespaceCollection
	// TargetRBAC is a go-restful route of one rbac.authorization.k8s.io/v1
	// object (Role, ClusterRole, RoleBinding, ClusterRoleBinding): as
	// TargetCRD.
	TargetRBAC
	// TargetRBACCollection is the LIST and WATCH route of an RBAC
	// resource: as TargetCRDCollection.
	TargetRBACCollection
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
	// Raw is upstream's fallback rendering of an error Status whose
	// Accept cannot be served (ErrorOutput): JSON indented by two spaces,
	// without a trailing newline, whatever pretty says.
	Raw bool
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

// AllowsMediaTypeTransform allows aggregated discovery only.
func (aggregatedRestrictions) AllowsMediaTypeTransform(_, _ string, gvk *schema.GroupVersionKind) bool {
	return isAggregatedDiscovery(gvk)
}

// AllowsServerVersion allows no sv parameter.
func (aggregatedRestrictions) AllowsServerVersion(string) bool { return false }

// AllowsStreamSchema allows stream=watch.
func (aggregatedRestrictions) AllowsStreamSchema(s string) bool { return s == "watch" }

func isAggregatedDiscovery(gvk *schema.GroupVersionKind) bool {
	return gvk != nil && gvk.GroupVersion() == apidiscoveryv2.SchemeGroupVersion && gvk.Kind == string(TransformAPIGroupDiscoveryList)
}

// mediaTypes is a negotiated serializer of a set of serializers, for
// negotiation and the decoders it picks.
type mediaTypes []runtime.SerializerInfo

// SupportedMediaTypes returns the serializers.
func (m mediaTypes) SupportedMediaTypes() []runtime.SerializerInfo { return m }

// EncoderForVersion returns the encoder as it is (negotiation only).
func (m mediaTypes) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

// DecoderToVersion returns the decoder as it is (negotiation only).
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
	case TargetBuiltinDiscovery, TargetDiscovery, TargetRootDiscovery:
		return builtinCodecs, negotiation.DefaultEndpointRestrictions
	default:
		return builtinCodecs, restrictions{table: true}
	}
}

// restfulProduces returns the media types a go-restful route of the target
// produces (nil for a target upstream serves without go-restful).
func restfulProduces(t Target) []string {
	ns, _ := targetSerializers(t)
	media, stream := negotiation.MediaTypesForSerializer(ns)
	switch t {
	case TargetCRD, TargetNamespace, TargetRBAC, TargetBuiltinDiscovery:
		return media
	case TargetCRDCollection, TargetNamespaceCollection, TargetRBACCollection:
		return append(media, stream...)
	}
	return nil
}

// restfulAccepts is go-restful's Accept check of a route, which runs before
// the handler: some comma-separated clause, its parameters dropped and
// spaces trimmed, is */* or one of the media types the route produces
// (exactly: application/* is not). No Accept passes.
func restfulAccepts(accept string, produces []string) bool {
	if accept == "" {
		return true
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(clause, ";")
		mt = strings.TrimSpace(mt)
		if mt == "*/*" || slices.Contains(produces, mt) {
			return true
		}
	}
	return false
}

// restfulNotAcceptable is go-restful's 406 as kube-apiserver renders a
// route's service error (a generic server response).
func restfulNotAcceptable(produces []string) error {
	return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", "406: Not Acceptable\n\nAvailable representations: "+strings.Join(produces, ", "), 0, false)
}

// Negotiate picks the response encoding of a GET, LIST, create, update,
// patch or delete as upstream does for the endpoint kind: the first Accept
// clause (by q-value, then order) that a serializer of the endpoint
// offers and whose transformation the endpoint allows. No Accept is JSON.
// Nothing acceptable is upstream's 406 NotAcceptable Status error.
func Negotiate(r Request, t Target) (Output, error) {
	if produces := restfulProduces(t); produces != nil && !restfulAccepts(r.Accept, produces) {
		return Output{}, restfulNotAcceptable(produces)
	}
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

// ErrorOutput is the encoding of an error Status as upstream writes it
// (responsewriters.ErrorNegotiated): negotiated from Accept without
// transformations among the endpoint's serializers (so a protobuf client
// of a custom resource gets its 406 in protobuf), else indented JSON
// (Raw).
func ErrorOutput(r Request, t Target) Output {
	ns, _ := targetSerializers(t)
	mt, info, err := negotiation.NegotiateOutputMediaType(r.httpRequest(), ns, negotiation.DefaultEndpointRestrictions)
	if err != nil {
		return Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}
	}
	return Output{MediaType: info.MediaType, Pretty: info.Serializer != mt.Accepted.Serializer}
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
