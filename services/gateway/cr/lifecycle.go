package cr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objmeta"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// namespaceLifecycle is kube-apiserver's NamespaceLifecycle admission for
// custom resources (--enable-namespace-lifecycle; off by default, as the
// standalone apiextensions-apiserver has none): a create in a namespace
// that does not exist is 404 `namespaces "<ns>" not found`, one in a
// namespace being deleted is 403 with the NamespaceTerminating cause. It
// runs, as upstream's mutating admission does, after the body is decoded
// (a body that does not decode is a 400 wherever it is sent) and before
// the object's system metadata is filled in.
type namespaceLifecycle struct {
	namespaces registryv1.NamespaceServiceClient
}

// admitCreate checks a create of a custom resource of r in namespace ns;
// obj is the decoded body, for the name the 403 gives (admission's
// NewForbidden: the object's name, else its generateName, else
// "Unknown"). nil admits it.
func (l *namespaceLifecycle) admitCreate(ctx context.Context, r *resource, ns string, obj object) error {
	if l == nil || ns == "" || !r.namespaced {
		return nil
	}
	resp, err := l.namespaces.Get(ctx, &registryv1.GetRequest{Name: ns})
	if err != nil {
		if s := kstatus.FromError(err); s.Code == http.StatusNotFound {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
		}
		return err
	}
	var nsObj corev1.Namespace
	if err := json.Unmarshal(resp.GetObject(), &nsObj); err != nil {
		return apierrors.NewInternalError(err)
	}
	if nsObj.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	name := objmeta.String(obj, "name")
	if name == "" {
		name = objmeta.String(obj, "generateName")
	}
	if name == "" {
		name = "Unknown"
	}
	forbidden := apierrors.NewForbidden(r.groupResource(), name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	forbidden.ErrStatus.Details.Causes = append(forbidden.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", ns),
		Field:   "metadata.namespace",
	})
	return forbidden
}
