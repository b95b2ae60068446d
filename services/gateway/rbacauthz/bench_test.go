package rbacauthz

import (
	"context"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// benchPolicy is 100 Roles and 100 RoleBindings in one namespace, alice
// bound by the last.
func benchPolicy() *Policy {
	var roles []*rbacv1.Role
	var bindings []*rbacv1.RoleBinding
	for i := range 100 {
		roles = append(roles, &rbacv1.Role{ObjectMeta: meta("default", fmt.Sprintf("r%03d", i)), Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"*"}, APIGroups: []string{fmt.Sprintf("g%d.example.com", i)}, Resources: []string{"things"}},
			{Verbs: []string{"get", "list", "create"}, APIGroups: []string{"bench.example.com"}, Resources: []string{"widgets"}},
		}})
		u := fmt.Sprintf("u%03d", i)
		if i == 99 {
			u = "alice"
		}
		bindings = append(bindings, &rbacv1.RoleBinding{ObjectMeta: meta("default", fmt.Sprintf("b%03d", i)),
			RoleRef: rbacv1.RoleRef{Kind: "Role", Name: fmt.Sprintf("r%03d", i)}, Subjects: []rbacv1.Subject{{Kind: "User", Name: u}}})
	}
	return NewStaticPolicy(roles, nil, bindings, nil)
}

// BenchmarkAuthorize: one RBAC decision over 100 Roles and 100
// RoleBindings, evaluated (uncached) and from the decision cache.
func BenchmarkAuthorize(b *testing.B) {
	p := benchPolicy()
	attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}},
		Verb: "get", APIGroup: "bench.example.com", Resource: "widgets", Namespace: "default", Name: "w", ResourceRequest: true}
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if d, _ := p.decide(attrs); d != authorizer.DecisionAllow {
				b.Fatal(d)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		az := NewAuthorizer(func() *Policy { return p })
		for b.Loop() {
			if d, _, _ := az.Authorize(context.Background(), attrs); d != authorizer.DecisionAllow {
				b.Fatal(d)
			}
		}
	})
}
