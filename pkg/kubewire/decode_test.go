package kubewire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodeCase is a request body and upstream's observed answer to it.
type decodeCase struct {
	name        string
	target      Target
	contentType string
	body        []byte
	validation  string
	version     string // of the custom resource request
	// a decoded CRD's name, or the error upstream answered
	crdName string
	code    int32
	message string
	abort   bool
}

func decodeCases(t testing.TB) []decodeCase {
	pb := ContentTypeProtobuf
	crdJSON := readJSON(t, "crontab-crd.yaml")
	return []decodeCase{
		{name: "crd create protobuf", target: TargetCRD, contentType: pb, body: crdProto(t, "pbcreates"), crdName: "pbcreates.stable.example.com"},
		{name: "crd create no kind", target: TargetCRD, contentType: pb, body: noKindProto(t, "nokinds"), crdName: "nokinds.stable.example.com"},
		{name: "crd create unknown fields", target: TargetCRD, contentType: pb, body: crdProtoUnknownField(t, "unknowns"), crdName: "unknowns.stable.example.com"},
		{name: "crd create strict protobuf", target: TargetCRD, contentType: pb, body: crdProto(t, "stricts"), validation: "Strict", crdName: "stricts.stable.example.com"},
		{name: "crd create truncated", target: TargetCRD, contentType: pb, body: func() []byte { b := crdProto(t, "truncs"); return b[:len(b)/2] }(), code: 400,
			message: "the object provided is unrecognized (must be of type CustomResourceDefinition): unexpected EOF (6b3873000a330a17617069657874656e73696f6e732e6b38732e696f2f76 ...)"},
		{name: "crd create wrong magic", target: TargetCRD, contentType: pb, body: func() []byte { b := crdProto(t, "magics"); b[3] = 1; return b }(), code: 400,
			message: "the object provided is unrecognized (must be of type CustomResourceDefinition): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] (6b3873010a330a17617069657874656e73696f6e732e6b38732e696f2f76 ...)"},
		{name: "crd create only magic", target: TargetCRD, contentType: pb, body: []byte("k8s\x00"), code: 400,
			message: "the object provided is unrecognized (must be of type CustomResourceDefinition): empty body (6b387300)"},
		{name: "crd create Status kind", target: TargetCRD, contentType: pb, body: statusProto(t), code: 400,
			message: `Status in version "v1" cannot be handled as a CustomResourceDefinition: converting (v1.Status) to (apiextensions.CustomResourceDefinition): unknown conversion`},
		{name: "crd create Pod kind", target: TargetCRD, contentType: pb, body: podKindProto(t, "pods"), code: 400,
			message: `Pod in version "v1" cannot be handled as a CustomResourceDefinition: no kind "Pod" is registered for version "v1" in scheme "pkg/runtime/scheme.go:110"`},
		{name: "crd create v1beta1", target: TargetCRD, contentType: pb, body: crdProtoV1beta1(t, "betas"), code: 400,
			message: "the API version in the data (apiextensions.k8s.io/v1beta1) does not match the expected API version (apiextensions.k8s.io/v1)"},
		{name: "crd create ct pb body json", target: TargetCRD, contentType: pb, body: crdJSON, code: 400,
			message: `the object provided is unrecognized (must be of type CustomResourceDefinition): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ({"apiVersion":"apiextensions.k ...)`},
		{name: "crd status put garbage", target: TargetCRD, contentType: pb, body: []byte("k8s\x00\x0a\xff"), code: 400,
			message: "the object provided is unrecognized (must be of type CustomResourceDefinition): unexpected EOF (6b3873000aff)"},
		{name: "crd create text/plain", target: TargetCRD, contentType: "text/plain", body: crdJSON, code: 415, message: msgUnsupported},
		{name: "crd create cbor", target: TargetCRD, contentType: "application/cbor", body: crdJSON, code: 415, message: msgUnsupported},
		{name: "crd create bad ct", target: TargetCRD, contentType: "application/json;;", body: crdJSON, code: 415, message: msgUnsupported},
		{name: "cr create text/plain", target: TargetCustomResource, contentType: "text/plain", body: readJSON(t, "crontab-valid.yaml"), code: 415, message: msgUnsupported},
		{name: "cr create protobuf ignore", target: TargetCustomResource, contentType: pb, body: crdProto(t, "crs"), validation: "Ignore", code: 400,
			message: `CustomResourceDefinition in version "v1" cannot be handled as a CronTab: Object 'Kind' is missing in 'object has no kind field '`},
		{name: "cr create protobuf garbage ignore", target: TargetCustomResource, contentType: pb, body: []byte("k8s\x00\x0a\xff"), validation: "Ignore", code: 400,
			message: "the object provided is unrecognized (must be of type CronTab): unexpected EOF (6b3873000aff)"},
		{name: "cr create protobuf", target: TargetCustomResource, contentType: pb, body: crdProto(t, "crs"), abort: true},
		{name: "cr create protobuf empty typemeta ignore", target: TargetCustomResource, contentType: pb, body: []byte("k8s\x00\n\x02\n\x00"), validation: "Ignore", version: "v1", code: 400,
			message: `CronTab in version "v1" cannot be handled as a CronTab: Object 'Kind' is missing in 'object has no kind field '`},
		{name: "cr create protobuf strict", target: TargetCustomResource, contentType: pb, body: crdProto(t, "crs"), validation: "Strict", abort: true},
	}
}

