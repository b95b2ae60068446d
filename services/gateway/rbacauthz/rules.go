// Package rbacauthz is the gateway's RBAC authorizer (--authorization-mode
// RBAC): the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings in
// memory, fed by the registry's RBACService watches (Cache), evaluated per
// request with kube-apiserver's rule semantics (Authorizer, a
// k8s.io/apiserver authorizer and rule resolver), its decisions cached
// until the policy changes, and upstream's escalation checks for RBAC
// writes (ConfirmNoEscalation).
package rbacauthz

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// RuleAllows reports whether rule allows the request, as kube-apiserver's
// RBAC authorizer matches them: verbs and API groups (or "*"), resources
// as "<resource>", "<resource>/<subresource>", "*" or "*/<subresource>",
// resource names (none: any), and non-resource URLs exactly, as "*" or as
// a prefix ending in "*".
func RuleAllows(attrs authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matches(rule.Verbs, attrs.GetVerb()) {
		return false
	}
	if !attrs.IsResourceRequest() {
		return nonResourceURLMatches(rule.NonResourceURLs, attrs.GetPath())
	}
	combined := attrs.GetResource()
	if sub := attrs.GetSubresource(); sub != "" {
		combined += "/" + sub
	}
	return matches(rule.APIGroups, attrs.GetAPIGroup()) &&
		resourceMatches(rule.Resources, combined, attrs.GetSubresource()) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, attrs.GetName()))
}

// matches: the value, or "*" (rbacv1.VerbAll, rbacv1.APIGroupAll).
func matches(set []string, v string) bool {
	for _, s := range set {
		if s == "*" || s == v {
			return true
		}
	}
	return false
}

func resourceMatches(rules []string, combined, sub string) bool {
	for _, r := range rules {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case sub != "" && len(r) == len(sub)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, sub):
			return true
		}
	}
	return false
}

func nonResourceURLMatches(rules []string, path string) bool {
	for _, u := range rules {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")):
			return true
		}
	}
	return false
}

// appliesTo returns the index of the first subject that names u (a User by
// name, a Group u is in, a ServiceAccount by its user name
// system:serviceaccount:<ns>:<name>, the binding's namespace when the
// subject has none).
func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.GetName() == s.Name {
				return i, true
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.GetGroups(), s.Name) {
				return i, true
			}
		case rbacv1.ServiceAccountKind:
			ns := namespace
			if s.Namespace != "" {
				ns = s.Namespace
			}
			if ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName()) {
				return i, true
			}
		}
	}
	return 0, false
}

// describeSubject, clusterBindingSource and bindingSource word the rule
// sources as upstream's ("RBAC: allowed by ClusterRoleBinding ...").
func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

type clusterBindingSource struct {
	binding *rbacv1.ClusterRoleBinding
	subject *rbacv1.Subject
}

func (d clusterBindingSource) String() string {
	return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", d.binding.Name, d.binding.RoleRef.Kind, d.binding.RoleRef.Name, describeSubject(d.subject, ""))
}

type bindingSource struct {
	binding *rbacv1.RoleBinding
	subject *rbacv1.Subject
}

func (d bindingSource) String() string {
	return fmt.Sprintf("RoleBinding %q of %s %q to %s", d.binding.Name+"/"+d.binding.Namespace, d.binding.RoleRef.Kind, d.binding.RoleRef.Name, describeSubject(d.subject, d.binding.Namespace))
}

// CompactString is upstream's compact rendering of a rule in escalation
// errors: {APIGroups:[...], Resources:[...], NonResourceURLs:[...],
// ResourceNames:[...], Verbs:[...]}, the empty fields left out.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// compactRules merges the rules of one API group and one resource, with
// verbs only, into one rule per group and resource (upstream's
// CompactRules, on the broken-down missing rules of a Covers check).
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type gr struct{ group, resource string }
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	simple := map[gr]*rbacv1.PolicyRule{}
	var order []gr
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := gr{r.APIGroups[0], r.Resources[0]}
		if e, ok := simple[k]; ok {
			e.Verbs = append(e.Verbs, r.Verbs...)
			continue
		}
		c := rbacv1.PolicyRule{APIGroups: slices.Clone(r.APIGroups), Resources: slices.Clone(r.Resources), Verbs: slices.Clone(r.Verbs)}
		simple[k] = &c
		order = append(order, k)
	}
	for _, k := range order {
		out = append(out, *simple[k])
	}
	return out
}
