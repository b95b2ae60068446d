package registry

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// CRD is the stored and served form of a CustomResourceDefinition.
type CRD = apiextensionsv1.CustomResourceDefinition

// CRDStatus is a CRD's status.
type CRDStatus = apiextensionsv1.CustomResourceDefinitionStatus

const (
	groupName   = apiextensionsv1.GroupName
	crdResource = "customresourcedefinitions"
	crdKind     = "CustomResourceDefinition"
)

var (
	crdGV  = apiextensionsv1.SchemeGroupVersion
	crdGVK = crdGV.WithKind(crdKind)
	crdGR  = schema.GroupResource{Group: groupName, Resource: crdResource}
	crdGK  = schema.GroupKind{Group: groupName, Kind: crdKind}
)

// scheme knows the v1 and internal CRD types, v1 defaulting and the
// conversions between them.
var scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := apiextensions.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

var (
	strictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Strict: true})
	laxSerializer    = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{})
)

// Field validation directives (the fieldValidation query parameter).
const (
	fieldValidationIgnore = "Ignore"
	fieldValidationWarn   = "Warn"
	fieldValidationStrict = "Strict"
)

// decodeCRD decodes a request body as an apiextensions.k8s.io/v1
// CustomResourceDefinition the way kube-apiserver's create and update
// handlers do: unknown and duplicate fields are errors (Strict), warnings
// (Warn, the default) or ignored (Ignore); any other decoding problem is a
// 400 worded as upstream's. v1 defaults are applied.
func decodeCRD(body []byte, fieldValidation string) (*CRD, []string, error) {
	if fieldValidation == "" {
		fieldValidation = fieldValidationWarn
	}
	switch fieldValidation {
	case fieldValidationIgnore, fieldValidationWarn, fieldValidationStrict:
	default:
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of %q, %q or %q; got %q",
			fieldValidationIgnore, fieldValidationWarn, fieldValidationStrict, fieldValidation))
	}
	// a schema nested too deep is refused before it is decoded
	// (validation_limits.go)
	if err := checkSchemaDepthJSON(body); err != nil {
		return nil, nil, err
	}
	dec := strictSerializer
	if fieldValidation == fieldValidationIgnore {
		dec = laxSerializer
	}
	var warnings []string
	obj, gvk, err := dec.Decode(body, &crdGVK, &CRD{})
	if err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		if isStrict && obj != nil && fieldValidation == fieldValidationWarn {
			for _, e := range strictErr.Errors() {
				warnings = append(warnings, e.Error())
			}
		} else if runtime.IsNotRegisteredError(err) && gvk != nil && gvk.Group == groupName && gvk.Kind == crdKind {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), crdGV))
		} else {
			return nil, nil, decodeError(err, gvk, body)
		}
	}
	crd, ok := obj.(*CRD)
	if !ok {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s", gvk.Kind, gvk.Version, crdKind))
	}
	if gv := gvk.GroupVersion(); gv != crdGV {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gv, crdGV))
	}
	scheme.Default(crd)
	crd.APIVersion, crd.Kind = crdGV.String(), crdKind
	return crd, warnings, nil
}

// upstreamSchemeName is the name v1.33's runtime.NewScheme gives a scheme
// (its own call site: k8s.io/apimachinery v0.33's pkg/runtime/scheme.go
// line 110), which "no kind ... is registered" errors quote; the library
// this module builds with names another line.
const upstreamSchemeName = "pkg/runtime/scheme.go:110"

// decodeError words a decoding failure as upstream's transformDecodeError.
func decodeError(err error, gvk *schema.GroupVersionKind, body []byte) error {
	if gvk != nil && gvk.Kind != "" {
		msg := fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, crdKind, err)
		if runtime.IsNotRegisteredError(err) {
			msg = strings.ReplaceAll(msg, fmt.Sprintf("in scheme %q", scheme.Name()), fmt.Sprintf("in scheme %q", upstreamSchemeName))
		}
		return apierrors.NewBadRequest(msg)
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", crdKind, err, summarize(body, 30)))
}

// summarize abbreviates a request body for an error message.
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
			return hex.EncodeToString(data[:max]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// decodeStored decodes a CRD read from storage (already valid, defaulted).
func decodeStored(data []byte) (*CRD, error) {
	crd := &CRD{}
	if err := json.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("decode stored CRD: %w", err)
	}
	crd.APIVersion, crd.Kind = crdGV.String(), crdKind
	return crd, nil
}

// encodeCRD renders crd as the JSON clients see.
func encodeCRD(crd *CRD) ([]byte, error) {
	out := *crd
	out.APIVersion, out.Kind = crdGV.String(), crdKind
	b, err := json.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encode CRD: %w", err)
	}
	return b, nil
}

// encodeForStorage renders crd as stored: without resourceVersion.
func encodeForStorage(crd *CRD) ([]byte, error) {
	out := *crd
	out.ObjectMeta = *crd.ObjectMeta.DeepCopy()
	out.ResourceVersion = ""
	return encodeCRD(&out)
}

// toInternal converts a v1 CRD to the internal form upstream validates (in
// which per-version fields that are identical across versions are hoisted to
// the top-level spec fields, which shows in field paths such as
// spec.validation.openAPIV3Schema).
func toInternal(crd *CRD) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := scheme.Convert(crd.DeepCopy(), out, nil); err != nil {
		return nil, fmt.Errorf("convert CRD to internal: %w", err)
	}
	return out, nil
}

// now is the clock (tests replace it).
var now = func() metav1.Time { return metav1.Now().Rfc3339Copy() }
