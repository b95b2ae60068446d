package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// BenchmarkRBACCost measures a custom resource's GET and create by alice
// (a token-file user) through the gateway and its real backends, with
// --authorization-mode AlwaysAllow and with RBAC, both in one run: the
// RBAC gateway holds 100 Roles and 100 RoleBindings in the namespace,
// alice bound by the last of them (the others bind other users), so
// every decision walks them all unless cached. The AlwaysAllow gateway
// holds the same objects. Compare the medians of -count runs:
//
//	go test -run '^$' -bench BenchmarkRBACCost -benchtime 2000x -count 5 ./services/gateway
func BenchmarkRBACCost(b *testing.B) {
	tokenFile := filepath.Join(b.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("alice-token,alice,1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{httpx.ModeAlwaysAllow, httpx.ModeRBAC} {
		g := newTestGatewayWith(b, func(c *Config) {
			c.Auth.TokenFile = tokenFile
			c.Auth.AuthorizationModes = []string{mode}
		})
		g.createCRD(widgetCRD())
		for i := range 100 {
			g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/default/roles", map[string]any{
				"metadata": map[string]any{"name": fmt.Sprintf("r%03d", i)},
				"rules": []any{
					map[string]any{"apiGroups": []any{"bench.example.com"}, "resources": []any{"widgets"}, "verbs": []any{"get", "list", "create"}},
					map[string]any{"apiGroups": []any{fmt.Sprintf("g%d.example.com", i)}, "resources": []any{"things"}, "verbs": []any{"*"}},
				},
			})
		}
		for i := range 100 {
			user := fmt.Sprintf("u%03d", i)
			if i == 99 {
				user = "alice"
			}
			g.expect(http.StatusCreated, "POST", rbacV1+"/namespaces/default/rolebindings", map[string]any{
				"metadata": map[string]any{"name": fmt.Sprintf("b%03d", i)},
				"roleRef":  map[string]any{"kind": "Role", "name": fmt.Sprintf("r%03d", i)},
				"subjects": []any{map[string]any{"kind": "User", "name": user}},
			})
		}
		const path = "/apis/bench.example.com/v1/namespaces/default/widgets"
		alice := as("alice")
		// alice is allowed once the policy cache has the last binding
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, body := g.do("POST", path, widgetApply("w-first", 0), alice...)
			if resp.StatusCode == http.StatusCreated {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: alice not allowed: %d %s", mode, resp.StatusCode, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b.Run(mode+"/get", func(b *testing.B) {
			for b.Loop() {
				if resp, body := g.do("GET", path+"/w-first", nil, alice...); resp.StatusCode != http.StatusOK {
					b.Fatalf("get: %d %s", resp.StatusCode, body)
				}
			}
		})
		n := 0
		b.Run(mode+"/create", func(b *testing.B) {
			for b.Loop() {
				n++
				if resp, body := g.do("POST", path, widgetApply(fmt.Sprintf("w%07d", n), n), alice...); resp.StatusCode != http.StatusCreated {
					b.Fatalf("create: %d %s", resp.StatusCode, body)
				}
			}
		})
	}
}
