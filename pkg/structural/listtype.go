package structural

import (
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateListTypes checks the uniqueness invariants of lists with
// x-kubernetes-list-type set (whole items) and map (the
// x-kubernetes-list-map-keys of items) in obj, reporting each first repeat
// as a Duplicate value error, as upstream.
func ValidateListTypes(fldPath *field.Path, obj map[string]any, s *Schema) field.ErrorList {
	if s == nil || obj == nil || !s.listTypesBelow {
		return nil
	}
	return listTypesObject(fldPath, s, obj)
}

func listTypesObject(fldPath *field.Path, s *Schema, obj map[string]any) field.ErrorList {
	var errs field.ErrorList
	if ap := s.additionalProperties; ap != nil && ap.listTypesBelow {
		for _, k := range sortedKeys(obj) {
			errs = append(errs, listTypesValue(fldPath.Key(k), ap, obj[k])...)
		}
	}
	for _, k := range s.propertyNames {
		prop := s.properties[k]
		if v, ok := obj[k]; ok && prop.listTypesBelow {
			errs = append(errs, listTypesValue(fldPath.Child(k), prop, v)...)
		}
	}
	return errs
}

func listTypesValue(fldPath *field.Path, s *Schema, v any) field.ErrorList {
	switch v := v.(type) {
	case []any:
		return listTypesArray(fldPath, s, v)
	case map[string]any:
		return listTypesObject(fldPath, s, v)
	}
	return nil
}

func listTypesArray(fldPath *field.Path, s *Schema, l []any) field.ErrorList {
	var errs field.ErrorList
	switch s.listType {
	case "set":
		nonUnique, err := nonUniqueIndices(fldPath, l)
		if err != nil {
			errs = append(errs, err)
		} else {
			for _, i := range nonUnique {
				errs = append(errs, field.Duplicate(fldPath.Index(i), l[i]))
			}
		}
	case "map":
		errs = append(errs, listMapDuplicates(fldPath, s, l)...)
	}
	if s.items != nil && s.items.listTypesBelow {
		for i, v := range l {
			errs = append(errs, listTypesValue(fldPath.Index(i), s.items, v)...)
		}
	}
	return errs
}

// unspecifiedKey stands for a missing map-list key (or a null item).
type unspecifiedKey struct{}

// nonUniqueIndices returns the index of the second occurrence of every
// repeated item: scalars compare by Go value, compound items by their JSON.
func nonUniqueIndices(fldPath *field.Path, l []any) ([]int, *field.Error) {
	if len(l) <= 1 {
		return nil, nil
	}
	scalars := make(map[any]int, len(l))
	var compounds map[string]int
	var out []int
	for i, x := range l {
		switch x.(type) {
		case map[string]any, []any:
			b, err := utiljson.Marshal(x)
			if err != nil {
				return nil, field.Invalid(fldPath.Index(i), x, "internal error")
			}
			if compounds == nil {
				compounds = make(map[string]int, len(l))
			}
			compounds[string(b)]++
			if compounds[string(b)] == 2 {
				out = append(out, i)
			}
		default:
			scalars[x]++
			if scalars[x] == 2 {
				out = append(out, i)
			}
		}
	}
	return out, nil
}

func listMapDuplicates(fldPath *field.Path, s *Schema, l []any) field.ErrorList {
	for i, x := range l {
		if _, ok := x.(map[string]any); x != nil && !ok {
			return field.ErrorList{field.Invalid(fldPath.Index(i), x, "must be an object for an array of list-type map")}
		}
	}
	if len(l) <= 1 {
		return nil
	}
	if len(s.listMapKeys) == 1 {
		key := s.listMapKeys[0]
		keys := make([]any, 0, len(l))
		for _, x := range l {
			m, _ := x.(map[string]any)
			if v, ok := m[key]; ok {
				keys = append(keys, v)
			} else {
				keys = append(keys, unspecifiedKey{})
			}
		}
		nonUnique, err := nonUniqueIndices(fldPath, keys)
		if err != nil {
			return field.ErrorList{err}
		}
		var errs field.ErrorList
		for _, i := range nonUnique {
			if keys[i] == (unspecifiedKey{}) {
				errs = append(errs, field.Duplicate(fldPath.Index(i), map[string]any{}))
			} else {
				errs = append(errs, field.Duplicate(fldPath.Index(i), map[string]any{key: keys[i]}))
			}
		}
		return errs
	}
	keys := make([]any, 0, len(l))
	for _, x := range l {
		key := map[string]any{}
		if m, ok := x.(map[string]any); ok {
			for _, k := range s.listMapKeys {
				if v, ok := m[k]; ok {
					key[k] = v
				}
			}
		}
		keys = append(keys, key)
	}
	nonUnique, err := nonUniqueIndices(fldPath, keys)
	if err != nil {
		return field.ErrorList{err}
	}
	var errs field.ErrorList
	for _, i := range nonUnique {
		errs = append(errs, field.Duplicate(fldPath.Index(i), keys[i]))
	}
	return errs
}
