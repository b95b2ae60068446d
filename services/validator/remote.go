package validator

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdplane/crdplane/pkg/celconv"
	"github.com/crdplane/crdplane/pkg/enduser"
	"github.com/crdplane/crdplane/pkg/jsondec"
	"github.com/crdplane/crdplane/pkg/jsonenc"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/metrics"
	"github.com/crdplane/crdplane/pkg/structural"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
)

// managedConversions counts the conversions the field managers asked of
// the converter service, by result: "converted" (a call), "reused" (the
// same object to the same version again in one request: no call),
// "failed" (the webhook or the rules refused: the field manager handles it
// as upstream's does) and "unavailable" (the converter could not answer:
// the write fails).
var managedConversions = metrics.NewCounterVec("validator", "managed_fields_conversions_total",
	"Conversions of custom resources for managedFields entries recorded at another version, through the converter service, by result.", "result")

// remoteConverter converts objects for the field managers of one request
// through the converter service (webhook conversion, conversion rules),
// with the request's context. The field manager converts the same object
// to the same version several times in one write (once per manager entry
// while reconciling entries with the schema, then per version while
// comparing, again while pruning an apply): each distinct object and
// version is converted once per request, the result reused. Upstream calls
// its webhook every time; the answers are the same for a webhook that
// converts an object the same way twice, which conversion requires.
//
// Not safe for concurrent use: one request's field manager calls it
// sequentially.
type remoteConverter struct {
	ctx    context.Context
	client converterv1.ConverterServiceClient // nil: no converter configured
	crd    *commonv1.CRDRef
	done   map[string][]byte // desired apiVersion + "\x00" + object JSON -> converted JSON
	// failed is the first error that is the converter's and not the
	// conversion's (unreachable, overloaded, the CRD generation not yet
	// there): the write fails with it instead of going on without the
	// entries it could not convert.
	failed error
	// coerce, when set, coerces a converted object to the schema of its
	// version (conversion rules; see newRemoteConverter).
	coerce func(obj map[string]any, apiVersion string) error
	// forwarded: ctx carries the request's user to the converter.
	forwarded bool
}

// newRemoteConverter returns the converter of one request for crd's
// objects. A webhook's answers are used as they come, as upstream's field
// manager uses them (its converter is the CRD's converter without the
// schema coercion that reads and writes add). Conversion rules carry the
// fields they do not map over and rely on that coercion (the gateway's,
// after every conversion) to drop what the target version does not
// specify: their results are coerced with compiled (the target version's
// compiled schema) before the field manager types them.
func newRemoteConverter(ctx context.Context, client converterv1.ConverterServiceClient, crd *CRD, compiled func(version string) (*compiledVersion, error)) *remoteConverter {
	r := &remoteConverter{
		ctx:    ctx,
		client: client,
		crd:    &commonv1.CRDRef{Name: crd.Name, Uid: string(crd.UID), Generation: crd.Generation},
	}
	if celconv.HasRules(crd) && compiled != nil {
		r.coerce = func(obj map[string]any, apiVersion string) error {
			cv, err := compiled(versionOf(apiVersion))
			if err != nil {
				return err
			}
			_, err = structural.Normalize(obj, cv.schema, false)
			return err
		}
	}
	return r
}

// versionOf is the version of an apiVersion ("example.com/v1" -> "v1").
func versionOf(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[i+1:]
	}
	return apiVersion
}

// convert converts u to apiVersion. A conversion the webhook or the rules
// refuse is an error whose text is the converter's message (upstream's
// "conversion webhook for <gvk> failed: ..."), which the field manager
// wraps as upstream's does; any other failure is also recorded in failed.
func (r *remoteConverter) convert(u *unstructured.Unstructured, apiVersion string) (*unstructured.Unstructured, error) {
	raw, err := jsonenc.Append(make([]byte, 0, 512), u.Object)
	if err != nil {
		return nil, fmt.Errorf("encode object to convert: %w", err)
	}
	key := apiVersion + "\x00" + string(raw)
	out, ok := r.done[key]
	if ok {
		managedConversions.WithLabelValues("reused").Inc()
	} else {
		if out, err = r.call(raw, apiVersion); err != nil {
			return nil, err
		}
		if r.done == nil {
			r.done = map[string][]byte{}
		}
		r.done[key] = out
	}
	v, err := jsondec.Unmarshal(out)
	if err != nil {
		return nil, r.fail(apierrors.NewInternalError(fmt.Errorf("converter returned an object that does not decode: %w", err)))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, r.fail(apierrors.NewInternalError(fmt.Errorf("converter returned a JSON %T, not an object", v)))
	}
	if r.coerce != nil {
		if err := r.coerce(obj, apiVersion); err != nil {
			return nil, r.fail(apierrors.NewInternalError(fmt.Errorf("converted object: %w", err)))
		}
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func (r *remoteConverter) call(raw []byte, apiVersion string) ([]byte, error) {
	if r.client == nil {
		return nil, r.fail(apierrors.NewServiceUnavailable("webhook conversion is not available: no converter service configured"))
	}
	if !r.forwarded {
		// The call is made for the request's user, as the gateway's are.
		if u := enduser.FromIncomingContext(r.ctx); !u.Empty() {
			r.ctx = enduser.NewOutgoingContext(r.ctx, u)
		}
		r.forwarded = true
	}
	resp, err := r.client.Convert(r.ctx, &converterv1.ConvertRequest{Crd: r.crd, DesiredApiVersion: apiVersion, Objects: [][]byte{raw}})
	if err != nil {
		st := kstatus.FromError(err)
		se := &apierrors.StatusError{ErrStatus: *st}
		if st.Code == http.StatusInternalServerError && st.Reason == metav1.StatusReasonUnknown {
			// The converter's form of a failed conversion (the webhook's
			// or the rules' refusal, a webhook down or answering
			// nonsense): what upstream's converter returns to its field
			// manager.
			managedConversions.WithLabelValues("failed").Inc()
			return nil, se
		}
		return nil, r.fail(se)
	}
	if n := len(resp.GetObjects()); n != 1 {
		return nil, r.fail(apierrors.NewInternalError(fmt.Errorf("converter returned %d objects for 1", n)))
	}
	managedConversions.WithLabelValues("converted").Inc()
	return resp.GetObjects()[0], nil
}

// fail records err as the request's failure and returns it.
func (r *remoteConverter) fail(err error) error {
	managedConversions.WithLabelValues("unavailable").Inc()
	if r.failed == nil {
		r.failed = err
	}
	return err
}
