package gateway

import (
	"encoding/json"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/fuzzalloc"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// FuzzRequestBody: a create or update body, JSON or YAML, goes through the
// gateway's decoding (httpx.DecodeBody, then listing.DecodeObject): it decodes or
// fails with a Status error, never panics, a YAML body converts to valid
// JSON, and the memory taken stays proportional to the body (YAML aliases
// are bounded by the YAML library).
func FuzzRequestBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, yaml bool, body []byte) {
		ct := httpx.ContentTypeJSON
		if yaml {
			ct = httpx.ContentTypeYAML
		}
		fuzzalloc.Check(t, len(body), 1000, func() {
			b, err := httpx.DecodeBody(ct, body)
			if err == nil {
				err = b.YAMLError()
			}
			data := b.JSON
			if err != nil {
				if _, ok := err.(apierrors.APIStatus); !ok {
					t.Fatalf("%T is not a Status: %v", err, err)
				}
				return
			}
			if yaml && !json.Valid(data) {
				t.Fatalf("YAML converted to invalid JSON: %q", data)
			}
			obj, err := listing.DecodeObject(data)
			if err == nil && obj == nil {
				t.Fatal("no object and no error")
			}
			if err == nil {
				if _, err := listing.EncodeObject(obj); err != nil {
					t.Fatalf("a decoded object does not encode: %v", err)
				}
			}
		})
	})
}

// FuzzListOptions: the query parameters of a list or watch (label and field
// selectors, continue token, resourceVersion, limit) parse as
// kube-apiserver parses them or fail with a Status error (400 or 422),
// never a panic; a field selector that parses is checked against the
// fields a resource may select by.
func FuzzListOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, labelSelector, fieldSelector, continueToken, resourceVersion string, limit int64, watch bool) {
		in := len(labelSelector) + len(fieldSelector) + len(continueToken) + len(resourceVersion)
		fuzzalloc.Check(t, in, 1000, func() {
			opts, err := listing.ParseOptions(listing.Params{
				LabelSelector: labelSelector, FieldSelector: fieldSelector, ContinueToken: continueToken,
				ResourceVersion: resourceVersion, Limit: limit, Watch: watch,
			})
			if err != nil {
				if _, ok := err.(apierrors.APIStatus); !ok {
					t.Fatalf("%T is not a Status: %v", err, err)
				}
				return
			}
			if opts.LabelSelector != nil {
				_ = opts.LabelSelector.String()
			}
			if opts.FieldSelector != nil {
				err := listing.CheckFieldSelector(opts.FieldSelector, func(f string) bool { return f == "metadata.name" || f == "spec.color" })
				if _, ok := err.(apierrors.APIStatus); err != nil && !ok {
					t.Fatalf("%T is not a Status: %v", err, err)
				}
				_ = opts.FieldSelector.String()
			}
		})
	})
}

// FuzzProtobufBody: a protobuf create or update body (of a CRD, a custom
// resource or a Scale) and a protobuf DELETE body go through the
// gateway's decoding (httpx.DecodeRequestBody and DecodeDeleteBody, over
// kubewire.DecodeBody and DecodeDeleteOptions): each decodes into valid
// JSON or fails with a Status error (4xx, or the 500 upstream answers a
// DeleteOptions that does not decode), never panics, and the memory taken
// stays proportional to the body. The seed corpus is well-formed bodies
// and their truncated, re-prefixed and extended forms.
func FuzzProtobufBody(f *testing.F) {
	crd := pbEncode(f, pbCRD("seeds.fuzz.example.com"))
	del := pbEncode(f, &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}, PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)})
	status := pbEncode(f, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Message: "x"})
	for _, seed := range [][]byte{
		crd, crd[:len(crd)/2], append([]byte("k8s\x01"), crd[4:]...), append(append([]byte{}, crd...), 0xfa, 0x01, 0x00),
		crd[4:], del, del[:len(del)-3], status, []byte("k8s\x00"), []byte("k8s\x00\n\x02\n\x00"), []byte("k8s\x00\n\xff"), {},
	} {
		for target := range uint8(4) {
			f.Add(target, seed)
		}
	}
	targets := []httpx.Target{httpx.TargetCRD, httpx.TargetCustomResource, httpx.TargetScale}
	isStatus := func(t *testing.T, err error) {
		if _, ok := err.(apierrors.APIStatus); !ok {
			t.Fatalf("%T is not a Status: %v", err, err)
		}
	}
	f.Fuzz(func(t *testing.T, target uint8, body []byte) {
		rm := httpx.RequestMeta{ContentType: pbType}
		fuzzalloc.Check(t, len(body), 1000, func() {
			if int(target) >= len(targets) {
				data, err := httpx.DecodeDeleteBody(rm, body)
				if err != nil {
					isStatus(t, err)
					return
				}
				if len(body) > 0 && !json.Valid(data) {
					t.Fatalf("DeleteOptions decoded to invalid JSON: %q", data)
				}
				return
			}
			b, err := httpx.DecodeRequestBody(rm, body, httpx.BodyFor{
				Target: targets[target], Group: "fuzz.example.com", Version: "v1",
				Kind: func() (string, error) { return "Fuzz", nil },
			})
			if err != nil {
				isStatus(t, err)
				if code := err.(apierrors.APIStatus).Status().Code; code < 400 || code >= 500 {
					t.Fatalf("a bad body answered %d: %v", code, err)
				}
				return
			}
			if !json.Valid(b.JSON) {
				t.Fatalf("decoded to invalid JSON: %q", b.JSON)
			}
		})
	})
}
