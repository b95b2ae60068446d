package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/objmeta"
)

// object is a decoded custom resource.
type object = map[string]any

// jsonUnmarshal decodes JSON keeping integers as int64 (as Kubernetes'
// unstructured decoding does), so numbers survive a round trip exactly.
func jsonUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if m, ok := v.(*map[string]any); ok {
		*m = fromJSONNumbers(*m).(map[string]any)
	}
	return nil
}

// fromJSONNumbers turns json.Number values into int64 or float64.
func fromJSONNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = fromJSONNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = fromJSONNumbers(e)
		}
		return x
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

func decodeObject(data []byte) (object, error) {
	var obj object
	if err := jsonUnmarshal(data, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return obj, nil
}

func encodeObject(obj object) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode object: %w", err))
	}
	return b, nil
}

// isYAMLBody reports whether a create/update body of that content type
// is YAML (requestBodyJSON converts it).
func isYAMLBody(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch mt {
	case contentTypeYAML, "application/x-yaml", "text/yaml":
		return true
	}
	return false
}

// requestBodyJSON returns a create/update body as JSON: JSON as is, YAML
// converted. Other media types are 415 as kube-apiserver answers for
// custom resources.
func requestBodyJSON(contentType string, body []byte) ([]byte, error) {
	mt := contentTypeJSON
	if contentType != "" {
		parsed, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return nil, unsupportedMediaType(contentTypeJSON, contentTypeYAML)
		}
		mt = parsed
	}
	switch mt {
	case contentTypeJSON, "*/*":
		return body, nil
	case contentTypeYAML, "application/x-yaml", "text/yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return j, nil
	default:
		return nil, unsupportedMediaType(contentTypeJSON, contentTypeYAML)
	}
}

// unsupportedMediaType is kube-apiserver's 415 for a body it cannot decode.
func unsupportedMediaType(accepted ...string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    415,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(accepted, ", ")),
	}}
}

// summarize abbreviates a body for an error message as kube-apiserver does.
func summarize(data []byte, max int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > max {
			return string(data[:max]) + " ..."
		}
		return string(data)
	default:
		if len(data) > max {
			return fmt.Sprintf("%x ...", data[:max])
		}
		return fmt.Sprintf("%x", data)
	}
}

// decodeCustomResource decodes a create/update body for r and checks its
// apiVersion the way kube-apiserver's decoder for custom resources does
// (400s with upstream's wording). A wrong kind with the right apiVersion is
// left to checkKind (a 422, as upstream's type-meta validation).
func decodeCustomResource(r *resource, data []byte) (object, error) {
	var (
		obj              object
		objErr           error
		apiVersion, kind string
	)
	if o, ok := decodeWholeObject(data); ok && exactTypeMeta(o) {
		// The common case: one decode gives the object and its type meta.
		obj = o
		apiVersion, _ = o["apiVersion"].(string)
		kind, _ = o["kind"].(string)
	} else {
		// Anything else takes the decoder's two steps, for its errors.
		var tm struct {
			APIVersion any `json:"apiVersion"`
			Kind       any `json:"kind"`
		}
		if err := json.Unmarshal(data, &tm); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): couldn't get version/kind; json parse error: %v (%s)",
				r.kind, err, summarize(data, 30)))
		}
		apiVersion, _ = tm.APIVersion.(string)
		kind, _ = tm.Kind.(string)
		obj, objErr = decodeObject(data)
	}
	gv, gvErr := schema.ParseGroupVersion(apiVersion)
	// The version the decoder reports: the body's, or the request's when absent.
	reported := gv.Version
	if apiVersion == "" {
		reported = r.version
	}
	cannotHandle := func(reason string) error {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", r.kind, reported, r.kind, reason))
	}
	if objErr != nil {
		return nil, cannotHandle(objErr.Error())
	}
	if kind == "" {
		return nil, cannotHandle(fmt.Sprintf("Object 'Kind' is missing in '%s'", data))
	}
	if gvErr != nil {
		return nil, cannotHandle(gvErr.Error())
	}
	if apiVersion == "" {
		reported = ""
		return nil, cannotHandle(fmt.Sprintf("%s is unstructured and is not suitable for converting to %q",
			schema.GroupVersionKind{Kind: kind}.String(), r.apiVersion()))
	}
	if gv.Group != r.group {
		return nil, cannotHandle(fmt.Sprintf("%s is unstructured and is not suitable for converting to %q",
			gv.WithKind(kind).String(), r.apiVersion()))
	}
	if !crdHasVersion(r, gv.Version) {
		return nil, cannotHandle("request to convert CR from an invalid group/version: " + gv.String())
	}
	if gv.Version != r.version {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gv.String(), r.apiVersion()))
	}
	return obj, nil
}

