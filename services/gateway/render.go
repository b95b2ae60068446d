package gateway

import (
	"bytes"
	"encoding/json"
	"mime"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/api/httpbody"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

const contentTypeYAML = "application/yaml"

// outputFormat is the negotiated response encoding.
type outputFormat struct {
	yaml   bool
	pretty bool
}

// negotiateOutput picks JSON unless the client asks for YAML only (JSON,
// */* or any unknown type gets JSON, which every Kubernetes client reads).
func negotiateOutput(accept string, pretty bool) outputFormat {
	out := outputFormat{pretty: pretty}
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case contentTypeJSON, "*/*", "application/*":
			if params["as"] == "" {
				return out
			}
		case contentTypeYAML:
			out.yaml = true
			return out
		}
	}
	return out
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
