// Package handlers holds upstream's strict pre-decoding of patch bodies.
//
// It is named handlers, and its patch operation type jsonPatchOp, because
// the decoding errors name the Go type decoded into: upstream's
// k8s.io/apiserver/pkg/endpoints/handlers answers "error decoding patch:
// json: cannot unmarshal object into Go value of type
// []handlers.jsonPatchOp", and so must crdplane.
package handlers

import (
	"fmt"

	kjson "sigs.k8s.io/json"
)

// jsonPatchOp is upstream's (k8s.io/apiserver/pkg/endpoints/handlers,
// patch.go) view of one JSON patch operation.
type jsonPatchOp struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	From  string      `json:"from"`
	Value interface{} `json:"value"`
}

// DecodeJSONPatch strictly decodes a JSON patch as upstream's applyJSPatch
// does: the strict errors (duplicate fields) come back prefixed "json
// patch ", a body that does not decode is err.
func DecodeJSONPatch(body []byte) ([]error, error) {
	var v []jsonPatchOp
	strictErrs, err := kjson.UnmarshalStrict(body, &v)
	if err != nil {
		return nil, err
	}
	for i, e := range strictErrs {
		strictErrs[i] = fmt.Errorf("json patch %v", e)
	}
	return strictErrs, nil
}

// DecodeMergePatch strictly decodes a JSON merge patch as upstream's
// applyJSPatch does.
func DecodeMergePatch(body []byte) ([]error, error) {
	v := map[string]interface{}{}
	return kjson.UnmarshalStrict(body, &v)
}