// decodeWholeObject decodes data as decodeObject does and reports whether it
// is one JSON object with nothing but white space after it (what
// json.Unmarshal accepts).
func decodeWholeObject(data []byte) (object, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj object
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return fromJSONNumbers(obj).(object), true
}

// exactTypeMeta reports whether obj's apiVersion and kind are what
// json.Unmarshal into a struct with those fields reads: no other top-level
// key matches them case-insensitively (as encoding/json matches fields).
func exactTypeMeta(obj object) bool {
	for k := range obj {
		if (k != "apiVersion" && strings.EqualFold(k, "apiVersion")) || (k != "kind" && strings.EqualFold(k, "kind")) {
			return false
		}
	}
	return true
}

func crdHasVersion(r *resource, v string) bool {
	for _, cv := range r.crd.Spec.Versions {
		if cv.Name == v {
			return true
		}
	}
	return false
}

// checkKind is upstream's type-meta validation of a custom resource: a 422
// that short-circuits every other check.
func checkKind(r *resource, obj object, name string) error {
	var errs field.ErrorList
	if k, _ := obj["kind"].(string); k != r.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), k, "must be "+r.kind))
	}
	if av, _ := obj["apiVersion"].(string); av != r.apiVersion() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), av, "must be "+r.apiVersion()))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(r.groupKind(), name, errs)
	}
	return nil
}

// objectMeta reads metadata into its typed form (for upstream's metadata
// validation).
func objectMeta(obj object) (*metav1.ObjectMeta, error) {
	m, _ := obj["metadata"].(map[string]any)
	om := &metav1.ObjectMeta{}
	if m == nil {
		return om, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, om); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid metadata: %v", err))
	}
	return om, nil
}

// validateMetaCreate is upstream's metadata validation of a new custom
// resource (name a DNS subdomain, labels, annotations, owner references,
// finalizers, ...).
//
// Metadata that does not even decode is left to the validator, which
// answers it with upstream's decoding error.
func validateMetaCreate(r *resource, obj object) (field.ErrorList, error) {
	om, err := objectMeta(obj)
	if err != nil {
		return nil, nil
	}
	return metavalidation.ValidateObjectMeta(om, r.namespaced, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata")), nil
}

// validateMetaUpdate is upstream's metadata validation of an update.
func validateMetaUpdate(r *resource, obj, old object) (field.ErrorList, error) {
	om, err := objectMeta(obj)
	if err != nil {
		return nil, nil
	}
	oom, err := objectMeta(old)
	if err != nil {
		return nil, nil
	}
	errs := metavalidation.ValidateObjectMeta(om, r.namespaced, metavalidation.ValidateNameFunc(metavalidation.NameIsDNSSubdomain), field.NewPath("metadata"))
	errs = append(errs, metavalidation.ValidateObjectMetaUpdate(om, oom, field.NewPath("metadata"))...)
	return errs, nil
}

// resourceVersion reads metadata.resourceVersion as a revision (0: unset)
// as upstream's storage versioner does (ObjectResourceVersion): one that
// is not a uint64 is strconv's error, which upstream's store returns as it
// is, a plain 500 (`strconv.ParseUint: parsing "abc": invalid syntax`).
func resourceVersion(obj object) (int64, error) {
	s := objmeta.String(obj, "resourceVersion")
	if s == "" {
		return 0, nil
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, plainError(err)
	}
	return int64(rv), nil
}

// deepCopyObject copies a decoded object.
func deepCopyObject(obj object) object {
	return runtime.DeepCopyJSON(obj)
}

func bytesContains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
