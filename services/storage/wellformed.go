package storage

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// maxNameLength bounds an object's name: every Kubernetes name is a DNS
// subdomain (253 characters) or shorter.
const maxNameLength = validation.DNS1123SubdomainMaxLength

// checkWrite refuses an object that a write would store at k unless it is
// well formed, whoever the caller: a JSON object (checked before) whose
// apiVersion is a string naming a group version, whose kind is a non-empty
// string, and whose metadata is an object that decodes as ObjectMeta (every
// field of its type), naming the key's object: its name (non-empty, at
// most 253 characters, a valid path segment) and namespace (a DNS label,
// or none for a cluster-scoped key) are the key's. What it refuses is a 400
// (gRPC InvalidArgument) saying why.
func checkWrite(k objectKey, obj []byte) error {
	var m [3]jsonscan.Member
	if err := jsonscan.FindEach(obj, jsonscan.SkipSpace(obj, 0), readMembers, m[:]); err != nil {
		return errBadObject(err)
	}
	apiVersion, kind, meta := m[0].Value(obj), m[1].Value(obj), m[2].Value(obj)
	bad := func(format string, args ...any) error {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid object for storage key %q: ", k.raw) + fmt.Sprintf(format, args...))
	}
	v, ok := jsonscan.String(apiVersion)
	switch {
	case len(apiVersion) == 0:
		return bad("apiVersion: Required value")
	case !ok:
		return bad("apiVersion: must be a string, not %s", jsonType(apiVersion))
	case v == "":
		return bad("apiVersion: Required value")
	}
	if _, err := schema.ParseGroupVersion(v); err != nil {
		return bad("apiVersion: %v", err)
	}
	kd, ok := jsonscan.String(kind)
	switch {
	case len(kind) == 0:
		return bad("kind: Required value")
	case !ok:
		return bad("kind: must be a string, not %s", jsonType(kind))
	case kd == "":
		return bad("kind: Required value")
	}
	if len(meta) == 0 {
		return bad("metadata: Required value")
	}
	if meta[0] != '{' {
		return bad("metadata: must be an object, not %s", jsonType(meta))
	}
	var om metav1.ObjectMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(meta, &om); err != nil {
		return bad("metadata: %v", err)
	}
	if err := checkName(k, om.Name); err != nil {
		return bad("%v", err)
	}
	if om.Namespace != k.namespace {
		if k.namespace == "" {
			return bad("metadata.namespace: must be empty for a cluster-scoped key, not %q", om.Namespace)
		}
		return bad("metadata.namespace: %q does not match the key's namespace %q", om.Namespace, k.namespace)
	}
	if k.namespace != "" {
		if msgs := validation.IsDNS1123Label(k.namespace); len(msgs) > 0 {
			return bad("metadata.namespace: %q: %s", k.namespace, strings.Join(msgs, "; "))
		}
	}
	return nil
}

func checkName(k objectKey, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("metadata.name: Required value")
	case len(name) > maxNameLength:
		return fmt.Errorf("metadata.name: must be no more than %d characters", maxNameLength)
	}
	if msgs := content.IsPathSegmentName(name); len(msgs) > 0 {
		return fmt.Errorf("metadata.name: %q: %s", name, strings.Join(msgs, "; "))
	}
	if name != k.name {
		return fmt.Errorf("metadata.name: %q does not match the key's name %q", name, k.name)
	}
	return nil
}

// jsonType names the type of a raw JSON value.
func jsonType(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
