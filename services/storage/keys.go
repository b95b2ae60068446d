package storage

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// keyRoot is the common prefix of every key the service stores.
const keyRoot = "/registry/"

// grouplessResource is a built-in resource kube-apiserver stores without
// a group segment: /registry/<plural>/[<namespace>/]<name>.
type grouplessResource struct {
	group      string
	namespaced bool
}

// coreResources are the built-in resources crdplane stores under
// kube-apiserver's layout without a group segment: core/v1 namespaces
// (/registry/namespaces/<name>) and the rbac.authorization.k8s.io ones
// (/registry/roles/<namespace>/<name>, /registry/clusterroles/<name>, ...).
// No CRD's group can take their place (a CRD group has a dot).
var coreResources = map[string]grouplessResource{
	"namespaces":          {},
	"roles":               {group: rbacGroup, namespaced: true},
	"rolebindings":        {group: rbacGroup, namespaced: true},
	"clusterroles":        {group: rbacGroup},
	"clusterrolebindings": {group: rbacGroup},
}

const rbacGroup = "rbac.authorization.k8s.io"

// isGroupless reports whether a key's first segment is a groupless
// built-in resource.
func isGroupless(segment string) bool {
	_, ok := coreResources[segment]
	return ok
}

// objectKey is a parsed object key:
// /registry/<group>/<plural>/[<namespace>/]<name>.
type objectKey struct {
	raw       string
	resource  schema.GroupResource
	namespace string
	name      string
}

// parseKey splits an object key into group, resource, namespace and name.
func parseKey(key string) (objectKey, error) {
	rest, ok := strings.CutPrefix(key, keyRoot)
	if !ok {
		return objectKey{}, badKey(key, "must start with "+keyRoot)
	}
	parts := strings.Split(rest, "/")
	for _, p := range parts {
		if p == "" {
			return objectKey{}, badKey(key, "has an empty segment")
		}
	}
	k := objectKey{raw: key}
	if gr, ok := coreResources[parts[0]]; ok {
		k.resource = schema.GroupResource{Group: gr.group, Resource: parts[0]}
		switch {
		case !gr.namespaced && len(parts) == 2:
			k.name = parts[1]
			return k, nil
		case gr.namespaced && len(parts) == 3:
			k.namespace, k.name = parts[1], parts[2]
			return k, nil
		case gr.namespaced:
			return objectKey{}, badKey(key, "must be "+keyRoot+parts[0]+"/<namespace>/<name>")
		}
		return objectKey{}, badKey(key, "must be "+keyRoot+parts[0]+"/<name>")
	}
	switch len(parts) {
	case 3:
		k.resource = schema.GroupResource{Group: parts[0], Resource: parts[1]}
		k.name = parts[2]
	case 4:
		k.resource = schema.GroupResource{Group: parts[0], Resource: parts[1]}
		k.namespace, k.name = parts[2], parts[3]
	default:
		return objectKey{}, badKey(key, "must be "+keyRoot+"<group>/<plural>/[<namespace>/]<name>")
	}
	return k, nil
}

// checkPrefix validates a collection prefix: /registry/<group>/<plural>/ or
// /registry/<group>/<plural>/<namespace>/.
func checkPrefix(prefix string) error {
	rest, ok := strings.CutPrefix(prefix, keyRoot)
	if !ok {
		return badKey(prefix, "must start with "+keyRoot)
	}
	if !strings.HasSuffix(rest, "/") {
		return badKey(prefix, `a collection prefix must end in "/"`)
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	if gr, ok := coreResources[parts[0]]; ok && (len(parts) == 1 || gr.namespaced && len(parts) == 2 && parts[1] != "") {
		return nil
	}
	if len(parts) < 2 || len(parts) > 3 || isGroupless(parts[0]) {
		return badKey(prefix, "must be "+keyRoot+"<group>/<plural>/[<namespace>/]")
	}
	for _, p := range parts {
		if p == "" {
			return badKey(prefix, "has an empty segment")
		}
	}
	return nil
}

// prefixResource returns the group and resource a valid prefix names.
func prefixResource(prefix string) schema.GroupResource {
	parts := strings.SplitN(strings.TrimPrefix(prefix, keyRoot), "/", 3)
	if gr, ok := coreResources[parts[0]]; ok {
		return schema.GroupResource{Group: gr.group, Resource: parts[0]}
	}
	if len(parts) < 2 {
		return schema.GroupResource{}
	}
	return schema.GroupResource{Group: parts[0], Resource: parts[1]}
}

func badKey(key, why string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("invalid storage key %q: %s", key, why))
}
