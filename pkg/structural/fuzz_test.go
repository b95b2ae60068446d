package structural

import (
	"runtime/metrics"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/crdlimits"
)

// fuzzHeapAllocated returns the bytes the process has allocated so far
// (cheap: no stop-the-world, unlike runtime.ReadMemStats).
func fuzzHeapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzCompileValidate: a CRD version's schema (JSON, as the registry would
// store it: nested at most crdlimits.MaxSchemaDepth levels) compiles or
// fails with an error, and an object (JSON) then goes through everything
// admission does with it: normalisation and pruning, defaulting,
// validation (create and update, with ratcheting), list types, embedded
// resources. Never a panic; the memory taken stays proportional to the
// input.
func FuzzCompileValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, schemaJSON, objJSON []byte, preserve bool) {
		var props apiextensionsv1.JSONSchemaProps
		if err := utiljson.Unmarshal(schemaJSON, &props); err != nil {
			return
		}
		var in apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&props, &in, nil); err != nil {
			return
		}
		if crdlimits.SchemaDepth(&in) > crdlimits.MaxSchemaDepth {
			// the registry refuses it: nothing compiles it
			return
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(objJSON, &obj); err != nil || obj == nil {
			return
		}
		before := fuzzHeapAllocated()
		s, err := Compile(&props, WithPreserveUnknownFields(preserve))
		if err != nil {
			return
		}
		old := runtime.DeepCopyJSON(obj)
		if _, err := Normalize(obj, s, false); err != nil {
			return
		}
		Default(obj, s)
		_ = Validate(obj, s)
		_ = ValidateUpdate(obj, old, s)
		_ = ValidateListTypes(nil, obj, s)
		_ = ValidateEmbeddedResources(field.NewPath(""), obj, s)
		if _, err := CoerceMetadata(runtime.DeepCopyJSON(old), s, true); err != nil {
			t.Fatalf("CoerceMetadata dropping invalid metadata: %v", err)
		}
		if alloc, limit := fuzzHeapAllocated()-before, uint64(64<<20+2000*(len(schemaJSON)+len(objJSON))); alloc > limit {
			t.Fatalf("allocated %d bytes for %d+%d bytes of input", alloc, len(schemaJSON), len(objJSON))
		}
	})
}
