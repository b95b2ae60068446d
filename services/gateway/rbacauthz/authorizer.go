package rbacauthz

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// VisitRulesFor calls visit with every rule that applies to u in
// namespace (the ClusterRoleBindings' first, then the namespace's
// RoleBindings'), and with every error resolving a binding's role; visit
// returning false stops the walk. As upstream's rule resolver.
func (p *Policy) VisitRulesFor(u user.Info, namespace string, visit func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool) {
	for _, crb := range p.clusterRoleBindings {
		i, ok := appliesTo(u, crb.Subjects, "")
		if !ok {
			continue
		}
		rules, err := p.roleRules(crb.RoleRef, "")
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		src := clusterBindingSource{binding: crb, subject: &crb.Subjects[i]}
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	for _, rb := range p.roleBindings[namespace] {
		i, ok := appliesTo(u, rb.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := p.roleRules(rb.RoleRef, namespace)
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		src := bindingSource{binding: rb, subject: &rb.Subjects[i]}
		for j := range rules {
			if !visit(src, &rules[j], nil) {
				return
			}
		}
	}
}

// RulesFor is every rule that applies to u in namespace, and the errors
// resolving them (the rules found are still valid: RBAC only adds).
func (p *Policy) RulesFor(u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	p.VisitRulesFor(u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil {
			rules = append(rules, *rule)
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// RoleRules resolves a binding's roleRef (namespace: the binding's, "" for
// a ClusterRoleBinding), upstream's GetRoleReferenceRules.
func (p *Policy) RoleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	return p.roleRules(ref, namespace)
}

// decide is the RBAC authorizer's decision: allowed by the first rule
// that allows (its source the reason), else no opinion, with the
// resolution errors as the reason.
func (p *Policy) decide(attrs authorizer.Attributes) (authorizer.Decision, string) {
	var reason string
	var errs []error
	allowed := false
	p.VisitRulesFor(attrs.GetUser(), attrs.GetNamespace(), func(src fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && RuleAllows(attrs, rule) {
			allowed = true
			reason = "RBAC: allowed by " + src.String()
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if allowed {
		return authorizer.DecisionAllow, reason
	}
	if len(errs) > 0 {
		return authorizer.DecisionNoOpinion, fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return authorizer.DecisionNoOpinion, ""
}

// Authorizer is the RBAC authorizer over the policy its source gives,
// with a decision cache that a change of the policy empties.
type Authorizer struct {
	policy func() *Policy

	mu        sync.RWMutex
	gen       uint64
	decisions map[string]decision
}

type decision struct {
	d      authorizer.Decision
	reason string
}

// maxCachedDecisions bounds the cache; beyond it, it starts over.
const maxCachedDecisions = 16384

var cacheLookups = metrics.NewCounterVec("gateway", "rbac_decision_cache_total",
	"RBAC authorization decisions answered from the cache (hit) or evaluated (miss).", "result")

var (
	cacheHits   = cacheLookups.WithLabelValues("hit")
	cacheMisses = cacheLookups.WithLabelValues("miss")
)

// NewAuthorizer returns the RBAC authorizer of the policy source (a
// Cache's Policy).
func NewAuthorizer(policy func() *Policy) *Authorizer {
	return &Authorizer{policy: policy, decisions: map[string]decision{}}
}

// Authorize implements authorizer.UnconditionalAuthorizer.
func (a *Authorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetUser() == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	p := a.policy()
	key := decisionKey(attrs)
	a.mu.RLock()
	if a.gen == p.generation {
		if d, ok := a.decisions[key]; ok {
			a.mu.RUnlock()
			cacheHits.Inc()
			return d.d, d.reason, nil
		}
	}
	a.mu.RUnlock()
	cacheMisses.Inc()
	d, reason := p.decide(attrs)
	a.mu.Lock()
	if a.gen != p.generation || len(a.decisions) >= maxCachedDecisions {
		if p.generation >= a.gen {
			a.gen = p.generation
			a.decisions = map[string]decision{}
		}
	}
	if a.gen == p.generation {
		a.decisions[key] = decision{d, reason}
	}
	a.mu.Unlock()
	return d, reason, nil
}

// decisionKey is what an RBAC decision depends on: the user's name and
// groups and the request's verb, namespace, group, resource, subresource
// and name, or its path.
func decisionKey(attrs authorizer.Attributes) string {
	var b strings.Builder
	u := attrs.GetUser()
	b.Grow(128)
	b.WriteString(u.GetName())
	for _, g := range u.GetGroups() {
		b.WriteByte(0)
		b.WriteString(g)
	}
	b.WriteByte(1)
	b.WriteString(attrs.GetVerb())
	b.WriteByte(1)
	if !attrs.IsResourceRequest() {
		b.WriteString(attrs.GetPath())
		return b.String()
	}
	for _, s := range []string{attrs.GetNamespace(), attrs.GetAPIGroup(), attrs.GetResource(), attrs.GetSubresource(), attrs.GetName()} {
		b.WriteByte(2)
		b.WriteString(s)
	}
	return b.String()
}

// RulesFor implements authorizer.RuleResolver (SelfSubjectRulesReview).
func (a *Authorizer) RulesFor(_ context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	rules, err := a.policy().RulesFor(u, namespace)
	var res []authorizer.ResourceRuleInfo
	var nonRes []authorizer.NonResourceRuleInfo
	for _, r := range rules {
		if len(r.Resources) > 0 {
			res = append(res, &authorizer.DefaultResourceRuleInfo{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
		}
		if len(r.NonResourceURLs) > 0 {
			nonRes = append(nonRes, &authorizer.DefaultNonResourceRuleInfo{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		}
	}
	return res, nonRes, err != nil, err
}

// Policy is the current policy.
func (a *Authorizer) Policy() *Policy { return a.policy() }

// ConfirmNoEscalation checks that u holds, in namespace, every permission
// rules grant (upstream's ConfirmNoEscalation, with its message).
func ConfirmNoEscalation(p *Policy, u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	owner, resolveErr := p.RulesFor(u, namespace)
	covered, missing := validation.Covers(owner, rules)
	if covered {
		return nil
	}
	descriptions := sets.New[string]()
	for _, m := range compactRules(missing) {
		descriptions.Insert(CompactString(m))
	}
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(sets.List(descriptions), "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", flatten(resolveErr))
	}
	return errors.New(msg)
}

// flatten renders resolution errors as upstream's []error does.
func flatten(err error) []error {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		return agg.Errors()
	}
	return []error{err}
}

// FullAuthority is what an aggregated ClusterRole is checked to grant
// (upstream checks the creator holds everything).
var FullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// IsNotFound reports a role a binding references that does not exist.
func IsNotFound(err error) bool { return apierrors.IsNotFound(err) }

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
