package structural

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Prune removes the fields of obj (a whole custom resource) that s does not
// specify, and then the null values of non-nullable fields that have no
// default (those with a default are defaulted by Default).
//
// As upstream:
//   - apiVersion, kind and metadata are kept at the root and in
//     x-kubernetes-embedded-resource objects (metadata's own fields are
//     normalised by Normalize and CoerceMetadata, as upstream does with a
//     round trip through metav1.ObjectMeta);
//   - below x-kubernetes-preserve-unknown-fields nothing is pruned, except
//     under properties and additionalProperties specified there, where
//     pruning starts again.
//
// It returns the paths of the pruned unknown fields (e.g.
// "spec.someRandomField", "spec.list[0].x"), sorted. With a schema compiled
// WithPreserveUnknownFields it does nothing.
func Prune(obj map[string]any, s *Schema) []string {
	if s == nil {
		s = &Schema{}
	}
	if s.preserveUnknownFields {
		return nil
	}
	p := pruner{}
	p.pruneRoot(obj, s)
	pruneNulls(obj, s)
	slices.Sort(p.unknown)
	return p.unknown
}

// pruneRoot prunes obj as a resource root: the root behaves as an embedded
// resource whatever the schema says.
func (p *pruner) pruneRoot(obj map[string]any, s *Schema) {
	if !s.embeddedResource {
		c := *s
		c.embeddedResource = true
		s = &c
	}
	p.prune(obj, s)
}

type pruner struct {
	path    []pruneSeg
	unknown []string
}

// pruneSeg is a step of the pruning path: a field name or an index.
type pruneSeg struct {
	key   string
	index int // -1 for a field
}

func (p *pruner) push(key string) { p.path = append(p.path, pruneSeg{key: key, index: -1}) }

func (p *pruner) pushIndex(i int) { p.path = append(p.path, pruneSeg{index: i}) }

func (p *pruner) pop() { p.path = p.path[:len(p.path)-1] }

// record notes the unknown field key at the current path, rendered as
// upstream: fields joined with ".", indices as "[i]".
func (p *pruner) record(key string) {
	var b strings.Builder
	for i, seg := range p.path {
		if seg.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(seg.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg.key)
	}
	if len(p.path) > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
	p.unknown = append(p.unknown, b.String())
}

func isMetaField(k string) bool { return k == "apiVersion" || k == "kind" || k == "metadata" }

// prune is upstream's pruning of x against s (nil: nothing is specified).
func (p *pruner) prune(x any, s *Schema) {
	if s != nil && s.preserveUnknown {
		p.skipPrune(x, s)
		return
	}
	switch x := x.(type) {
	case map[string]any:
		if s == nil {
			for k := range x {
				p.record(k)
				delete(x, k)
			}
			return
		}
		for k, v := range x {
			if s.embeddedResource && isMetaField(k) {
				continue
			}
			if prop, ok := s.properties[k]; ok {
				p.push(k)
				p.prune(v, prop)
				p.pop()
			} else if s.hasAdditional {
				p.push(k)
				p.prune(v, s.additionalProperties)
				p.pop()
			} else {
				if !isMetaField(k) || len(p.path) > 0 {
					p.record(k)
				}
				delete(x, k)
			}
		}
	case []any:
		var items *Schema
		if s != nil {
			items = s.items
		}
		for i, v := range x {
			p.pushIndex(i)
			p.prune(v, items)
			p.pop()
		}
	}
}

// skipPrune keeps unknown fields of x but prunes below specified
// properties and additionalProperties.
func (p *pruner) skipPrune(x any, s *Schema) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if s.embeddedResource && isMetaField(k) {
				continue
			}
			if prop, ok := s.properties[k]; ok {
				p.push(k)
				p.prune(v, prop)
				p.pop()
			} else if s.hasAdditional {
				p.push(k)
				p.prune(v, s.additionalProperties)
				p.pop()
			}
		}
	case []any:
		for i, v := range x {
			p.pushIndex(i)
			p.skipPrune(v, s.items)
			p.pop()
		}
	}
}

// fieldSchema is the schema of field k of an object with schema s.
func (s *Schema) fieldSchema(k string) *Schema {
	if s == nil {
		return nil
	}
	if prop, ok := s.properties[k]; ok {
		return prop
	}
	return s.additionalProperties
}

// pruneNulls removes null values of non-nullable fields without a default.
func pruneNulls(x any, s *Schema) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			fs := s.fieldSchema(k)
			if v == nil {
				if fs != nil && !fs.nullable && !fs.hasDefault {
					delete(x, k)
				}
				continue
			}
			pruneNulls(v, fs)
		}
	case []any:
		var items *Schema
		if s != nil {
			items = s.items
		}
		for _, v := range x {
			pruneNulls(v, items)
		}
	}
}

// step is one step from the root to a schema node: a property (or "*" for
// additionalProperties) or an array index.
type step struct {
	key   string
	index bool
}

// pruneDefaults prunes every default value as upstream's PruneDefaults: the
// default is placed in an otherwise empty object at its path from the root,
// coerced and pruned as a whole resource, and read back.
func pruneDefaults(root, s *Schema, path []step) error {
	if s.hasDefault {
		obj, err := surround(s.def, path)
		if err != nil {
			return fmt.Errorf("failed to prune default value: %w", err)
		}
		c := coercer{dropInvalid: true}
		if ferr := c.coerceRoot(obj, root); ferr != nil {
			return fmt.Errorf("failed to prune default value: %w", ferr)
		}
		var p pruner
		p.pruneRoot(obj, root)
		v, found, err := access(obj, path)
		if err != nil {
			return fmt.Errorf("failed to prune default value: %w", err)
		}
		if !found || v == nil {
			s.hasDefault, s.def = false, nil
		} else {
			s.def = v
		}
	}
	n := len(path)
	if s.additionalProperties != nil {
		if err := pruneDefaults(root, s.additionalProperties, append(path[:n:n], step{key: "*"})); err != nil {
			return err
		}
	}
	if s.items != nil {
		if err := pruneDefaults(root, s.items, append(path[:n:n], step{index: true})); err != nil {
			return err
		}
	}
	for _, name := range s.propertyNames {
		if err := pruneDefaults(root, s.properties[name], append(path[:n:n], step{key: name})); err != nil {
			return err
		}
	}
	return nil
}

func surround(x any, path []step) (map[string]any, error) {
	x = deepCopyJSON(x)
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].index {
			x = []any{x}
		} else {
			x = map[string]any{path[i].key: x}
		}
	}
	obj, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("object root default value must be of object type")
	}
	return obj, nil
}

func access(obj map[string]any, path []step) (any, bool, error) {
	var x any = obj
	for _, st := range path {
		if st.index {
			l, ok := x.([]any)
			if !ok {
				return nil, false, fmt.Errorf("[] must be of array type")
			}
			if len(l) == 0 {
				return nil, false, nil
			}
			x = l[0]
			continue
		}
		m, ok := x.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf(".%s must be of object type", st.key)
		}
		v, found := m[st.key]
		if !found {
			return nil, false, nil
		}
		x = v
	}
	return x, true, nil
}
