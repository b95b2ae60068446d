package registry

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
)

const condNonStructural = apiextensionsv1.NonStructuralSchema

// syncNonStructural keeps the NonStructuralSchema condition of a CRD in
// line with its schemas, as upstream's condition controller: True
// ("Violations") listing what makes a version's schema non-structural,
// Unknown ("StructuralError") when a schema cannot be checked at all, and
// no condition once every schema is structural. v1 rejects non-structural
// schemas on create, so only CRDs stored otherwise (and kept so by update
// ratcheting) carry it.
func (c *controllers) syncNonStructural(ctx context.Context, name string) error {
	cur, ok := c.inf.get(name)
	if !ok {
		return nil
	}
	want := nonStructuralCondition(cur)
	have := findCondition(cur, condNonStructural)
	if (want == nil && have == nil) || (want != nil && conditionEquivalent(want, have)) {
		return nil
	}
	crd := cur.DeepCopy()
	if want == nil {
		removeCondition(crd, condNonStructural)
	} else {
		setCondition(crd, *want)
	}
	return c.writeStatus(ctx, crd, cur)
}

// nonStructuralCondition is the NonStructuralSchema condition crd should
// carry (nil: none). Field paths are those of the v1 object
// (spec.versions[i].schema.openAPIV3Schema), as upstream reports them.
func nonStructuralCondition(crd *CRD) *condition {
	var errs field.ErrorList
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		in := &apiextensions.CustomResourceValidation{}
		if err := scheme.Convert(v.Schema, in, nil); err != nil {
			continue
		}
		if err := structuralUnsupported(in.OpenAPIV3Schema); err != nil {
			return &condition{
				Type:    condNonStructural,
				Status:  apiextensionsv1.ConditionUnknown,
				Reason:  "StructuralError",
				Message: fmt.Sprintf("failed to check validation schema for version %s: %v", v.Name, err),
			}
		}
		p := field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema")
		errs = append(errs, validateStructural(p, in.OpenAPIV3Schema)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return &condition{
		Type:    condNonStructural,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "Violations",
		Message: fielderr.Aggregate(errs),
	}
}
