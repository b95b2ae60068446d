package httpx

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/kubewire"
)

// statusCodecs encode the Status answers of the filters the edge borrows
// from k8s.io/apiserver (impersonation) and decode the objects the audit
// records: Status, the built-in kinds crdplane serves (CRDs, access
// reviews), in JSON, YAML and protobuf.
var statusCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, authorizationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s)
}()

// unstructuredJSON encodes the objects the audit records (already in their
// request or response version) as JSON, as they are.
var unstructuredJSON = runtime.NewSimpleNegotiatedSerializer(runtime.SerializerInfo{
	MediaType: runtime.ContentTypeJSON, EncodesAsText: true, Serializer: unstructured.UnstructuredJSONScheme,
})

// maxAuditedResponse bounds the response body kept for an audit event.
const maxAuditedResponse = 16 << 20

// auditResponse records in r's audit event what kube-apiserver's response
// writers record: the response's Status (responseStatus: code, reason,
// message, details) at every level, the response object at
// RequestResponse. It returns the writer the response goes through and
// what to call once it has been written. Watches are not captured.
func auditResponse(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	ctx := r.Context()
	ac := audit.AuditContextFrom(ctx)
	if !ac.Enabled() {
		return w, func() {}
	}
	if info, _ := request.RequestInfoFrom(ctx); info != nil && info.Verb == "watch" {
		return w, func() {}
	}
	cw := &captureWriter{ResponseWriter: w, full: !ac.GetEventLevel().Less(auditinternal.LevelRequestResponse), delete: r.Method == http.MethodDelete}
	return cw, func() { cw.log(r) }
}

// auditRequest records in r's audit event what kube-apiserver's handlers
// record of a request: the object of a create, update or delete (its
// name, namespace, uid and resourceVersion in objectRef; the object itself
// at level Request and above), a patch as sent. The body has been read
// (and bounded) by the edge.
func auditRequest(r *http.Request) {
	ctx := r.Context()
	ac := audit.AuditContextFrom(ctx)
	if !ac.Enabled() || r.Body == nil || r.Body == http.NoBody {
		return
	}
	info, _ := request.RequestInfoFrom(ctx)
	if info == nil || !info.IsResourceRequest {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	logRequestObject(r, info, ac.GetEventLevel(), body)
}

func logRequestObject(r *http.Request, info *request.RequestInfo, level auditinternal.Level, body []byte) {
	ctx := r.Context()
	switch info.Verb {
	case "patch":
		audit.LogRequestPatch(ctx, body)
		return
	case "create", "update", "delete", "deletecollection":
	default:
		return
	}
	doc := toJSON(r.Header.Get("Content-Type"), body)
	if doc == nil {
		return
	}
	var obj runtime.Object
	if level.Less(auditinternal.LevelRequest) {
		// Metadata: only the object's identity is recorded.
		m := &metav1.PartialObjectMetadata{}
		if json.Unmarshal(doc, m) != nil {
			return
		}
		obj = m
	} else {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(doc) != nil {
			return
		}
		obj = u
	}
	gvr := schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}
	audit.LogRequestObject(ctx, obj, gvr.GroupVersion(), gvr, info.Subresource, unstructuredJSON)
}

// toJSON is a body's JSON (nil when it is none of JSON, YAML or a
// protobuf built-in kind).
func toJSON(contentType string, body []byte) []byte {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = ContentTypeJSON
	}
	switch mt {
	case ContentTypeJSON:
		return body
	case ContentTypeYAML:
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil
		}
		return j
	case kubewire.ContentTypeProtobuf:
		obj, _, err := statusCodecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil
		}
		j, err := json.Marshal(obj)
		if err != nil {
			return nil
		}
		return j
	}
	return nil
}

// captureWriter keeps the response body for the audit event: all of it at
// level RequestResponse, only a Status otherwise.
type captureWriter struct {
	http.ResponseWriter
	full   bool // RequestResponse: every body
	delete bool // a delete's success is a Status too
	code   int
	buf    bytes.Buffer
	over   bool
}

func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if (c.full || c.delete || c.code >= http.StatusBadRequest) && !c.over {
		if c.buf.Len()+len(p) > maxAuditedResponse {
			c.over = true
			c.buf = bytes.Buffer{}
		} else {
			c.buf.Write(p)
		}
	}
	return c.ResponseWriter.Write(p)
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *captureWriter) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// log records the response: a Status's code, reason, message and details
// at every level (upstream's responseStatus), the object at
// RequestResponse.
func (c *captureWriter) log(r *http.Request) {
	if c.over || c.buf.Len() == 0 {
		return
	}
	ctx := r.Context()
	body := c.buf.Bytes()
	if c.Header().Get("Content-Encoding") == "gzip" {
		// compressed by the edge (responses over 128 KiB)
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return
		}
		if body, err = io.ReadAll(io.LimitReader(zr, maxAuditedResponse)); err != nil {
			return
		}
	}
	doc := toJSON(c.Header().Get("Content-Type"), body)
	if doc == nil {
		return
	}
	if kindOf(doc) == "Status" {
		s := &metav1.Status{}
		if json.Unmarshal(doc, s) == nil {
			audit.LogResponseObject(ctx, s, schema.GroupVersion{Version: "v1"}, statusCodecs)
		}
		return
	}
	if !c.full {
		return
	}
	// an object or a list
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode(doc, nil, nil)
	if err != nil {
		return
	}
	audit.LogResponseObject(ctx, obj, obj.GetObjectKind().GroupVersionKind().GroupVersion(), unstructuredJSON)
}

// kindOf is a JSON object's kind, read without decoding the rest.
func kindOf(doc []byte) string {
	var tm struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(doc, &tm) != nil {
		return ""
	}
	return tm.Kind
}
