package rbac

import (
	"context"
	"encoding/json"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/crdplane/crdplane/pkg/kstatus"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/rbacauthz"
)

// escalationApplies reports whether a write of the caller is checked for
// escalation: kube-apiserver exempts system:masters (and a server without
// authentication has no caller to check).
func (s *Server) escalationApplies(ctx context.Context) bool {
	u, ok := httpx.UserFrom(ctx)
	return ok && u != nil && s.policy != nil && !slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

// authorized asks the authorizers' chain for a verb on an RBAC resource.
func (s *Server) authorized(ctx context.Context, u user.Info, verb, group, resource, namespace, name string) bool {
	if s.authz == nil {
		return true
	}
	d, _, _ := s.authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, APIVersion: "*",
		Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true})
	return d == authorizer.DecisionAllow
}

// readRules reads the rules of a role from the registry.
func (s *Server) readRules(ctx context.Context, resource, namespace, name string) ([]rbacv1.PolicyRule, error) {
	if resource == "clusterroles" {
		namespace = ""
	}
	resp, err := s.rbac.Get(ctx, &registryv1.RBACServiceGetRequest{Target: &registryv1.RBACTarget{Resource: resource, Namespace: namespace},
		Request: &registryv1.GetRequest{Name: name}})
	if err != nil {
		return nil, &apierrors.StatusError{ErrStatus: *kstatus.FromError(err)}
	}
	var role rbacObject
	if err := json.Unmarshal(resp.GetObject(), &role); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return role.Rules, nil
}

// rbacObject is what the escalation checks read of a written object.
type rbacObject struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Rules           []rbacv1.PolicyRule     `json:"rules"`
	AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
	RoleRef         rbacv1.RoleRef          `json:"roleRef"`
}

// checkEscalation is kube-apiserver's escalation check of an RBAC write
// (pkg/registry/rbac: the policy-based storage of each kind):
//   - a Role or ClusterRole is written by a caller with the escalate verb
//     on it, or who holds every permission it grants (an aggregated
//     ClusterRole: every permission);
//   - a RoleBinding or ClusterRoleBinding is written by a caller with the
//     bind verb on the role it references, or who holds every permission
//     of that role.
//
// Anything else is upstream's 403, the missing rules in its message.
func (s *Server) checkEscalation(ctx context.Context, k kind, namespace string, body []byte) error {
	if k.Group != Group || !s.escalationApplies(ctx) {
		return nil
	}
	u, _ := httpx.UserFrom(ctx)
	var obj rbacObject
	if err := json.Unmarshal(body, &obj); err != nil {
		// the registry words the decoding error
		return nil
	}
	gr := schema.GroupResource{Group: Group, Resource: k.Resource}
	name := obj.Metadata.Name
	policy := s.policy()
	switch k.Resource {
	case "roles", "clusterroles":
		if s.authorized(ctx, u, "escalate", Group, k.Resource, namespace, name) {
			return nil
		}
		rules := obj.Rules
		if obj.AggregationRule != nil && len(obj.AggregationRule.ClusterRoleSelectors) > 0 {
			rules = rbacauthz.FullAuthority
		}
		if err := rbacauthz.ConfirmNoEscalation(policy, u, namespace, rules); err != nil {
			return apierrors.NewForbidden(gr, name, err)
		}
		return nil
	}
	ref := obj.RoleRef
	if ref.APIGroup == "" {
		ref.APIGroup = Group
	}
	resource := ""
	switch ref.Kind {
	case "Role":
		resource = "roles"
	case "ClusterRole":
		resource = "clusterroles"
	}
	if resource != "" && s.authorized(ctx, u, "bind", ref.APIGroup, resource, namespace, ref.Name) {
		return nil
	}
	rules, err := policy.RoleRules(ref, namespace)
	if rbacauthz.IsNotFound(err) && resource != "" {
		// upstream reads the role from storage: one the cache has not
		// seen yet may exist (and the error names the plural resource)
		rules, err = s.readRules(ctx, resource, namespace, ref.Name)
	}
	if err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	if err := rbacauthz.ConfirmNoEscalation(policy, u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// checkUpdateEscalation is checkEscalation for an update (PUT, or a
// patch's result) of the object name: kube-apiserver exempts an update
// that changes only what the garbage collector writes (ownerReferences and
// finalizers), so that the GC and a user removing a finalizer need no
// escalate or bind permission. The stored object is read only when the
// check would refuse.
func (s *Server) checkUpdateEscalation(ctx context.Context, k kind, t *registryv1.RBACTarget, name string, body []byte) error {
	err := s.checkEscalation(ctx, k, t.GetNamespace(), body)
	if err == nil {
		return nil
	}
	resp, gerr := s.rbac.Get(ctx, &registryv1.RBACServiceGetRequest{Target: t, Request: &registryv1.GetRequest{Name: name}})
	if gerr != nil || !onlyGCFieldsChange(k, body, resp.GetObject()) {
		return err
	}
	return nil
}

// onlyGCFieldsChange is upstream's rbac IsOnlyMutatingGCFields: the new
// object equals the old one once its ownerReferences, finalizers, selfLink
// and managedFields are set to the old one's (semantic equality: nil and
// empty are the same).
func onlyGCFieldsChange(k kind, newBody, oldBody []byte) bool {
	newObj, oldObj := typedObject(k), typedObject(k)
	if newObj == nil || json.Unmarshal(newBody, newObj) != nil || json.Unmarshal(oldBody, oldObj) != nil {
		return false
	}
	nm, err := meta.Accessor(newObj)
	if err != nil {
		return false
	}
	om, err := meta.Accessor(oldObj)
	if err != nil {
		return false
	}
	nm.SetOwnerReferences(om.GetOwnerReferences())
	nm.SetFinalizers(om.GetFinalizers())
	nm.SetSelfLink(om.GetSelfLink())
	nm.SetManagedFields(om.GetManagedFields())
	// upstream compares internal objects, which carry no apiVersion or kind
	newObj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	oldObj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return apiequality.Semantic.DeepEqual(newObj, oldObj)
}

// typedObject is an empty object of k's kind.
func typedObject(k kind) runtime.Object {
	switch k.Resource {
	case "roles":
		return &rbacv1.Role{}
	case "clusterroles":
		return &rbacv1.ClusterRole{}
	case "rolebindings":
		return &rbacv1.RoleBinding{}
	case "clusterrolebindings":
		return &rbacv1.ClusterRoleBinding{}
	}
	return nil
}
