package structural

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// Normalize applies to a custom resource what upstream's decoder applies
// before defaulting, in upstream's order:
//
//  1. metadata at the root is round-tripped through metav1.ObjectMeta
//     (unknown fields dropped, timestamps canonical, empty fields omitted);
//  2. Prune (unless the schema was compiled WithPreserveUnknownFields);
//  3. metadata of x-kubernetes-embedded-resource objects is round-tripped
//     through metav1.ObjectMeta, and their apiVersion and kind must be
//     strings.
//
// With dropInvalid (upstream does so when reading from storage) malformed
// metadata fields are dropped; otherwise they are an error, which upstream
// answers with 400 Bad Request.
//
// It returns the paths of the unknown fields it dropped, in upstream's order
// (root metadata, then pruned fields, then embedded metadata), as upstream
// reports them in `unknown field "<path>"` warnings.
func Normalize(obj map[string]any, s *Schema, dropInvalid bool) ([]string, error) {
	if s == nil {
		s = &Schema{}
	}
	var unknown []string
	meta, found, canonical, metaUnknown, err := getObjectMeta(obj, dropInvalid, "")
	if err != nil {
		return nil, err
	}
	unknown = append(unknown, metaUnknown...)
	unknown = append(unknown, Prune(obj, s)...)
	paths, ferr := CoerceMetadata(obj, s, dropInvalid)
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, paths...)
	if found && !canonical {
		if err := setObjectMeta(obj, meta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// CoerceMetadata normalises the metadata of the embedded resources
// (x-kubernetes-embedded-resource) below the root of obj: apiVersion and
// kind must be strings, metadata is round-tripped through
// metav1.ObjectMeta. With dropInvalid, malformed fields are dropped instead
// of failing. It returns the dropped unknown metadata fields, sorted.
func CoerceMetadata(obj map[string]any, s *Schema, dropInvalid bool) ([]string, error) {
	if s == nil {
		return nil, nil
	}
	c := coercer{dropInvalid: dropInvalid, track: true}
	if err := c.coerce(obj, s); err != nil {
		return nil, err
	}
	slices.Sort(c.unknown)
	return c.unknown, nil
}

type coercer struct {
	dropInvalid bool
	track       bool
	base        *field.Path // prefix of error paths (nil: the object's root)
	path        []string    // field.Path rendering: "name", ".name", "[key]", "[0]"
	unknown     []string
}

func (c *coercer) pathString() string { return strings.Join(c.path, "") }

func (c *coercer) child(k string) {
	if len(c.path) > 0 {
		c.path = append(c.path, "."+k)
	} else {
		c.path = append(c.path, k)
	}
}

func (c *coercer) key(k string) { c.path = append(c.path, "["+k+"]") }

func (c *coercer) index(i int) { c.path = append(c.path, "["+strconv.Itoa(i)+"]") }

func (c *coercer) pop() { c.path = c.path[:len(c.path)-1] }

func (c *coercer) fieldPath(k string) *field.Path {
	if len(c.path) == 0 {
		return c.base.Child(k)
	}
	if c.base == nil {
		return field.NewPath(c.pathString()).Child(k)
	}
	p := c.base
	for _, seg := range c.path {
		switch {
		case strings.HasPrefix(seg, "["):
			p = p.Key(seg[1 : len(seg)-1])
		default:
			p = p.Child(strings.TrimPrefix(seg, "."))
		}
	}
	return p.Child(k)
}

// coerceRoot coerces obj as a resource root (the root is treated as an
// embedded resource).
func (c *coercer) coerceRoot(obj map[string]any, s *Schema) error {
	if !s.embeddedResource {
		cp := *s
		cp.embeddedResource = true
		s = &cp
	}
	return c.coerce(obj, s)
}

func (c *coercer) coerce(x any, s *Schema) error {
	if s == nil {
		return nil
	}
	switch x := x.(type) {
	case map[string]any:
		if s.embeddedResource {
			for _, k := range [...]string{"apiVersion", "kind"} {
				v, ok := x[k]
				if !ok {
					continue
				}
				if _, isString := v.(string); !isString {
					if !c.dropInvalid {
						return field.Invalid(c.fieldPath(k), v, "must be a string")
					}
					delete(x, k)
				}
			}
			if v, ok := x["metadata"]; ok {
				meta, found, canonical, unknown, err := getObjectMeta(x, c.dropInvalid, c.pathString())
				c.unknown = append(c.unknown, unknown...)
				if err != nil {
					if !c.dropInvalid {
						return field.Invalid(c.fieldPath("metadata"), v, err.Error())
					}
				} else if found && !canonical {
					if err := setObjectMeta(x, meta); err != nil {
						return field.Invalid(c.fieldPath("metadata"), v, err.Error())
					}
				}
			}
		}
		for _, k := range s.propertyNames {
			prop := s.properties[k]
			v, ok := x[k]
			if !ok || !prop.hasEmbedded() {
				continue
			}
			c.child(k)
			err := c.coerce(v, prop)
			c.pop()
			if err != nil {
				return err
			}
		}
		if s.additionalProperties.hasEmbedded() {
			for _, k := range sortedKeys(x) {
				if _, isProp := s.properties[k]; isProp {
					continue
				}
				c.key(k)
				err := c.coerce(x[k], s.additionalProperties)
				c.pop()
				if err != nil {
					return err
				}
			}
		}
	case []any:
		if s.items == nil || !s.items.hasEmbedded() {
			return nil
		}
		for i, v := range x {
			c.index(i)
			err := c.coerce(v, s.items)
			c.pop()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// hasEmbedded reports whether s or a node below it (through properties,
// additionalProperties or items) is an embedded resource.
func (s *Schema) hasEmbedded() bool { return s != nil && s.embeddedBelow }

// getObjectMeta decodes obj["metadata"] as upstream's
// GetObjectMetaWithOptions: a strict JSON round trip into
// metav1.ObjectMeta, recording unknown fields (prefixed with
// parent.metadata); with dropInvalid, a field-by-field best effort when the
// whole does not decode.
//
// canonical reports that obj["metadata"] is already what the round trip
// would write back (a fast path that skips the JSON round trip; meta's
// managedFields entries then have an empty FieldsV1: its callers validate
// meta or write it back only when not canonical).
func getObjectMeta(obj map[string]any, dropInvalid bool, parent string) (meta *metav1.ObjectMeta, found, canonical bool, unknown []string, err error) {
	metadata, found := obj["metadata"]
	if !found {
		return nil, false, false, nil, nil
	}
	if m, ok := metadata.(map[string]any); ok {
		if meta, ok := canonicalObjectMeta(m, false); ok {
			return meta, true, true, nil, nil
		}
	}
	meta, found, unknown, err = decodeObjectMeta(metadata, dropInvalid, parent)
	return meta, found, false, unknown, err
}

func decodeObjectMeta(metadata any, dropInvalid bool, parent string) (*metav1.ObjectMeta, bool, []string, error) {
	prefix := "metadata"
	if parent != "" {
		prefix = parent + ".metadata"
	}
	raw, err := utiljson.Marshal(metadata)
	if err != nil {
		return nil, false, nil, err
	}
	meta := &metav1.ObjectMeta{}
	strictErrs, err := kjson.UnmarshalStrict(raw, meta)
	if err == nil {
		return meta, true, unknownMetaPaths(prefix, strictErrs), nil
	}
	if !dropInvalid {
		return nil, true, nil, err
	}
	m, ok := metadata.(map[string]any)
	if !ok {
		return nil, false, nil, fmt.Errorf("invalid metadata: expected object, got %T", metadata)
	}
	acc := &metav1.ObjectMeta{}
	var unknown []string
	for _, k := range sortedKeys(m) {
		single, err := utiljson.Marshal(map[string]any{k: m[k]})
		if err != nil {
			continue
		}
		if utiljson.Unmarshal(single, &metav1.ObjectMeta{}) != nil {
			continue
		}
		strictErrs, _ := kjson.UnmarshalStrict(single, acc)
		unknown = append(unknown, unknownMetaPaths(prefix, strictErrs)...)
	}
	return acc, true, unknown, nil
}

func unknownMetaPaths(prefix string, strictErrs []error) []string {
	var out []string
	for _, e := range strictErrs {
		if fe, ok := e.(kjson.FieldError); ok {
			out = append(out, prefix+"."+fe.FieldPath())
		}
	}
	return out
}

// setObjectMeta writes meta back as obj["metadata"]. A zero
// creationTimestamp is left out (upstream writes null there until the
// object is created).
func setObjectMeta(obj map[string]any, meta *metav1.ObjectMeta) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(meta)
	if err != nil {
		return err
	}
	if meta.CreationTimestamp.IsZero() {
		delete(u, "creationTimestamp")
	}
	obj["metadata"] = u
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
