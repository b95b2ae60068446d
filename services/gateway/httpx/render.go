package httpx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/api/httpbody"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/kubewire"
)

const ContentTypeYAML = "application/yaml"

// Transformations a client can ask for with Accept parameters
// (as=<kind>;g=meta.k8s.io;v=<version>).
const (
	AsTable                     = "Table"
	AsPartialObjectMetadata     = "PartialObjectMetadata"
	AsPartialObjectMetadataList = "PartialObjectMetadataList"
)

// OutputFormat is the negotiated response encoding.
type OutputFormat struct {
	YAML   bool
	Pretty bool
	// Protobuf is Kubernetes protobuf (built-in kinds only: CRDs, their
	// lists, Status, discovery, PartialObjectMetadata[List]).
	Protobuf bool
	// as is a transformation of the response (AsTable, ...); asGV its
	// group/version (meta.k8s.io/v1 or meta.k8s.io/v1beta1).
	As   string
	AsGV string
}

// wire is the gateway process's one protobuf encoder: it caches the
// encodings of the objects it encoded (by uid and resourceVersion), so a
// list of objects that did not change is assembled from the cache.
var wire = kubewire.NewEncoder(kubewire.EncoderConfig{})

// Wire returns the process's protobuf encoder.
func Wire() *kubewire.Encoder { return wire }

// Target is the kind of endpoint a request is negotiated for (kubewire's).
type Target = kubewire.Target

// Endpoint kinds.
const (
	TargetCRD            = kubewire.TargetCRD
	TargetCRDCollection  = kubewire.TargetCRDCollection
	TargetCustomResource = kubewire.TargetCustomResource
	TargetScale          = kubewire.TargetScale
	// TargetNamespace and TargetNamespaceCollection are core/v1
	// Namespaces (one, and the collection's LIST and WATCH).
	TargetNamespace           = kubewire.TargetNamespace
	TargetNamespaceCollection = kubewire.TargetNamespaceCollection
	TargetRBAC                = kubewire.TargetRBAC
	TargetRBACCollection      = kubewire.TargetRBACCollection
)

func (m RequestMeta) wireRequest() kubewire.Request {
	return kubewire.Request{Accept: m.Accept, RawQuery: m.RawQuery, UserAgent: m.UserAgent}
}

func fromWire(o kubewire.Output) OutputFormat {
	f := OutputFormat{
		YAML:     o.MediaType == kubewire.ContentTypeYAML,
		Protobuf: o.Protobuf(),
		Pretty:   o.Pretty,
	}
	if o.Transform != kubewire.TransformNone {
		f.As, f.AsGV = string(o.Transform), o.TransformGV.String()
	}
	return f
}

// NegotiateOutput picks the response encoding from Accept as
// kube-apiserver does for the endpoint (kubewire.Negotiate): several
// types with q-values, JSON, YAML and protobuf (for custom resources only
// with a PartialObjectMetadata transformation), Table and
// PartialObjectMetadata[List] of meta.k8s.io v1 or v1beta1. No Accept is
// JSON; nothing acceptable is upstream's 406. pretty comes from ?pretty,
// the Accept parameter pretty=1, or a human client's User-Agent.
func NegotiateOutput(rm RequestMeta, t Target) (OutputFormat, error) {
	o, err := kubewire.Negotiate(rm.wireRequest(), t)
	if err != nil {
		return OutputFormat{}, err
	}
	return fromWire(o), nil
}

// NegotiateWatch picks the encoding of a watch stream (JSON or protobuf
// frames; YAML has none: 406).
func NegotiateWatch(rm RequestMeta, t Target) (OutputFormat, error) {
	o, err := kubewire.NegotiateWatch(rm.wireRequest(), t)
	if err != nil {
		return OutputFormat{}, err
	}
	return fromWire(o), nil
}

// WriteOutput negotiates the response of a write: the object itself
// (a transformation asked for is not applied to write responses).
func WriteOutput(rm RequestMeta, t Target) (OutputFormat, error) {
	f, err := NegotiateOutput(rm, t)
	f.As, f.AsGV = "", ""
	return f, err
}

// Encode renders a JSON document in the negotiated format (JSON when a
// protobuf encoding fails; Render reports that error).
func (f OutputFormat) Encode(doc []byte) (body []byte, contentType string) {
	if f.Protobuf {
		if b, err := wire.Object(doc); err == nil {
			return b, kubewire.ContentTypeProtobuf
		}
	}
	if f.YAML {
		if y, err := yaml.JSONToYAML(doc); err == nil {
			return y, ContentTypeYAML
		}
	}
	if f.Pretty {
		var buf bytes.Buffer
		if err := json.Indent(&buf, doc, "", "  "); err == nil {
			buf.WriteByte('\n')
			return buf.Bytes(), ContentTypeJSON
		}
	}
	if len(doc) > 0 && doc[len(doc)-1] != '\n' {
		doc = append(doc, '\n')
	}
	return doc, ContentTypeJSON
}

// Render wraps a document into the HttpBody response, encoded as
// negotiated; a protobuf encoding that fails is its error (a custom
// resource is upstream's 406).
func (f OutputFormat) Render(doc []byte) (*httpbody.HttpBody, error) {
	if f.Protobuf {
		b, err := wire.Object(doc)
		if err != nil {
			return nil, err
		}
		return &httpbody.HttpBody{ContentType: kubewire.ContentTypeProtobuf, Data: b}, nil
	}
	return f.Body(doc), nil
}

