package cr

import (
	"fmt"
	"strings"

	"github.com/crdplane/crdplane/services/gateway/listing"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names and namespaces in request paths, as upstream v1.33 treats them
// (read back from upstream's apiextensions-apiserver).
//
// The path is split on "/" after the URL is decoded (request info: an
// encoded slash separates segments too, so ".../things/a%2Fb" is the
// subresource "b" of "a": 404 "a" not found; ".../things/a%2F" is "a").
// Neither the name nor the namespace is otherwise validated on the way in:
// a namespace that is no DNS label ("Bad_NS", "%00") lists nothing, and
// reads of a name in it find nothing. What does fail:
//
//   - a name that is not a valid path segment (".", "..", or one with "%"
//     or "/") on a request for one object: the registry's key function
//     (NamespaceKeyFunc, NoNamespaceKeyFunc) answers 400 `Name parameter
//     invalid: "..": may not be '..'`;
//   - a namespace "." or "..": the etcd3 store's prepareKey refuses the key
//     with a plain 500 `invalid key: "/<group>/<plural>/../<name>"` on what
//     reaches etcd (a get without resourceVersion, an update, a patch, a
//     delete, an exact list, a deletecollection); what the watch cache
//     serves (lists, watches, gets at a resourceVersion) finds nothing.

// checkObjectName is upstream's key function's check of a request's name.
func checkObjectName(name string) error {
	if name == "" {
		return apierrors.NewBadRequest("Name parameter required.")
	}
	if msgs := content.IsPathSegmentName(name); len(msgs) != 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("Name parameter invalid: %q: %s", name, strings.Join(msgs, ";")))
	}
	return nil
}

// checkStorageKey is upstream's etcd3 prepareKey of r's key for the
// namespace and name (name "" for a collection): a key with a "." or ".."
// segment is a plain 500.
func checkStorageKey(r *resource, namespace, name string) error {
	key := "/" + r.group + "/" + r.plural
	if namespace != "" {
		key += "/" + namespace
	}
	if name != "" {
		key += "/" + name
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return listing.PlainError(fmt.Errorf("invalid key: %q", key))
		}
	}
	return nil
}

// checkObjectPath is the registry's check of a request for one object that
// reaches etcd: its name, then its key.
func checkObjectPath(r *resource, namespace, name string) error {
	if err := checkObjectName(name); err != nil {
		return err
	}
	return checkStorageKey(r, namespace, name)
}

// listReadsEtcd reports whether upstream serves a list from etcd rather
// than from its watch cache (delegator.ShouldDelegateList with v1.33's
// default gates): an exact resourceVersion, a legacy paginated one, a
// continue token.
func listReadsEtcd(opts *metainternalversion.ListOptions) bool {
	switch opts.ResourceVersionMatch {
	case metav1.ResourceVersionMatchExact:
		return true
	case "":
		return opts.Continue != "" || opts.Limit > 0 && opts.ResourceVersion != "" && opts.ResourceVersion != "0"
	}
	return false
}
