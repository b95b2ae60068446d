package celrules

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fieldpath"
)

// resolveFieldPath resolves a rule's fieldPath (a relative JSON path of
// field and map accessors: `.a.b`, `.m['key']`, `['a.b']`) against the
// node the rule is scoped to. It returns the path as a field.Path
// (`a.b`, `m[key]`) and the schema it refers to. Every step must name a
// declared property, or a key of a map (additionalProperties).
func resolveFieldPath(jsonPath string, n *node) (*field.Path, *node, error) {
	var out *field.Path
	s := n
	err := fieldpath.Walk(jsonPath, true, func(name string) error {
		if s == nil {
			return errors.New("does not refer to a valid field")
		}
		switch {
		case s.properties != nil:
			out = out.Child(name)
			p := s.prop(name)
			if p == nil {
				return errors.New("does not refer to a valid field")
			}
			s = p
		case s.additional != nil:
			out = out.Key(name)
			s = s.additional.schema
		default:
			return errors.New("does not refer to a valid field")
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, s, nil
}
