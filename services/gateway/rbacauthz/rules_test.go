package rbacauthz

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func res(verb, group, resource, sub, ns, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "alice"}, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
}

func nonRes(verb, path string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "alice"}, Verb: verb, Path: path}
}

// TestRuleAllows: upstream's matching of verbs, groups, resources and
// subresources (with "*" and "*/sub"), resource names and non-resource
// URLs (exact, "*", and prefixes ending in "*").
func TestRuleAllows(t *testing.T) {
	cases := []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"exact", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}}, res("get", "g", "things", "", "ns", "x"), true},
		{"other verb", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}}, res("list", "g", "things", "", "ns", ""), false},
		{"verb star", rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{"g"}, Resources: []string{"things"}}, res("delete", "g", "things", "", "ns", "x"), true},
		{"group star", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"things"}}, res("get", "h", "things", "", "", "x"), true},
		{"other group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}}, res("get", "h", "things", "", "", "x"), false},
		{"core group", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"namespaces"}}, res("get", "", "namespaces", "", "", "x"), true},
		{"resource star", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"*"}}, res("get", "g", "things", "status", "", "x"), true},
		{"main resource does not cover subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}}, res("get", "g", "things", "status", "", "x"), false},
		{"resource/subresource", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"g"}, Resources: []string{"things/status"}}, res("update", "g", "things", "status", "", "x"), true},
		{"resource/subresource not the main resource", rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{"g"}, Resources: []string{"things/status"}}, res("update", "g", "things", "", "", "x"), false},
		{"*/subresource", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"*/scale"}}, res("get", "g", "things", "scale", "", "x"), true},
		{"*/subresource other sub", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"*/scale"}}, res("get", "g", "things", "status", "", "x"), false},
		{"*/subresource not main", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"*/scale"}}, res("get", "g", "things", "", "", "x"), false},
		{"resourceNames match", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}, ResourceNames: []string{"x"}}, res("get", "g", "things", "", "", "x"), true},
		{"resourceNames other", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}, ResourceNames: []string{"x"}}, res("get", "g", "things", "", "", "y"), false},
		{"resourceNames list has no name", rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{"g"}, Resources: []string{"things"}, ResourceNames: []string{"x"}}, res("list", "g", "things", "", "", ""), false},
		{"nonResourceURL exact", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, nonRes("get", "/healthz"), true},
		{"nonResourceURL other", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}, nonRes("get", "/healthz/etcd"), false},
		{"nonResourceURL prefix", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz*"}}, nonRes("get", "/healthz/etcd"), true},
		{"nonResourceURL prefix slash", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/apis/*"}}, nonRes("get", "/apis"), false},
		{"nonResourceURL star", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"*"}}, nonRes("get", "/anything"), true},
		{"nonResource rule on resource request", rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"*"}}, res("get", "g", "things", "", "", "x"), false},
		{"resource rule on nonResource request", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, nonRes("get", "/healthz"), false},
	}
	for _, tc := range cases {
		if got := RuleAllows(tc.attrs, &tc.rule); got != tc.want {
			t.Errorf("%s: RuleAllows = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func testPolicy() *Policy {
	read := []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{"g"}, Resources: []string{"things"}}}
	return NewStaticPolicy(
		[]*rbacv1.Role{{ObjectMeta: meta("a", "reader"), Rules: read}},
		[]*rbacv1.ClusterRole{
			{ObjectMeta: meta("", "view"), Rules: read},
			{ObjectMeta: meta("", "discovery"), Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*"}}}},
		},
		[]*rbacv1.RoleBinding{
			{ObjectMeta: meta("a", "alice"), RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "reader"}, Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}},
			{ObjectMeta: meta("b", "sa"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "robot"}}},
			{ObjectMeta: meta("c", "devs"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "missing"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "devs"}}},
			{ObjectMeta: meta("d", "all-sas"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "system:serviceaccounts:d"}}},
		},
		[]*rbacv1.ClusterRoleBinding{
			{ObjectMeta: meta("", "discovery"), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "discovery"}, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "system:authenticated"}}},
		},
	)
}

// TestAuthorize: subjects (User, Group, ServiceAccount in the binding's
// namespace, the service accounts' groups), RoleBindings of Roles and of
// ClusterRoles, upstream's reasons.
func TestAuthorize(t *testing.T) {
	az := NewAuthorizer(testPolicy)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}
	robot := &user.DefaultInfo{Name: "system:serviceaccount:b:robot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:b", "system:authenticated"}}
	dsa := &user.DefaultInfo{Name: "system:serviceaccount:d:x", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:d", "system:authenticated"}}
	dev := &user.DefaultInfo{Name: "bob", Groups: []string{"devs"}}
	cases := []struct {
		name   string
		u      user.Info
		attrs  authorizer.AttributesRecord
		want   authorizer.Decision
		reason string
	}{
		{"role binding", alice, res("list", "g", "things", "", "a", ""), authorizer.DecisionAllow, `RBAC: allowed by RoleBinding "alice/a" of Role "reader" to User "alice"`},
		{"other namespace", alice, res("list", "g", "things", "", "b", ""), authorizer.DecisionNoOpinion, ""},
		{"cluster-wide", alice, res("list", "g", "things", "", "", ""), authorizer.DecisionNoOpinion, ""},
		{"not granted verb", alice, res("delete", "g", "things", "", "a", "x"), authorizer.DecisionNoOpinion, ""},
		{"discovery", alice, nonRes("get", "/apis/g/v1"), authorizer.DecisionAllow, `RBAC: allowed by ClusterRoleBinding "discovery" of ClusterRole "discovery" to Group "system:authenticated"`},
		{"service account", robot, res("get", "g", "things", "", "b", "x"), authorizer.DecisionAllow, `RBAC: allowed by RoleBinding "sa/b" of ClusterRole "view" to ServiceAccount "robot/b"`},
		{"service account elsewhere", robot, res("get", "g", "things", "", "a", "x"), authorizer.DecisionNoOpinion, ""},
		{"service accounts group", dsa, res("get", "g", "things", "", "d", "x"), authorizer.DecisionAllow, `RBAC: allowed by RoleBinding "all-sas/d" of ClusterRole "view" to Group "system:serviceaccounts:d"`},
		{"missing role", dev, res("get", "g", "things", "", "c", "x"), authorizer.DecisionNoOpinion, `RBAC: clusterrole.rbac.authorization.k8s.io "missing" not found`},
	}
	for _, tc := range cases {
		tc.attrs.User = tc.u
		for range 2 { // evaluated, then cached
			d, reason, err := az.Authorize(context.Background(), tc.attrs)
			if err != nil || d != tc.want || reason != tc.reason {
				t.Errorf("%s: got %v %q %v, want %v %q", tc.name, d, reason, err, tc.want, tc.reason)
			}
		}
	}
}

// TestConfirmNoEscalation: upstream's message, the missing rules broken
// down, compacted and sorted.
func TestConfirmNoEscalation(t *testing.T) {
	p := testPolicy()
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}
	if err := ConfirmNoEscalation(p, alice, "a", []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"g"}, Resources: []string{"things"}}}); err != nil {
		t.Errorf("held rule: %v", err)
	}
	err := ConfirmNoEscalation(p, alice, "a", []rbacv1.PolicyRule{{Verbs: []string{"get", "delete", "create"}, APIGroups: []string{"g"}, Resources: []string{"things", "others"}}})
	want := `user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["g"], Resources:["others"], Verbs:["get" "delete" "create"]}
{APIGroups:["g"], Resources:["things"], Verbs:["delete" "create"]}`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	dev := &user.DefaultInfo{Name: "bob", Groups: []string{"devs"}}
	err = ConfirmNoEscalation(p, dev, "c", []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/x"}}})
	if err == nil || !strings.HasSuffix(err.Error(), `{NonResourceURLs:["/x"], Verbs:["get"]}; resolution errors: [clusterrole.rbac.authorization.k8s.io "missing" not found]`) {
		t.Errorf("with resolution errors: %v", err)
	}
}
