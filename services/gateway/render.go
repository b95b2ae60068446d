package gateway

import (
	"bytes"
	"encoding/json"
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

const contentTypeYAML = "application/yaml"

// Transformations a client can ask for with Accept parameters
// (as=<kind>;g=meta.k8s.io;v=<version>).
const (
	asTable                     = "Table"
	asPartialObjectMetadata     = "PartialObjectMetadata"
	asPartialObjectMetadataList = "PartialObjectMetadataList"
)

// outputFormat is the negotiated response encoding.
type outputFormat struct {
	yaml   bool
	pretty bool
	// as is a transformation of the response (asTable, ...); asGV its
	// group/version (meta.k8s.io/v1 or meta.k8s.io/v1beta1).
	as   string
	asGV string
}

// errNotAcceptable is kube-apiserver's 406 when no Accept clause can be
// served.
func errNotAcceptable() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + contentTypeJSON + ", " + contentTypeYAML,
	}}
}

// negotiateOutput picks the response encoding from Accept as
// kube-apiserver does for custom resources: the first clause (in
// preference order) naming JSON or YAML (or a wildcard, meaning JSON)
// whose transformation, if any, is served — Table (JSON or YAML) and
// PartialObjectMetadata[List] of meta.k8s.io v1 or v1beta1. No Accept is
// JSON; nothing acceptable is 406. pretty comes from ?pretty, the Accept
// parameter pretty=1, or a human client's User-Agent (curl, Wget, browsers).
func negotiateOutput(rm requestMeta, pretty bool) (outputFormat, error) {
	out := outputFormat{pretty: pretty || humanAgent(rm.userAgent)}
	if strings.TrimSpace(rm.accept) == "" {
		return out, nil
	}
	for _, c := range goautoneg.ParseAccept(rm.accept) {
		var yml bool
		switch {
		case c.Type == "application" && c.SubType == "json", c.Type == "application" && c.SubType == "*", c.Type == "*" && c.SubType == "*":
		case c.Type == "application" && c.SubType == "yaml":
			yml = true
		default:
			continue
		}
		f := out
		f.yaml = yml
		if c.Params["pretty"] == "1" {
			f.pretty = true
		}
		as, g, v := c.Params["as"], c.Params["g"], c.Params["v"]
		if as != "" || g != "" || v != "" {
			if g != metav1.GroupName || (v != "v1" && v != "v1beta1") {
				continue
			}
			switch as {
			case asTable, asPartialObjectMetadata, asPartialObjectMetadataList:
			default:
				continue
			}
			f.as, f.asGV = as, g+"/"+v
		}
		return f, nil
	}
	return out, errNotAcceptable()
}

// humanAgent reports clients kube-apiserver pretty-prints for.
func humanAgent(ua string) bool {
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// writeOutput negotiates the response of a write: the object itself
// (a transformation asked for is not applied to write responses).
func writeOutput(rm requestMeta, pretty bool) (outputFormat, error) {
	f, err := negotiateOutput(rm, pretty)
	f.as, f.asGV = "", ""
	return f, err
}

// encode renders a JSON document in the negotiated format.
func (f outputFormat) encode(doc []byte) (body []byte, contentType string) {
	if f.yaml {
		if y, err := yaml.JSONToYAML(doc); err == nil {
			return y, contentTypeYAML
		}
	}
	if f.pretty {
		var buf bytes.Buffer
		if err := json.Indent(&buf, doc, "", "  "); err == nil {
			buf.WriteByte('\n')
			return buf.Bytes(), contentTypeJSON
		}
	}
	if len(doc) > 0 && doc[len(doc)-1] != '\n' {
		doc = append(doc, '\n')
	}
	return doc, contentTypeJSON
}

// body wraps a document into the HttpBody response.
func (f outputFormat) body(doc []byte) *httpbody.HttpBody {
	data, ct := f.encode(doc)
	return &httpbody.HttpBody{ContentType: ct, Data: data}
}

// listPage is one page of a list read, from storage or the registry.
type listPage struct {
	items           [][]byte
	resourceVersion int64
	continueToken   string
	remaining       *int64
}

// renderList assembles a list as kube-apiserver encodes an unstructured
// list: {"apiVersion","items","kind","metadata":{"continue","resourceVersion"[,"remainingItemCount"]}}
// (keys sorted, items always an array). Items are spliced in as they are.
func renderList(apiVersion, listKind string, p listPage) []byte {
	var b bytes.Buffer
	b.Grow(128 + totalLen(p.items))
	b.WriteString(`{"apiVersion":`)
	writeJSONString(&b, apiVersion)
	b.WriteString(`,"items":[`)
	for i, it := range p.items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(bytes.TrimSpace(it))
	}
	b.WriteString(`],"kind":`)
	writeJSONString(&b, listKind)
	b.WriteString(`,"metadata":{"continue":`)
	writeJSONString(&b, p.continueToken)
	if p.remaining != nil {
		b.WriteString(`,"remainingItemCount":`)
		b.WriteString(strconv.FormatInt(*p.remaining, 10))
	}
	b.WriteString(`,"resourceVersion":`)
	writeJSONString(&b, strconv.FormatInt(p.resourceVersion, 10))
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

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

// Watch event types as they appear on the wire.
const (
	eventAdded    = "ADDED"
	eventModified = "MODIFIED"
	eventDeleted  = "DELETED"
	eventBookmark = "BOOKMARK"
	eventError    = "ERROR"
)

// watchFrame renders one watch event as kube-apiserver streams it:
// {"type":"ADDED","object":{...}} and a newline.
func watchFrame(eventType string, object []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(object) + 32)
	b.WriteString(`{"type":`)
	writeJSONString(&b, eventType)
	b.WriteString(`,"object":`)
	b.Write(bytes.TrimSpace(object))
	b.WriteString("}\n")
	return b.Bytes()
}

// watchErrorFrame renders an error as a watch ERROR event carrying its Status.
func watchErrorFrame(err error) []byte {
	return watchFrame(eventError, bytes.TrimSpace(statusJSON(kstatus.FromError(err), false)))
}

// bookmarkObject is the object of a BOOKMARK event: only apiVersion, kind
// and metadata.resourceVersion (plus the initial-events-end annotation at
// the end of a watch-list's initial events).
func bookmarkObject(apiVersion, kind string, rv int64, initialEventsEnd bool) []byte {
	md := map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}
	if initialEventsEnd {
		md["annotations"] = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md})
	return b
}
