package gateway

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// BenchmarkRBACCost measures a custom resource's GET and create by alice
// (a token-file user) through two gateways on their own real backends,
// one with --authorization-mode AlwaysAllow and one with RBAC, in one run:
// each iteration sends the request to both (in alternating order), so
// that the shared machine's drift hits both alike, and the medians of the
// two latencies are reported (aa-median-us, rbac-median-us) with the
// RBAC cost in percent (rbac-cost-%). Both gateways hold 100 Roles and
// 100 RoleBindings in the namespace, alice bound by the last of them
// (the others bind other users), so an uncached decision walks them all.
//
//	go test -run '^$' -bench BenchmarkRBACCost -benchtime 2000x -count 3 ./services/gateway
func BenchmarkRBACCost(b *testing.B) {
	tokenFile := filepath.Join(b.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("alice-token,alice,1\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	const path = "/apis/bench.example.com/v1/namespaces/default/widgets"
	alice := as("alice")
	var gateways []*testGateway
	for _, mode := range []string{httpx.ModeAlwaysAllow, httpx.ModeRBAC} {
		g := newTestGatewayWith(b, func(c *Config) {
			c.Auth.TokenFile = tokenFile
			c.Auth.AuthorizationModes = []string{mode}
		})
		seedRBACBench(g)
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
		gateways = append(gateways, g)
	}
	compare := func(b *testing.B, request func(g *testGateway, i int)) {
		var aa, rbac []time.Duration
		i := 0
		for b.Loop() {
			i++
			order := []int{0, 1}
			if i%2 == 0 {
				order = []int{1, 0}
			}
			for _, k := range order {
				start := time.Now()
				request(gateways[k], i)
				if d := time.Since(start); k == 0 {
					aa = append(aa, d)
				} else {
					rbac = append(rbac, d)
				}
			}
		}
		ma, mr := median(aa), median(rbac)
		b.ReportMetric(float64(ma.Microseconds()), "aa-median-us")
		b.ReportMetric(float64(mr.Microseconds()), "rbac-median-us")
		b.ReportMetric(100*(float64(mr)-float64(ma))/float64(ma), "rbac-cost-%")
	}
	b.Run("get", func(b *testing.B) {
		compare(b, func(g *testGateway, _ int) {
			if resp, body := g.do("GET", path+"/w-first", nil, alice...); resp.StatusCode != http.StatusOK {
				b.Fatalf("get: %d %s", resp.StatusCode, body)
			}
		})
	})
	n := 0
	b.Run("create", func(b *testing.B) {
		compare(b, func(g *testGateway, i int) {
			n++
			if resp, body := g.do("POST", path, widgetApply(fmt.Sprintf("w%07d", n), i), alice...); resp.StatusCode != http.StatusCreated {
				b.Fatalf("create: %d %s", resp.StatusCode, body)
			}
		})
	})
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// seedRBACBench creates the widget CRD, 100 Roles and 100 RoleBindings in
// namespace default (the last binding alice's).
func seedRBACBench(g *testGateway) {
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
}
