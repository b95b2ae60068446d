// Package objmeta applies the server-side rules for object metadata that
// kube-apiserver applies to every object on create and update (the generic
// registry's BeforeCreate/BeforeUpdate): system fields, generateName,
// generation, immutable fields, namespace and name agreement with the URL,
// and the status-subresource split. Objects are unstructured JSON maps.
package objmeta

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Object is an unstructured object's content.
type Object = map[string]any

// Meta returns obj's metadata map, creating it when absent.
func Meta(obj Object) map[string]any {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

// String returns metadata[key] when it is a string.
func String(obj Object, key string) string {
	m, _ := obj["metadata"].(map[string]any)
	s, _ := m[key].(string)
	return s
}

// Generation returns metadata.generation (0 when absent).
func Generation(obj Object) int64 {
	m, _ := obj["metadata"].(map[string]any)
	switch g := m["generation"].(type) {
	case int64:
		return g
	case float64:
		return int64(g)
	case int:
		return int64(g)
	}
	return 0
}

// Timestamp formats t as Kubernetes does in metadata (RFC 3339, seconds, UTC).
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// PrepareCreate sets the system fields of a new object, as kube-apiserver's
// BeforeCreate: a fresh uid and creationTimestamp, generation 1, no
// resourceVersion or deletion fields, and a name from generateName when the
// name is empty. When stripStatus is set (the CRD has a status subresource)
// .status is dropped.
func PrepareCreate(obj Object, now time.Time, stripStatus bool) {
	m := Meta(obj)
	delete(m, "resourceVersion")
	delete(m, "deletionTimestamp")
	delete(m, "deletionGracePeriodSeconds")
	delete(m, "selfLink")
	m["uid"] = string(uuid.NewUUID())
	m["creationTimestamp"] = Timestamp(now)
	m["generation"] = int64(1)
	if name, _ := m["name"].(string); name == "" {
		if gen, _ := m["generateName"].(string); gen != "" {
			m["name"] = GenerateName(gen)
		}
	}
	if stripStatus {
		delete(obj, "status")
	}
}

const (
	randomLength    = 5
	maxGeneratedLen = 63 // validation.DNS1123SubdomainMaxLength bound kept by upstream's generator
	nameAlphabet    = "bcdfghjklmnpqrstvwxz2456789"
)

// GenerateName returns base followed by five random characters, with base
// cut so that the result stays within 63 characters, as upstream's
// SimpleNameGenerator does.
func GenerateName(base string) string {
	if max := maxGeneratedLen - randomLength; len(base) > max {
		base = base[:max]
	}
	b := make([]byte, randomLength)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(nameAlphabet))))
		if err != nil {
			panic(err)
		}
		b[i] = nameAlphabet[n.Int64()]
	}
	return base + string(b)
}

// PrepareUpdate applies kube-apiserver's update rules to obj against the
// stored old object: uid, creationTimestamp, deletionTimestamp and
// deletionGracePeriodSeconds cannot change; generation is kept, and
// incremented when anything outside metadata changed.
//
// With hasStatus (the CRD has a status subresource) an update of the main
// resource keeps old's .status; an update of the "status" subresource keeps
// everything of old but .status (and managedFields).
func PrepareUpdate(obj, old Object, hasStatus bool, subresource string) Object {
	if subresource == "status" {
		out := deepCopy(old)
		if mf, ok := Meta(obj)["managedFields"]; ok {
			Meta(out)["managedFields"] = mf
		}
		if st, ok := obj["status"]; ok {
			out["status"] = st
		} else {
			delete(out, "status")
		}
		return out
	}
	m, om := Meta(obj), Meta(old)
	for _, k := range []string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		if v, ok := om[k]; ok {
			if k == "uid" {
				if u, _ := m[k].(string); u != "" {
					continue // a different uid is rejected by the validator (immutable field)
				}
			}
			m[k] = v
		} else if k != "uid" {
			delete(m, k)
		}
	}
	gen := Generation(old)
	if hasStatus {
		if st, ok := old["status"]; ok {
			obj["status"] = st
		} else {
			delete(obj, "status")
		}
	}
	if !reflect.DeepEqual(withoutMetadata(obj), withoutMetadata(old)) {
		gen++
	}
	m["generation"] = gen
	return obj
}

// CheckNameAndNamespace makes the object's name and namespace agree with the
// request URL: an empty namespace is filled from the URL (namespaced
// resources); a different one is a 400, as is a name that differs from the
// URL's (when urlName is set).
func CheckNameAndNamespace(obj Object, urlNamespace, urlName string, namespaced bool) error {
	m := Meta(obj)
	ns, _ := m["namespace"].(string)
	if namespaced {
		switch {
		case ns == "":
			m["namespace"] = urlNamespace
		case ns != urlNamespace:
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else if ns != "" {
		delete(m, "namespace")
	}
	if urlName != "" {
		name, _ := m["name"].(string)
		if name == "" {
			m["name"] = urlName
		} else if name != urlName {
			return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, urlName))
		}
	}
	return nil
}

// SetResourceVersion sets metadata.resourceVersion.
func SetResourceVersion(obj Object, rv string) { Meta(obj)["resourceVersion"] = rv }

// DeletionTimestamp returns metadata.deletionTimestamp as a time, if set.
func DeletionTimestamp(obj Object) (metav1.Time, bool) {
	u := unstructured.Unstructured{Object: obj}
	ts := u.GetDeletionTimestamp()
	if ts == nil {
		return metav1.Time{}, false
	}
	return *ts, true
}

func withoutMetadata(obj Object) Object {
	out := make(Object, len(obj))
	for k, v := range obj {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

func deepCopy(obj Object) Object { return runtime.DeepCopyJSON(obj) }
