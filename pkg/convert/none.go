// Package convert converts custom resources between the versions of a CRD.
// The None strategy (an apiVersion rewrite) is a library call, so the gateway
// runs it in-process without a hop to the converter service.
package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// None returns obj (a JSON object) with its top-level apiVersion set to
// apiVersion, as the None conversion strategy does. Nothing else changes;
// an object already at apiVersion is returned as is.
func None(obj []byte, apiVersion string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(obj, &top); err != nil {
		return nil, fmt.Errorf("convert: object is not a JSON object: %w", err)
	}
	want, err := json.Marshal(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	if bytes.Equal(top["apiVersion"], want) {
		return obj, nil
	}
	top["apiVersion"] = want
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	return out, nil
}
