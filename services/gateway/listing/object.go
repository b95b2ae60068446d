package listing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/jsondec"
	"github.com/crdplane/crdplane/pkg/jsonenc"
)

// Object is a decoded object (a custom resource or a CRD).
type Object = map[string]any

// UnmarshalJSON decodes JSON keeping integers as int64 (as Kubernetes'
// unstructured decoding does), so numbers survive a round trip exactly.
func UnmarshalJSON(data []byte, v any) error {
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

// DecodeObject decodes a JSON object (integers as int64).
func DecodeObject(data []byte) (Object, error) {
	// Well-formed JSON (what the validator and storage give back) in one
	// pass without reflection, with UnmarshalJSON's values; anything else
	// the way it always was, for its errors' wording.
	if v, ok := jsondec.Decode(data); ok {
		if obj, ok := v.(map[string]any); ok {
			return obj, nil
		}
	}
	return decodeObjectReflect(data)
}

// decodeObjectReflect is DecodeObject through encoding/json's Decoder:
// its errors, and what it makes of input that is not one JSON value (the
// first value of several, say).
func decodeObjectReflect(data []byte) (Object, error) {
	var obj Object
	if err := UnmarshalJSON(data, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return obj, nil
}

// EncodeObject encodes obj as encoding/json.Marshal does, without
// reflection for decoded JSON values (pkg/jsonenc); a failure is a 500.
func EncodeObject(obj Object) ([]byte, error) {
	b, err := jsonenc.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode object: %w", err))
	}
	return b, nil
}

// PlainError is an error without a Status of its own, which upstream
// answers as a 500 with the error's text and no reason.
func PlainError(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error(),
	}}
}

// ItemNameNamespace reads an object's metadata.name and metadata.namespace
// without decoding the rest ("" for what is missing or unreadable).
func ItemNameNamespace(obj []byte) (name, namespace string) {
	var m struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(obj, &m)
	return m.Metadata.Name, m.Metadata.Namespace
}
