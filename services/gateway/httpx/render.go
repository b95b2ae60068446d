package httpx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/munnerz/goautoneg"
	"google.golang.org/genproto/googleapis/api/httpbody"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/kstatus"
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
	// as is a transformation of the response (AsTable, ...); asGV its
	// group/version (meta.k8s.io/v1 or meta.k8s.io/v1beta1).
	As   string
	AsGV string
}

// errNotAcceptable is kube-apiserver's 406 when no Accept clause can be
// served.
func errNotAcceptable() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + ContentTypeJSON + ", " + ContentTypeYAML,
	}}
}

// NegotiateOutput picks the response encoding from Accept as
// kube-apiserver does for custom resources: the first clause (in
// preference order) naming JSON or YAML (or a wildcard, meaning JSON)
// whose transformation, if any, is served — Table (JSON or YAML) and
// PartialObjectMetadata[List] of meta.k8s.io v1 or v1beta1. No Accept is
// JSON; nothing acceptable is 406. pretty comes from ?pretty, the Accept
// parameter pretty=1, or a human client's User-Agent (curl, Wget, browsers).
func NegotiateOutput(rm RequestMeta, pretty bool) (OutputFormat, error) {
	out := OutputFormat{Pretty: pretty || humanAgent(rm.UserAgent)}
	if strings.TrimSpace(rm.Accept) == "" {
		return out, nil
	}
	for _, c := range goautoneg.ParseAccept(rm.Accept) {
		var yml bool
		switch {
		case c.Type == "application" && c.SubType == "json", c.Type == "application" && c.SubType == "*", c.Type == "*" && c.SubType == "*":
		case c.Type == "application" && c.SubType == "yaml":
			yml = true
		default:
			continue
		}
		f := out
		f.YAML = yml
		if c.Params["pretty"] == "1" {
			f.Pretty = true
		}
		as, g, v := c.Params["as"], c.Params["g"], c.Params["v"]
		if as != "" || g != "" || v != "" {
			if g != metav1.GroupName || (v != "v1" && v != "v1beta1") {
				continue
			}
			switch as {
			case AsTable, AsPartialObjectMetadata, AsPartialObjectMetadataList:
			default:
				continue
			}
			f.As, f.AsGV = as, g+"/"+v
		}
		return f, nil
	}
	return out, errNotAcceptable()
}

// humanAgent reports clients kube-apiserver pretty-prints for.
func humanAgent(ua string) bool {
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// WriteOutput negotiates the response of a write: the object itself
// (a transformation asked for is not applied to write responses).
func WriteOutput(rm RequestMeta, pretty bool) (OutputFormat, error) {
	f, err := NegotiateOutput(rm, pretty)
	f.As, f.AsGV = "", ""
	return f, err
}

// encode renders a JSON document in the negotiated format.
func (f OutputFormat) Encode(doc []byte) (body []byte, contentType string) {
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
