package structural

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/jsonenc"
)

// ObjectMetaOf returns obj's metadata as a metav1.ObjectMeta (empty when
// absent), as upstream's custom resource validation reads it.
func ObjectMetaOf(obj map[string]any) (*metav1.ObjectMeta, error) {
	raw, ok := obj["metadata"]
	if !ok || raw == nil {
		return &metav1.ObjectMeta{}, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, &metaTypeError{raw: raw}
	}
	if meta, ok := canonicalObjectMeta(m, true); ok {
		return meta, nil
	}
	meta := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

type metaTypeError struct{ raw any }

func (e *metaTypeError) Error() string {
	return "expected map[string]interface{}, got " + typeName(e.raw)
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case int64:
		return "int64"
	case float64:
		return "float64"
	case []any:
		return "[]interface {}"
	case nil:
		return "<nil>"
	}
	return "unknown"
}

// canonicalObjectMeta is the fast path of the metadata round trip: when m
// holds only ObjectMeta fields, each of its JSON type, non-empty (omitempty
// fields would be dropped) and, for timestamps, already in the canonical
// RFC 3339 form, the round trip through metav1.ObjectMeta would give m back
// unchanged; it returns the decoded ObjectMeta and true. Anything else
// returns false and the caller does the real round trip. withFieldsV1
// fills the managedFields entries' FieldsV1 (their JSON), which callers
// that only validate the metadata or check it is canonical do not need.
func canonicalObjectMeta(m map[string]any, withFieldsV1 bool) (*metav1.ObjectMeta, bool) {
	meta := &metav1.ObjectMeta{}
	for k, v := range m {
		switch k {
		case "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion":
			s, ok := v.(string)
			if !ok || s == "" {
				return nil, false
			}
			switch k {
			case "name":
				meta.Name = s
			case "generateName":
				meta.GenerateName = s
			case "namespace":
				meta.Namespace = s
			case "selfLink":
				meta.SelfLink = s
			case "uid":
				meta.UID = types.UID(s)
			case "resourceVersion":
				meta.ResourceVersion = s
			}
		case "generation":
			n, ok := v.(int64)
			if !ok || n == 0 {
				return nil, false
			}
			meta.Generation = n
		case "creationTimestamp", "deletionTimestamp":
			s, ok := v.(string)
			if !ok {
				return nil, false
			}
			t, ok := canonicalTime(s)
			if !ok {
				return nil, false
			}
			if k == "creationTimestamp" {
				meta.CreationTimestamp = t
			} else {
				meta.DeletionTimestamp = &t
			}
		case "deletionGracePeriodSeconds":
			n, ok := v.(int64)
			if !ok {
				return nil, false
			}
			meta.DeletionGracePeriodSeconds = &n
		case "labels", "annotations":
			sm, ok := stringMap(v)
			if !ok {
				return nil, false
			}
			if k == "labels" {
				meta.Labels = sm
			} else {
				meta.Annotations = sm
			}
		case "finalizers":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			meta.Finalizers = make([]string, len(l))
			for i, f := range l {
				s, ok := f.(string)
				if !ok {
					return nil, false
				}
				meta.Finalizers[i] = s
			}
		case "managedFields":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			meta.ManagedFields = make([]metav1.ManagedFieldsEntry, len(l))
			for i, e := range l {
				if !canonicalManagedFieldsEntry(e, &meta.ManagedFields[i], withFieldsV1) {
					return nil, false
				}
			}
		case "ownerReferences":
			l, ok := v.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			meta.OwnerReferences = make([]metav1.OwnerReference, len(l))
			for i, r := range l {
				if !canonicalOwnerReference(r, &meta.OwnerReferences[i]) {
					return nil, false
				}
			}
		default:
			return nil, false
		}
	}
	return meta, true
}

func canonicalTime(s string) (metav1.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.IsZero() {
		return metav1.Time{}, false
	}
	var buf [len(time.RFC3339) + 8]byte
	if string(t.UTC().AppendFormat(buf[:0], time.RFC3339)) != s {
		return metav1.Time{}, false
	}
	return metav1.NewTime(t.Local()), true
}

func stringMap(v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, false
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

func canonicalOwnerReference(v any, ref *metav1.OwnerReference) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	required := 0
	for k, e := range m {
		switch k {
		case "apiVersion", "kind", "name", "uid":
			s, ok := e.(string)
			if !ok {
				return false
			}
			required++
			switch k {
			case "apiVersion":
				ref.APIVersion = s
			case "kind":
				ref.Kind = s
			case "name":
				ref.Name = s
			case "uid":
				ref.UID = types.UID(s)
			}
		case "controller", "blockOwnerDeletion":
			b, ok := e.(bool)
			if !ok {
				return false
			}
			if k == "controller" {
				ref.Controller = &b
			} else {
				ref.BlockOwnerDeletion = &b
			}
		default:
			return false
		}
	}
	// apiVersion, kind, name and uid are not omitempty: the round trip
	// writes them even when absent.
	return required == 4
}

// canonicalManagedFieldsEntry decodes a managedFields entry that the round
// trip through metav1.ManagedFieldsEntry would give back unchanged: its
// string fields non-empty (all are omitempty), its time canonical, its
// fieldsV1 a tree of objects only (what field sets are; the round trip
// keeps fieldsV1 as raw JSON, so only values whose JSON decoding is
// themselves qualify). Without withFieldsV1 the entry's FieldsV1 is left
// empty (its Raw is what only a write-back would need).
func canonicalManagedFieldsEntry(v any, e *metav1.ManagedFieldsEntry, withFieldsV1 bool) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k, f := range m {
		switch k {
		case "manager", "operation", "apiVersion", "fieldsType", "subresource":
			s, ok := f.(string)
			if !ok || s == "" {
				return false
			}
			switch k {
			case "manager":
				e.Manager = s
			case "operation":
				e.Operation = metav1.ManagedFieldsOperationType(s)
			case "apiVersion":
				e.APIVersion = s
			case "fieldsType":
				e.FieldsType = s
			case "subresource":
				e.Subresource = s
			}
		case "time":
			s, ok := f.(string)
			if !ok {
				return false
			}
			t, ok := canonicalTime(s)
			if !ok {
				return false
			}
			e.Time = &t
		case "fieldsV1":
			fm, ok := f.(map[string]any)
			if !ok || !objectTree(fm) {
				return false
			}
			if withFieldsV1 {
				// a tree of objects: jsonenc cannot fail on it
				raw, _ := jsonenc.Marshal(fm)
				e.FieldsV1 = metav1.NewFieldsV1(string(raw))
			} else {
				e.FieldsV1 = &metav1.FieldsV1{}
			}
		default:
			return false
		}
	}
	return true
}

// objectTree reports whether m holds only objects, at every depth.
func objectTree(m map[string]any) bool {
	for _, v := range m {
		c, ok := v.(map[string]any)
		if !ok || !objectTree(c) {
			return false
		}
	}
	return true
}
