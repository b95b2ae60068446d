package registry

// Bounds on CRD schemas that upstream does not have (a deliberate
// tightening; README.md). Upstream v1.33 accepts any schema that fits in the
// 3 MiB request body and the JSON decoder's 10000 levels of nesting, so a
// schema may nest ~4,900 levels, which costs hundreds of MiB in every
// component that compiles it (structural schema, CEL declarations,
// validation and defaulting trees). The registry refuses such a schema
// before anything compiles it, and before decoding it: decodeCRD scans the
// JSON first (checkSchemaDepthJSON). The validator's ValidateCRD runs only
// for schemas without errors of the registry's own (validatecrd.go), and
// the gateway and validators see a CRD only once it is stored.
//
// The bound is a resource limit, like the request body's: it does not
// ratchet. A CRD stored with a deeper schema (by an earlier version, or in
// an etcd written by kube-apiserver) keeps serving, and can be deleted;
// writes of its main resource or status must bring the schema within the
// bound.

import (
	"bytes"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// validateSchemaDepth rejects a schema that nests more than
// crdlimits.MaxSchemaDepth levels below its root (p is the path of the
// openAPIV3Schema). checkSchemaDepthJSON finds the same before decoding;
// this is the same rule on the decoded form, for any path that did not scan.
func validateSchemaDepth(s *schemaProps, p *field.Path) field.ErrorList {
	if d := crdlimits.SchemaDepth(s); d > crdlimits.MaxSchemaDepth {
		return field.ErrorList{schemaDepthError(p, d)}
	}
	return nil
}

func schemaDepthError(p *field.Path, depth int) *field.Error {
	return field.Forbidden(p, fmt.Sprintf(
		"must not nest schemas more than %d levels deep (found %d levels of properties, items, additionalProperties, allOf, anyOf, oneOf or not)",
		crdlimits.MaxSchemaDepth, depth))
}

// checkSchemaDepthJSON is validateSchemaDepth on a CRD's JSON before it is
// decoded (decoding a schema nested thousands of levels deep costs ~50
// times its size, and validating it as much again): the 422 for every
// version whose schema nests too deep, at the path validation would report
// (spec.validation when all versions share one schema, as in upstream's
// internal form). Anything the scan cannot read is left to decoding.
func checkSchemaDepthJSON(body []byte) error {
	versions, ok := crdlimits.VersionSchemaDepths(body)
	if !ok {
		return nil
	}
	var errs field.ErrorList
	if shared := sharedSchema(versions); shared != nil {
		if shared.Depth > crdlimits.MaxSchemaDepth {
			errs = append(errs, schemaDepthError(field.NewPath("spec", "validation", "openAPIV3Schema"), shared.Depth))
		}
	} else {
		for i, v := range versions {
			if v.Depth > crdlimits.MaxSchemaDepth {
				errs = append(errs, schemaDepthError(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), v.Depth))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	name := ""
	if raw, found, err := jsonscan.Lookup(body, "metadata", "name"); err == nil && found {
		name, _ = jsonscan.String(raw)
	}
	return apierrors.NewInvalid(crdGK, name, errs)
}

// sharedSchema returns the schema every version has when they all have the
// same one (compared as JSON text), which the internal form moves to
// spec.validation; else nil.
func sharedSchema(versions []crdlimits.VersionSchema) *crdlimits.VersionSchema {
	if len(versions) == 0 || versions[0].Raw == nil {
		return nil
	}
	for _, v := range versions[1:] {
		if !bytes.Equal(v.Raw, versions[0].Raw) {
			return nil
		}
	}
	return &versions[0]
}

// validateCompiledSize refuses a CRD whose estimated memory once decoded
// and compiled (crdlimits.EstimateCompiledSize: every version's compiled
// schema and CEL programs, the type converter, the decoded CRD) exceeds
// crdlimits.MaxCompiledBytes, so that no CRD write can take the gateway or
// a validator past its memory limit (README.md). in is crd's internal
// form, whose paths the error uses: spec.validation.openAPIV3Schema when
// the versions share one schema, else the schema of the version that
// weighs most. On update (old set) a CRD already over the bound may be
// written as long as its estimate does not grow: the weights may change
// between releases, and a stored CRD must stay updatable.
func validateCompiledSize(crd, old *CRD, in *apiextensions.CustomResourceDefinition) field.ErrorList {
	total, ok := crdlimits.CompiledSizeAllowed(crd, old)
	if ok {
		return nil
	}
	size := crdlimits.EstimateCompiledSize(crd)
	p := field.NewPath("spec", "validation", "openAPIV3Schema")
	if in.Spec.Validation == nil {
		largest := 0
		for i, v := range size.Versions {
			if v > size.Versions[largest] {
				largest = i
			}
		}
		p = field.NewPath("spec", "versions").Index(largest).Child("schema", "openAPIV3Schema")
	}
	return field.ErrorList{field.Forbidden(p, crdlimits.CompiledSizeMessage(total, len(crd.Spec.Versions)))}
}
