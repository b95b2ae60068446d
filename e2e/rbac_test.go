package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestRBACKubectl runs `crdplane run --authorization-mode RBAC` with a
// token file of alice and bob and drives it with kubectl 1.33: the admin
// (system:masters) creates a Role and a RoleBinding for alice with
// `kubectl create role/rolebinding`; alice lists the crontabs of her
// namespace and is denied in another, bob everywhere, with
// kube-apiserver's 403; `kubectl auth can-i` (and --list) answers from the
// same rules; alice, who may create Roles, cannot grant what she does not
// hold.
func TestRBACKubectl(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte("alice-token,alice,1001\nbob-token,bob,1002,\"devs\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--token-file", tokens, "--authorization-mode", "RBAC")
	if !strings.Contains(s.logs.String(), "mode=RBAC") {
		t.Errorf("startup does not print the mode: %s", s.logs.String())
	}
	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
	for _, ns := range []string{"team-a", "team-b"} {
		s.must(t, "create", "namespace", ns)
		s.must(t, "create", "-n", ns, "-f", testdata("crontab-valid.yaml"))
	}
	s.must(t, "create", "role", "ct-reader", "-n", "team-a", "--verb=get,list,watch", "--resource=crontabs.stable.example.com")
	s.must(t, "create", "rolebinding", "alice-reads", "-n", "team-a", "--role=ct-reader", "--user=alice")
	wantLines(t, s.must(t, "get", "roles", "-n", "team-a"), `^NAME\s+CREATED AT$`, `^ct-reader\s+\d{4}-\d\d-\d\dT`)
	wantLines(t, s.must(t, "get", "rolebindings", "-n", "team-a", "-o", "wide"), `^NAME\s+ROLE\s+AGE\s+USERS\s+GROUPS\s+SERVICEACCOUNTS$`, `^alice-reads\s+Role/ct-reader\s+\S+\s+alice`)
	// kubectl explain reads the group's OpenAPI (v1.33's schemas)
	wantLines(t, s.must(t, "explain", "role.rules"), `^GROUP:\s+rbac.authorization.k8s.io$`, `^KIND:\s+Role$`, `^FIELD: rules <\[\]PolicyRule>$`, `Rules holds all the PolicyRules for this Role`)
	wantLines(t, s.must(t, "explain", "clusterrolebinding.roleRef"), `^KIND:\s+ClusterRoleBinding$`, `RoleRef can only reference a ClusterRole in the global namespace`)
	// a removed role is answered with a Status; Foreground marks it
	s.must(t, "create", "role", "doomed", "-n", "team-a", "--verb=get", "--resource=crontabs.stable.example.com")
	wantLines(t, s.must(t, "delete", "role", "doomed", "-n", "team-a", "--cascade=foreground", "--wait=false"), `^role.rbac.authorization.k8s.io "doomed" deleted$`)
	if got := s.must(t, "get", "role", "doomed", "-n", "team-a", "-o", "jsonpath={.metadata.finalizers}"); got != `["foregroundDeletion"]` {
		t.Errorf("foreground-deleted role's finalizers: %q", got)
	}
	s.must(t, "patch", "role", "doomed", "-n", "team-a", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	s.fails(t, "get", "role", "doomed", "-n", "team-a")

	alice := s.as(t, "alice", &clientcmdapi.AuthInfo{Token: "alice-token"})
	bob := s.as(t, "bob", &clientcmdapi.AuthInfo{Token: "bob-token"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, err := alice.kubectl(t, "", "get", "crontabs", "-n", "team-a")
		if err == nil {
			wantLines(t, out, `^NAME\s+`, `^my-new-cron-object\s+`)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice never allowed: %s %v", out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if errOut := alice.fails(t, "get", "crontabs", "-n", "team-b"); !strings.Contains(errOut, `Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "alice" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "team-b"`) {
		t.Errorf("alice in team-b: %s", errOut)
	}
	if errOut := bob.fails(t, "get", "crontabs", "-n", "team-a"); !strings.Contains(errOut, `User "bob" cannot list resource "crontabs"`) {
		t.Errorf("bob: %s", errOut)
	}
	if errOut := alice.fails(t, "delete", "crontab", "my-new-cron-object", "-n", "team-a"); !strings.Contains(errOut, `User "alice" cannot delete resource "crontabs"`) {
		t.Errorf("alice delete: %s", errOut)
	}
	canI := func(k *server, args ...string) string {
		out, _, _ := k.kubectl(t, "", append([]string{"auth", "can-i"}, args...)...)
		return strings.TrimSpace(out)
	}
	for _, c := range []struct {
		who  *server
		args []string
		want string
	}{
		{alice, []string{"list", "crontabs.stable.example.com", "-n", "team-a"}, "yes"},
		{alice, []string{"list", "crontabs.stable.example.com", "-n", "team-b"}, "no"},
		{alice, []string{"delete", "crontabs.stable.example.com", "-n", "team-a"}, "no"},
		{bob, []string{"list", "crontabs.stable.example.com", "-n", "team-a"}, "no"},
		{s, []string{"list", "crontabs.stable.example.com", "-n", "team-a", "--as=alice"}, "yes"},
		{s, []string{"delete", "crontabs.stable.example.com", "-n", "team-b"}, "yes"},
	} {
		if got := canI(c.who, c.args...); got != c.want {
			t.Errorf("can-i %v: %q, want %q", c.args, got, c.want)
		}
	}
	wantLines(t, alice.must(t, "auth", "can-i", "--list", "-n", "team-a"), `^crontabs.stable.example.com\s+\[\]\s+\[\]\s+\[get list watch\]$`, `^selfsubjectaccessreviews.authorization.k8s.io\s+\[\]\s+\[\]\s+\[create\]$`)
	// kubectl auth whoami: a SelfSubjectReview, which system:basic-user
	// grants bob too
	wantLines(t, bob.must(t, "auth", "whoami"), `^Username\s+bob$`, `^Groups\s+\[.*system:authenticated\]$`)

	// escalation: alice may create roles, not grant what she lacks
	s.must(t, "create", "role", "role-creator", "-n", "team-a", "--verb=create", "--resource=roles.rbac.authorization.k8s.io")
	s.must(t, "create", "rolebinding", "alice-creates", "-n", "team-a", "--role=role-creator", "--user=alice")
	deadline = time.Now().Add(10 * time.Second)
	for {
		out, errOut, err := alice.kubectl(t, "", "create", "role", "held", "-n", "team-a", "--verb=get", "--resource=crontabs.stable.example.com")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice never allowed to create a role: %s %s", out, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	errOut := alice.fails(t, "create", "role", "more", "-n", "team-a", "--verb=get,delete", "--resource=crontabs.stable.example.com")
	if !strings.Contains(errOut, `Error from server (Forbidden): roles.rbac.authorization.k8s.io "more" is forbidden: user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:
{APIGroups:["stable.example.com"], Resources:["crontabs"], Verbs:["delete"]}`) {
		t.Errorf("escalation: %s", errOut)
	}
}