// TestDecodeBody checks request bodies against upstream's answers to the
// same requests (observed with TestProbeUpstream; TestDecodeBodyUpstream
// replays them): status, reason and message of a create of
// customresourcedefinitions or crontabs.
func TestDecodeBody(t *testing.T) {
	crdJSON := readJSON(t, "crontab-crd.yaml")
	for _, tc := range decodeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBody(BodyRequest{ContentType: tc.contentType, Body: tc.body, Target: tc.target, Kind: "CronTab", Version: tc.version, FieldValidation: tc.validation})
			switch {
			case tc.abort:
				if !errors.Is(err, ErrAbortConnection) {
					t.Fatalf("got %v, want ErrAbortConnection", err)
				}
			case tc.code != 0:
				var se *apierrors.StatusError
				if !errors.As(err, &se) {
					t.Fatalf("got %v, want a Status error", err)
				}
				reason := metav1.StatusReasonBadRequest
				if tc.code == 415 {
					reason = metav1.StatusReasonUnsupportedMediaType
				}
				if st := se.ErrStatus; st.Code != tc.code || st.Reason != reason || st.Message != tc.message {
					t.Fatalf("got %d %s %q\nwant %d %s %q", st.Code, st.Reason, st.Message, tc.code, reason, tc.message)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				var crd apiextensionsv1.CustomResourceDefinition
				if err := json.Unmarshal(b.JSON, &crd); err != nil {
					t.Fatal(err)
				}
				want := testCRD(t, tc.crdName[:len(tc.crdName)-len(".stable.example.com")])
				if crd.Name != tc.crdName || crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" ||
					crd.Spec.Names.Kind != want.Spec.Names.Kind || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
					t.Fatalf("decoded %s", b.JSON)
				}
				// defaulted as upstream's decoder defaults (conversion None, listKind)
				if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter || crd.Spec.Names.ListKind != want.Spec.Names.Kind+"List" {
					t.Fatalf("not defaulted: %s", b.JSON)
				}
			}
		})
	}
	// JSON and YAML pass through for the caller's paths
	for _, ct := range []string{"", "application/json", "application/yaml", "application/json; charset=utf-8"} {
		b, err := DecodeBody(BodyRequest{ContentType: ct, Body: crdJSON, Target: TargetCRD})
		if err != nil || !bytes.Equal(b.JSON, crdJSON) {
			t.Fatalf("%q: %v", ct, err)
		}
	}
}

func TestDecodeScale(t *testing.T) {
	s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "my-new-cron-object", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	s.SetGroupVersionKind(autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	b, err := DecodeBody(BodyRequest{ContentType: ContentTypeProtobuf, Body: protoBody(t, s), Target: TargetScale})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"my-new-cron-object","namespace":"default"},"spec":{"replicas":3},"status":{"replicas":0}}`; string(b.JSON) != want {
		t.Fatalf("got %s\nwant %s", b.JSON, want)
	}
	// observed: upstream's scale handler words every protobuf decode
	// failure with its typer's error
	for name, body := range map[string][]byte{"garbage": []byte("k8s\x00\x0a\xff"), "Status": statusProto(t)} {
		_, err := DecodeBody(BodyRequest{ContentType: ContentTypeProtobuf, Body: body, Target: TargetScale})
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.ErrStatus.Code != 400 || se.ErrStatus.Reason != metav1.StatusReasonBadRequest ||
			se.ErrStatus.Message != `no kind is registered for the type v1.Scale in scheme "pkg/runtime/scheme.go:110"` {
			t.Fatalf("%s: got %v", name, err)
		}
	}
}

func TestDecodeDeleteOptions(t *testing.T) {
	b, err := DecodeDeleteOptions(ContentTypeProtobuf, deleteOptionsProto(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(b.JSON) != `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","gracePeriodSeconds":0}` {
		t.Fatalf("got %s", b.JSON)
	}
	// observed: a garbage protobuf body is a plain 500 "unexpected EOF"
	if _, err := DecodeDeleteOptions(ContentTypeProtobuf, []byte("k8s\x00\x0a\xff")); err == nil || err.Error() != "unexpected EOF" {
		t.Fatalf("got %v", err)
	}
	var se *apierrors.StatusError
	if _, err := DecodeDeleteOptions("text/plain", []byte("{}")); !errors.As(err, &se) || se.ErrStatus.Code != 415 || se.ErrStatus.Message != msgUnsupported {
		t.Fatalf("got %v", err)
	}
}
