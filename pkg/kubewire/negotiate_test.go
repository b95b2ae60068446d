package kubewire

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Messages upstream (apiextensions-apiserver v0.33.13) answered with
// (observed with TestProbeUpstream against bin/apiextensions-upstream).
const (
	msgNotAcceptable       = "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	msgNotAcceptableStream = "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
	msgRestful406          = "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf"
	msgRestful406List      = msgRestful406 + ", application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
	msgUnsupported         = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
)

var (
	metaV1      = metav1.SchemeGroupVersion
	metaV1beta1 = schema.GroupVersion{Group: "meta.k8s.io", Version: "v1beta1"}
	discoveryV2 = schema.GroupVersion{Group: "apidiscovery.k8s.io", Version: "v2"}
)

// negotiateCase is a request's negotiation and upstream's observed answer.
type negotiateCase struct {
	name      string
	target    Target
	accept    string
	watch     bool
	mediaType string
	transform Transform
	gv        schema.GroupVersion
	pretty    bool
	// the 406: message and whether it has details {} (go-restful's)
	message  string
	restful  bool
	errorOut Output
}

func negotiateCases() []negotiateCase {
	pb := ContentTypeProtobuf
	return []negotiateCase{
		// CustomResourceDefinitions (observed 200s and 406s)
		{name: "crd get protobuf", target: TargetCRD, accept: pb, mediaType: pb},
		{name: "crd get pb,json", target: TargetCRD, accept: pb + ", application/json", mediaType: pb},
		{name: "crd get q json<pb", target: TargetCRD, accept: "application/json;q=0.5, " + pb + ";q=0.9", mediaType: pb},
		{name: "crd get q pb<yaml", target: TargetCRD, accept: pb + ";q=0.1, application/yaml", mediaType: ContentTypeYAML},
		{name: "crd get no accept", target: TargetCRD, mediaType: ContentTypeJSON},
		{name: "crd get json q=0", target: TargetCRD, accept: "application/json;q=0", mediaType: ContentTypeJSON},
		{name: "crd get */*", target: TargetCRD, accept: "*/*", mediaType: ContentTypeJSON},
		{name: "crd get pb stream", target: TargetCRD, accept: pb + ";stream=watch", mediaType: pb},
		{name: "crd get json,text/html", target: TargetCRD, accept: "application/json, text/html", mediaType: ContentTypeJSON},
		{name: "crd get text/html,*/*", target: TargetCRD, accept: "text/html, */*;q=0.1", mediaType: ContentTypeJSON},
		{name: "crd get pretty=1", target: TargetCRD, accept: "application/json;pretty=1", mediaType: ContentTypeJSON, pretty: true},
		{name: "crd get pb table", target: TargetCRD, accept: protoTable, message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd get pb table,json", target: TargetCRD, accept: protoTable + ", application/json", mediaType: ContentTypeJSON},
		{name: "crd get pb pom", target: TargetCRD, accept: protoPOM, mediaType: pb, transform: TransformPartialObjectMetadata, gv: metaV1},
		{name: "crd get pb pom v1beta1", target: TargetCRD, accept: strings.Replace(protoPOM, "v=v1", "v=v1beta1", 1), mediaType: pb, transform: TransformPartialObjectMetadata, gv: metaV1beta1},
		{name: "crd get cbor", target: TargetCRD, accept: "application/cbor", message: msgRestful406, restful: true, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd get text/html", target: TargetCRD, accept: "text/html", message: msgRestful406, restful: true, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd get application/*", target: TargetCRD, accept: "application/*", message: msgRestful406, restful: true, errorOut: Output{MediaType: ContentTypeJSON}},
		{name: "crd get as=Foo", target: TargetCRD, accept: "application/json;as=Foo;g=meta.k8s.io;v=v1", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd get sv=v2", target: TargetCRD, accept: "application/json;sv=v2", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd get yaml stream", target: TargetCRD, accept: "application/yaml;stream=watch", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd list protobuf", target: TargetCRDCollection, accept: pb, mediaType: pb},
		{name: "crd list pb poml", target: TargetCRDCollection, accept: protoPOML, mediaType: pb, transform: TransformPartialObjectMetadataList, gv: metaV1},
		{name: "crd list text/html", target: TargetCRDCollection, accept: "text/html", message: msgRestful406List, restful: true, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		// watches (Content-Type of the stream: see TestWatchContentType)
		{name: "crd watch protobuf", target: TargetCRDCollection, watch: true, accept: pb, mediaType: pb},
		{name: "crd watch json stream", target: TargetCRDCollection, watch: true, accept: "application/json;stream=watch", mediaType: ContentTypeJSON},
		{name: "crd watch yaml", target: TargetCRDCollection, watch: true, accept: "application/yaml", message: msgNotAcceptableStream, errorOut: Output{MediaType: ContentTypeYAML}},
		{name: "crd watch text/html", target: TargetCRDCollection, watch: true, accept: "text/html", message: msgRestful406List, restful: true, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd watch pb table", target: TargetCRDCollection, watch: true, accept: protoTable, message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "crd watch json table", target: TargetCRDCollection, watch: true, accept: "application/json;as=Table;g=meta.k8s.io;v=v1", mediaType: ContentTypeJSON, transform: TransformTable, gv: metaV1},
		// custom resources
		{name: "cr get protobuf", target: TargetCustomResource, accept: pb, message: msgNotAcceptable, errorOut: Output{MediaType: pb}},
		{name: "cr get pb,json", target: TargetCustomResource, accept: pb + ", application/json", mediaType: ContentTypeJSON},
		{name: "cr get pb pom", target: TargetCustomResource, accept: protoPOM, mediaType: pb, transform: TransformPartialObjectMetadata, gv: metaV1},
		{name: "cr get pb table", target: TargetCustomResource, accept: protoTable, message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "cr get cbor", target: TargetCustomResource, accept: "application/cbor", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "cr get application/*", target: TargetCustomResource, accept: "application/*", mediaType: ContentTypeJSON},
		{name: "cr get text/html,*/*", target: TargetCustomResource, accept: "text/html, */*;q=0.1", mediaType: ContentTypeJSON},
		{name: "cr get text/html", target: TargetCustomResource, accept: "text/html", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "cr get yaml table", target: TargetCustomResource, accept: "application/yaml;as=Table;g=meta.k8s.io;v=v1", mediaType: ContentTypeYAML, transform: TransformTable, gv: metaV1},
		{name: "cr list protobuf", target: TargetCustomResource, accept: pb, message: msgNotAcceptable, errorOut: Output{MediaType: pb}},
		{name: "cr list pb poml", target: TargetCustomResource, accept: protoPOML, mediaType: pb, transform: TransformPartialObjectMetadataList, gv: metaV1},
		{name: "cr list json table", target: TargetCustomResource, accept: "application/json;as=Table;g=meta.k8s.io;v=v1", mediaType: ContentTypeJSON, transform: TransformTable, gv: metaV1},
		{name: "cr watch protobuf", target: TargetCustomResource, watch: true, accept: pb, message: msgNotAcceptable, errorOut: Output{MediaType: pb}},
		{name: "cr watch pb pom", target: TargetCustomResource, watch: true, accept: protoPOM, mediaType: pb, transform: TransformPartialObjectMetadata, gv: metaV1},
		{name: "cr watch text/html", target: TargetCustomResource, watch: true, accept: "text/html", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		// scale
		{name: "scale get protobuf", target: TargetScale, accept: pb, message: msgNotAcceptable, errorOut: Output{MediaType: pb}},
		{name: "scale get pb pom", target: TargetScale, accept: protoPOM, mediaType: pb, transform: TransformPartialObjectMetadata, gv: metaV1},
		{name: "scale get text/html", target: TargetScale, accept: "text/html", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		// discovery
		{name: "apis group protobuf", target: TargetBuiltinDiscovery, accept: pb, mediaType: pb},
		{name: "apis group aggregated", target: TargetBuiltinDiscovery, accept: aggregated, message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "apis group text/html", target: TargetBuiltinDiscovery, accept: "text/html", message: msgRestful406, restful: true, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "apis version protobuf", target: TargetBuiltinDiscovery, accept: pb, mediaType: pb},
		{name: "cr group text/html", target: TargetDiscovery, accept: "text/html", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "cr group aggregated json", target: TargetDiscovery, accept: "application/json;as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2", message: msgNotAcceptable, errorOut: Output{MediaType: ContentTypeJSON, Pretty: true, Raw: true}},
		{name: "cr version protobuf", target: TargetDiscovery, accept: pb, mediaType: pb},
		// /apis: kube-apiserver's aggregated discovery wrapper (the
		// standalone apiextensions-apiserver serves no /apis: 404)
		{name: "apis aggregated pb", target: TargetRootDiscovery, accept: aggregated, mediaType: pb, transform: TransformAPIGroupDiscoveryList, gv: discoveryV2},
		{name: "apis aggregated v2beta1,json", target: TargetRootDiscovery, accept: strings.Replace(aggregated, "v=v2", "v=v2beta1", 1) + ", application/json", mediaType: ContentTypeJSON},
		{name: "apis protobuf", target: TargetRootDiscovery, accept: pb, mediaType: pb},
	}
}

func TestNegotiate(t *testing.T) {
	for _, tc := range negotiateCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := Request{Accept: tc.accept}
			negotiate := Negotiate
			if tc.watch {
				negotiate = NegotiateWatch
			}
			out, err := negotiate(r, tc.target)
			if tc.message != "" {
				var se *apierrors.StatusError
				if !errors.As(err, &se) {
					t.Fatalf("got %+v, %v; want a 406", out, err)
				}
				st := se.ErrStatus
				if st.Code != 406 || st.Reason != metav1.StatusReasonNotAcceptable || st.Message != tc.message || (st.Details != nil) != tc.restful {
					t.Fatalf("got %+v\nwant 406 NotAcceptable %q (details {}: %v)", st, tc.message, tc.restful)
				}
				if eo := ErrorOutput(r, tc.target); eo != tc.errorOut {
					t.Fatalf("error rendered as %+v, want %+v", eo, tc.errorOut)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Output{MediaType: tc.mediaType, Transform: tc.transform, TransformGV: tc.gv, Pretty: tc.pretty}
			out.Stream = ""
			if out != want {
				t.Fatalf("got %+v, want %+v", out, want)
			}
		})
	}
}

func TestNegotiatePretty(t *testing.T) {
	for _, tc := range []struct {
		r      Request
		pretty bool
	}{
		{Request{UserAgent: "curl/8.5.0"}, true},
		{Request{UserAgent: "Wget/1.21"}, true},
		{Request{UserAgent: "Mozilla/5.0 (X11)"}, true},
		{Request{UserAgent: "kubectl/v1.33.0"}, false},
		{Request{UserAgent: "curl/8.5.0", RawQuery: "pretty=false"}, false},
		{Request{RawQuery: "pretty=true"}, true},
		{Request{RawQuery: "pretty=1&limit=2"}, true},
		{Request{UserAgent: "curl/8.5.0", Accept: ContentTypeProtobuf}, false},
		{Request{UserAgent: "curl/8.5.0", Accept: ContentTypeYAML}, false},
	} {
		out, err := Negotiate(tc.r, TargetCRD)
		if err != nil {
			t.Fatal(err)
		}
		if out.Pretty != tc.pretty {
			t.Errorf("%+v: pretty %v, want %v", tc.r, out.Pretty, tc.pretty)
		}
	}
}

func TestWatchContentType(t *testing.T) {
	// observed: application/json as is; protobuf with ;stream=watch
	for accept, want := range map[string]string{
		ContentTypeProtobuf:             "application/vnd.kubernetes.protobuf;stream=watch",
		"application/json;stream=watch": "application/json",
		"":                              "application/json",
	} {
		out, err := NegotiateWatch(Request{Accept: accept}, TargetCRDCollection)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.WatchContentType(); got != want {
			t.Errorf("Accept %q: Content-Type %q, want %q", accept, got, want)
		}
	}
}
