package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// namespaceLifecycle is kube-apiserver's NamespaceLifecycle admission for
// custom resources (--enable-namespace-lifecycle; off by default, as the
// standalone apiextensions-apiserver has none): a create in a namespace
// that does not exist is 404 `namespaces "<ns>" not found`, one in a
// namespace being deleted is 403 with the NamespaceTerminating cause.
type namespaceLifecycle struct {
	namespaces registryv1.NamespaceServiceClient
}

// admitCreate checks a create of a custom resource (ri) whose resource
// (gr) resolved; nil admits it. The request body is left readable.
func (l *namespaceLifecycle) admitCreate(r *http.Request, ri requestInfo, gr schema.GroupResource, namespaced bool) error {
	if l == nil || ri.namespace == "" || !namespaced {
		return nil
	}
	resp, err := l.namespaces.Get(r.Context(), &registryv1.GetRequest{Name: ri.namespace})
	if err != nil {
		if s := kstatus.FromError(err); s.Code == http.StatusNotFound {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), ri.namespace)
		}
		return err
	}
	var ns corev1.Namespace
	if err := json.Unmarshal(resp.GetObject(), &ns); err != nil {
		return apierrors.NewInternalError(err)
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		return nil
	}
	// admission.NewForbidden: the object's name, else its generateName,
	// else "Unknown"
	name := "Unknown"
	if r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var obj struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(body, &obj) == nil {
			switch {
			case obj.Metadata.Name != "":
				name = obj.Metadata.Name
			case obj.Metadata.GenerateName != "":
				name = obj.Metadata.GenerateName
			}
		}
	}
	forbidden := apierrors.NewForbidden(gr, name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ri.namespace))
	forbidden.ErrStatus.Details.Causes = append(forbidden.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", ri.namespace),
		Field:   "metadata.namespace",
	})
	return forbidden
}

// admitLifecycle runs namespaceLifecycle on a create of a custom resource
// that resolves (anything else is left to the handlers' own answers);
// false when it answered the request.
func (k *kubeRouter) admitLifecycle(w http.ResponseWriter, r *http.Request, ri requestInfo) bool {
	if k.lifecycle == nil || ri.verb != "create" || ri.namespace == "" || ri.subresource != "" {
		return true
	}
	gr, namespaced, err := k.api.crAPI.Scope(r.Context(), ri.group, ri.version, ri.resource, ri.namespace)
	if err != nil {
		return true
	}
	if err := k.lifecycle.admitCreate(r, ri, gr, namespaced); err != nil {
		httpx.WriteError(w, r, err)
		return false
	}
	return true
}
