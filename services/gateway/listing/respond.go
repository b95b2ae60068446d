package listing

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// crdAPIVersion is the CRDs' apiVersion, whose lists are typed lists.
const crdAPIVersion = "apiextensions.k8s.io/v1"

// RespondObject renders one object (JSON at the request version) in the
// negotiated format; printer gives its table columns.
func RespondObject(out httpx.OutputFormat, rm httpx.RequestMeta, obj []byte, printer func() *TablePrinter) (*httpbody.HttpBody, error) {
	switch out.As {
	case httpx.AsTable:
		opts, err := tableOptions(rm.Query())
		if err != nil {
			return nil, err
		}
		tw := &tableWriter{printer: printer(), opts: opts, gv: out.AsGV}
		doc, err := tw.table([][]byte{obj}, metav1.ListMeta{ResourceVersion: objectResourceVersion(obj)})
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadata:
		o, err := DecodeObject(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		doc, err := partialObjectMetadata(o, out.AsGV)
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadataList:
		return nil, ErrNotAcceptableConversion("you requested PartialObjectMetadataList, but the requested object is not a list (*unstructured.Unstructured)")
	}
	return out.Render(obj)
}

// RespondList renders a list page (items JSON at the request version).
func RespondList(out httpx.OutputFormat, rm httpx.RequestMeta, apiVersion, listKind string, page httpx.ListPage, printer func() *TablePrinter) (*httpbody.HttpBody, error) {
	switch out.As {
	case httpx.AsTable:
		opts, err := tableOptions(rm.Query())
		if err != nil {
			return nil, err
		}
		tw := &tableWriter{printer: printer(), opts: opts, gv: out.AsGV}
		doc, err := tw.table(page.Items, page.ListMeta())
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadataList:
		doc, err := partialObjectMetadataList(page, out.AsGV)
		if err != nil {
			return nil, err
		}
		return out.Render(doc)
	case httpx.AsPartialObjectMetadata:
		goType := "*unstructured.UnstructuredList"
		if apiVersion == crdAPIVersion {
			goType = "*apiextensions.CustomResourceDefinitionList"
		}
		return nil, ErrNotAcceptableConversion("you requested PartialObjectMetadata, but the requested object is a list (" + goType + ")")
	}
	return out.Render(httpx.RenderList(apiVersion, listKind, page))
}

// ErrNotAcceptableConversion is upstream's 406 for a transformation the
// response cannot take.
func ErrNotAcceptableConversion(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable, Message: msg,
	}}
}

// objectResourceVersion reads metadata.resourceVersion without decoding the rest.
func objectResourceVersion(obj []byte) string {
	var m struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &m)
	return m.Metadata.ResourceVersion
}

// InconsistentContinue is upstream's message for a continue token whose
// revision etcd has compacted.
const InconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
	"show up in the list."

// ContinueExpired answers a list error: a continue token whose revision
// is compacted away is upstream's 410 carrying, in metadata.continue, a
// token that continues at the same key from the latest revision (rv -1);
// anything else is returned as is.
func ContinueExpired(ctx context.Context, err error, token string, out httpx.OutputFormat) (*httpbody.HttpBody, error) {
	s := kstatus.FromError(err)
	if token == "" || s.Reason != metav1.StatusReasonExpired {
		return nil, err
	}
	latest, ok := continueAtLatest(token)
	if !ok {
		return nil, err
	}
	st := &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: InconsistentContinue, ListMeta: metav1.ListMeta{Continue: latest},
	}
	// The Status carries list metadata, which a gRPC error cannot: it is
	// the response body, with its code.
	httpx.SetHTTPCode(ctx, http.StatusGone)
	if out.YAML || out.Protobuf {
		return out.StatusBody(st), nil
	}
	return &httpbody.HttpBody{ContentType: httpx.ContentTypeJSON, Data: httpx.StatusJSON(st, out.Pretty)}, nil
}

// continueAtLatest rewrites an (upstream format) continue token to
// continue at its key from the latest revision.
func continueAtLatest(token string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", false
	}
	var c struct {
		APIVersion      string `json:"v"`
		ResourceVersion int64  `json:"rv"`
		StartKey        string `json:"start"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.StartKey == "" {
		return "", false
	}
	c.ResourceVersion = -1
	b, err := json.Marshal(c)
	if err != nil {
		return "", false
	}
	return base64.RawURLEncoding.EncodeToString(b), true
}

// EventTransform is the per-event transformation a watch's negotiated
// format asks for (nil: none). A Table watch sends the column
// definitions with its first event only, as upstream.
func EventTransform(out httpx.OutputFormat, rm httpx.RequestMeta, printer func() *TablePrinter) (func([]byte) ([]byte, error), error) {
	switch out.As {
	case httpx.AsTable:
		opts, err := tableOptions(rm.Query())
		if err != nil {
			return nil, err
		}
		tw := &tableWriter{printer: printer(), opts: opts, gv: out.AsGV}
		return func(obj []byte) ([]byte, error) {
			doc, err := tw.table([][]byte{obj}, metav1.ListMeta{ResourceVersion: objectResourceVersion(obj)})
			tw.noHeaders = true
			return doc, err
		}, nil
	case httpx.AsPartialObjectMetadata:
		return func(obj []byte) ([]byte, error) {
			o, err := DecodeObject(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			return partialObjectMetadata(o, out.AsGV)
		}, nil
	}
	// PartialObjectMetadataList of single objects fails upstream, which
	// then sends the objects as they are.
	return nil, nil
}
