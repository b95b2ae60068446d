package registry

import (
	"encoding/json"

	"github.com/crdplane/crdplane/pkg/patch"
)

// patchSetsResourceVersion reports whether a patch names
// metadata.resourceVersion: such a patch applies to that version only and
// is not retried on a conflict.
func patchSetsResourceVersion(patchType string, body []byte) bool {
	switch patch.Type(patchType) {
	case patch.MergePatch, patch.StrategicMerge:
		var p struct {
			Metadata map[string]json.RawMessage `json:"metadata"`
		}
		if json.Unmarshal(body, &p) != nil {
			return false
		}
		rv, ok := p.Metadata["resourceVersion"]
		return ok && string(rv) != "null"
	case patch.JSONPatch:
		var ops []struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}
		if json.Unmarshal(body, &ops) != nil {
			return false
		}
		for _, op := range ops {
			if op.Path == "/metadata/resourceVersion" && op.Op != "test" {
				return true
			}
		}
	}
	return false
}
