package cr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/patch"
	"github.com/crdplane/crdplane/pkg/structural"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// decodePatch is upstream's strict pre-decoding of a JSON or merge patch
// under fieldValidation Warn (the default) and Strict (patch.DecodeStrict):
// a body that does not decode (malformed, or nested deeper than the
// decoder's 10000 levels) is 400 "error decoding patch: ..." before
// anything is applied; duplicate fields come back as strict errors.
func decodePatch(pt string, body []byte, directive string) ([]error, error) {
	if directive == metav1.FieldValidationIgnore {
		return nil, nil
	}
	return patch.DecodeStrict(pt, body)
}

// patchStrictErrors applies the directive to a patch's strict errors once
// the patch applied (the patch's own, then the patched object's): warnings
// under Warn, upstream's 422 on the patched object (quoted, as
// patchInvalid) under Strict.
func patchStrictErrors(ctx context.Context, directive string, strictErrs []error, quoted func() []byte) error {
	if len(strictErrs) == 0 {
		return nil
	}
	if directive == metav1.FieldValidationStrict {
		return patchInvalid(quoted(), runtime.NewStrictDecodingError(strictErrs).Error())
	}
	for _, e := range strictErrs {
		httpx.AddWarnings(ctx, e.Error())
	}
	return nil
}

// patchInvalid is upstream's 422 for a patched object its decoder refused
// (jsonPatcher.applyPatchToCurrentObject): no kind, no name, one cause on
// the field "patch" whose value is the patched object as JSON, its detail
// the decoder's error.
func patchInvalid(quoted []byte, detail string) error {
	return fielderr.NewInvalid(schema.GroupKind{}, "", field.ErrorList{
		field.Invalid(field.NewPath("patch"), string(quoted), detail),
	})
}

// patchedQuote is the patched object as upstream quotes it: the patch
// applied (by the same library) to the current object as upstream's codec
// encodes it, a JSON encoding of the unstructured object (keys sorted at
// every level, HTML characters escaped), so that what the patch did not
// touch reads as that encoding and what it set as the patch wrote it.
// Should that fail, the patched object as crdplane has it.
func patchedQuote(cur object, pt string, body, patched []byte) []byte {
	enc, err := listing.EncodeObject(cur)
	if err != nil {
		return patched
	}
	out, err := patch.Apply(enc, pt, body)
	if err != nil {
		return patched
	}
	return out
}

// decodePatched is upstream's decoding of a patched custom resource, the
// request scope's codec decoding it before the update (DecodeInto in
// jsonPatcher.applyPatchToCurrentObject):
//
//   - the JSON serializer reads the type meta ("couldn't get version/kind;
//     json parse error: ..."), parses the group/version and requires a kind
//     ("Object 'Kind' is missing in '<object>'"); under Warn and Strict it
//     decodes strictly: the object's duplicate fields (a JSON patch may
//     have added a value with duplicate keys) are strict errors;
//   - the schema-coercing decoder decodes metadata as an ObjectMeta (its
//     unknown fields are strict errors, a malformed field fails) and, when
//     the object's group and kind are the resource's, prunes it with the
//     schema of the object's own version, the apiVersion the patch left (a
//     version the CRD does not have keeps nothing but apiVersion, kind and
//     metadata): the pruned fields and the embedded resources' unknown
//     metadata are strict errors, malformed embedded metadata fails.
//
// strictErrs are those strict errors in upstream's order (none under
// Ignore); err is what makes the object undecodable (upstream's 422
// whatever the directive, the patch's own strict errors disregarded).
// quoted is the patched object as upstream has it (patchedQuote), which a
// missing kind's error quotes.
func (a *Server) decodePatched(r *resource, patched []byte, directive string, quoted func() []byte) (strictErrs []error, err error) {
	strict := directive != metav1.FieldValidationIgnore
	var obj object
	decErr := listing.UnmarshalJSON(patched, &obj)
	var tm typeMetaSniff
	if av, kind, ok := plainTypeMeta(obj); decErr == nil && ok {
		tm.APIVersion, tm.Kind = av, kind
	} else if err := json.Unmarshal(patched, &tm); err != nil {
		return nil, fmt.Errorf("couldn't get version/kind; json parse error: %v", err)
	}
	if _, err := schema.ParseGroupVersion(tm.APIVersion); err != nil {
		return nil, err
	}
	if decErr != nil {
		return nil, decErr
	}
	if obj == nil {
		return nil, errors.New("not a JSON object")
	}
	gvk := unstructuredGVK(obj)
	if gvk.Kind == "" {
		return nil, runtime.NewMissingKindErr(string(quoted()))
	}
	if strict {
		paths, err := jsonscan.DuplicateFields(patched, 0)
		if err == nil {
			for _, p := range paths {
				strictErrs = append(strictErrs, fmt.Errorf("duplicate field %q", p))
			}
		}
	}
	if v, ok := obj["apiVersion"]; ok {
		if _, isString := v.(string); !isString {
			return nil, fmt.Errorf(".apiVersion accessor error: %v is of the type %T, expected string", v, v)
		}
	}
	s := metadataOnlySchema()
	if gvk.Group == r.group && gvk.Kind == r.kind {
		s = nil // a version the CRD does not have: nothing is specified
		if crdHasVersion(r, gvk.Version) {
			if s, err = a.schemas.get(r, gvk.Version); err != nil {
				return nil, err
			}
		}
	}
	unknown, err := structural.Normalize(obj, s, false)
	if err != nil {
		return nil, err
	}
	if strict {
		for _, p := range unknown {
			strictErrs = append(strictErrs, fmt.Errorf("unknown field %q", p))
		}
	}
	return strictErrs, nil
}

// decodeErrorText is a decoding error's text as upstream's: a field error
// (malformed embedded metadata) as v1.33 renders it.
func decodeErrorText(err error) string {
	var fe *field.Error
	if errors.As(err, &fe) {
		return fielderr.Error(fe)
	}
	return err.Error()
}

// metadataOnlySchema is what upstream's schema-coercing decoder applies to
// an object of another group or kind: its metadata decoded as an
// ObjectMeta, nothing pruned.
var metadataOnlySchema = sync.OnceValue(func() *structural.Schema {
	s, err := structural.Compile(nil, structural.WithPreserveUnknownFields(true))
	if err != nil {
		panic(err)
	}
	return s
})
