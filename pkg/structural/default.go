package structural

import "k8s.io/apimachinery/pkg/runtime"

// Default applies the defaults of s to obj, as upstream:
//
//   - a property with a default is set when it is missing, or null while not
//     nullable;
//   - null array items and null additionalProperties values of a non-nullable
//     schema take that schema's default (if any);
//   - defaults are applied top down, so a defaulted object gets the defaults
//     of its own properties too;
//   - default values are deep-copied into obj.
//
// Run it after Prune (Normalize), which drops the non-nullable nulls that
// have no default.
func Default(obj map[string]any, s *Schema) {
	defaultValue(obj, s)
}

func isNonNullableNull(x any, s *Schema) bool {
	return x == nil && s != nil && !s.nullable
}

func defaultValue(x any, s *Schema) {
	if s == nil || !s.defaultsBelow {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for _, k := range s.propertyNames {
			prop := s.properties[k]
			if !prop.hasDefault {
				continue
			}
			if v, found := x[k]; !found || isNonNullableNull(v, prop) {
				x[k] = deepCopyJSON(prop.def)
			}
		}
		if len(s.properties) > 0 {
			for _, k := range s.propertyNames {
				if v, found := x[k]; found {
					defaultValue(v, s.properties[k])
				}
			}
		}
		if ap := s.additionalProperties; ap != nil {
			for k, v := range x {
				if _, isProp := s.properties[k]; isProp {
					continue
				}
				if isNonNullableNull(v, ap) {
					v = deepCopyJSON(ap.def)
					x[k] = v
				}
				defaultValue(v, ap)
			}
		}
	case []any:
		for i, v := range x {
			if isNonNullableNull(v, s.items) {
				v = deepCopyJSON(s.items.def)
				x[i] = v
			}
			defaultValue(v, s.items)
		}
	}
}

func deepCopyJSON(v any) any {
	if v == nil {
		return nil
	}
	return runtime.DeepCopyJSONValue(v)
}