// RenderTypedList renders a list of a built-in kind (CRDs) from its item
// documents: protobuf straight from the items (the encoder's cache), or
// the JSON document render assembles.
func (f OutputFormat) RenderTypedList(apiVersion, kind string, p ListPage, render func() ([]byte, error)) (*httpbody.HttpBody, error) {
	if f.Protobuf {
		lm := p.ListMeta()
		b, err := wire.List(apiVersion, kind, kubewire.ListMeta{ResourceVersion: lm.ResourceVersion, Continue: lm.Continue, RemainingItemCount: lm.RemainingItemCount}, p.Items)
		if err != nil {
			return nil, err
		}
		return &httpbody.HttpBody{ContentType: kubewire.ContentTypeProtobuf, Data: b}, nil
	}
	doc, err := render()
	if err != nil {
		return nil, err
	}
	return f.Body(doc), nil
}

// WatchContentType is the Content-Type of a watch stream in this format.
func (f OutputFormat) WatchContentType() string {
	if f.Protobuf {
		return kubewire.ContentTypeProtobufWatch
	}
	return ContentTypeJSON
}

// WatchFrame renders one watch event in this format: a JSON line, or a
// length-prefixed protobuf WatchEvent.
func (f OutputFormat) WatchFrame(eventType string, object []byte) ([]byte, error) {
	if f.Protobuf {
		return wire.WatchEvent(eventType, object)
	}
	return WatchFrame(eventType, object), nil
}

// WatchErrorFrame renders an error as a watch ERROR event in this format.
func (f OutputFormat) WatchErrorFrame(err error) []byte {
	if f.Protobuf {
		if b, perr := wire.WatchEvent(EventError, StatusJSON(kstatus.FromError(err), false)); perr == nil {
			return b
		}
	}
	return WatchErrorFrame(err)
}

// StatusBody renders a Status (an error answered as a response body) in
// this format.
func (f OutputFormat) StatusBody(s *metav1.Status) *httpbody.HttpBody {
	doc := StatusJSON(s, false)
	if f.Protobuf {
		if b, err := wire.Object(doc); err == nil {
			return &httpbody.HttpBody{ContentType: kubewire.ContentTypeProtobuf, Data: b}
		}
	}
	return f.Body(doc)
}

// body wraps a document into the HttpBody response.
func (f OutputFormat) Body(doc []byte) *httpbody.HttpBody {
	data, ct := f.Encode(doc)
	return &httpbody.HttpBody{ContentType: ct, Data: data}
}

// ListPage is one page of a list read, from storage or the registry.
type ListPage struct {
	Items           [][]byte
	ResourceVersion int64
	ContinueToken   string
	Remaining       *int64
}

// RenderList assembles a list as kube-apiserver encodes an unstructured
// list: {"apiVersion","items","kind","metadata":{"continue","resourceVersion"[,"remainingItemCount"]}}
// (keys sorted, items always an array). Items are spliced in as they are.
func RenderList(apiVersion, listKind string, p ListPage) []byte {
	var b bytes.Buffer
	b.Grow(128 + totalLen(p.Items))
	b.WriteString(`{"apiVersion":`)
	WriteJSONString(&b, apiVersion)
	b.WriteString(`,"items":[`)
	for i, it := range p.Items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(bytes.TrimSpace(it))
	}
	b.WriteString(`],"kind":`)
	WriteJSONString(&b, listKind)
	b.WriteString(`,"metadata":{"continue":`)
	WriteJSONString(&b, p.ContinueToken)
	if p.Remaining != nil {
		b.WriteString(`,"remainingItemCount":`)
		b.WriteString(strconv.FormatInt(*p.Remaining, 10))
	}
	b.WriteString(`,"resourceVersion":`)
	WriteJSONString(&b, strconv.FormatInt(p.ResourceVersion, 10))
	b.WriteString(`}}`)
	return b.Bytes()
}

func totalLen(items [][]byte) int {
	n := 0
	for _, it := range items {
		n += len(it) + 1
	}
	return n
}

func WriteJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

// Watch event types as they appear on the wire.
const (
	EventAdded    = "ADDED"
	EventModified = "MODIFIED"
	EventDeleted  = "DELETED"
	EventBookmark = "BOOKMARK"
	EventError    = "ERROR"
)

// WatchFrame renders one watch event as kube-apiserver streams it:
// {"type":"ADDED","object":{...}} and a newline.
func WatchFrame(eventType string, object []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(object) + 32)
	b.WriteString(`{"type":`)
	WriteJSONString(&b, eventType)
	b.WriteString(`,"object":`)
	b.Write(bytes.TrimSpace(object))
	b.WriteString("}\n")
	return b.Bytes()
}

// WatchErrorFrame renders an error as a watch ERROR event carrying its Status.
func WatchErrorFrame(err error) []byte {
	return WatchFrame(EventError, bytes.TrimSpace(StatusJSON(kstatus.FromError(err), false)))
}

// BookmarkObject is the object of a BOOKMARK event: only apiVersion, kind
// and metadata.resourceVersion (plus the initial-events-end annotation at
// the end of a watch-list's initial events).
func BookmarkObject(apiVersion, kind string, rv int64, initialEventsEnd bool) []byte {
	md := map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}
	if initialEventsEnd {
		md["annotations"] = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md})
	return b
}

// ListMeta is the page's list metadata.
func (p ListPage) ListMeta() metav1.ListMeta {
	lm := metav1.ListMeta{Continue: p.ContinueToken, RemainingItemCount: p.Remaining}
	if p.ResourceVersion > 0 {
		lm.ResourceVersion = fmt.Sprint(p.ResourceVersion)
	}
	return lm
}
