package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// widgetCRD is bench/upstream's Widget0 in short: a spec with a default
// (replicas), a list-map, a map of labels; status subresource.
func widgetCRD() map[string]any {
	str := map[string]any{"type": "string"}
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.bench.example.com"},
		"spec": map[string]any{
			"group": "bench.example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"replicas": map[string]any{"type": "integer", "minimum": 0, "default": 1},
							"image":    str,
							"mode":     map[string]any{"type": "string", "enum": []string{"Fast", "Safe", "Off"}},
							"ports": map[string]any{"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []string{"name"}, "items": map[string]any{
								"type": "object", "required": []string{"name"}, "properties": map[string]any{
									"name": str, "port": map[string]any{"type": "integer", "maximum": 65535},
								}}},
							"labels":   map[string]any{"type": "object", "additionalProperties": str},
							"schedule": str,
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{"phase": str}},
					},
				}},
			}},
		},
	}
}

// widgetApply is an apply body of about 1 KiB (bench/upstream's widgetBody).
func widgetApply(name string, n int) map[string]any {
	labels := map[string]any{}
	for i := range 8 {
		labels[fmt.Sprintf("label-%d", i)] = strings.Repeat("v", 40)
	}
	return map[string]any{
		"apiVersion": "bench.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": "bench"}},
		"spec": map[string]any{
			"replicas": n % 50, "image": "registry.example.com/team/app:" + strings.Repeat("1", 64), "mode": "Safe",
			"ports":  []any{map[string]any{"name": "http", "port": 80}, map[string]any{"name": "https", "port": 443}},
			"labels": labels, "schedule": "*/5 * * * *",
		},
	}
}

// seedWidgets creates n widgets in namespace default by apply, each then
// changed by a merge patch (two managedFields entries), as
// bench/upstream's BenchmarkList2000Managed seeds them.
func seedWidgets(t testing.TB, g *testGateway, n int) {
	g.createCRD(widgetCRD())
	const path = "/apis/bench.example.com/v1/namespaces/default/widgets/"
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("o%04d", i)
				if resp, body := g.do("PATCH", path+name+"?fieldManager=seed", widgetApply(name, i), "Content-Type", applyCT); resp.StatusCode != http.StatusCreated {
					t.Errorf("apply %s: %d %s", name, resp.StatusCode, body)
				}
				if resp, body := g.do("PATCH", path+name+"?fieldManager=patcher", `{"metadata":{"annotations":{"note":"patched"}}}`, "Content-Type", "application/merge-patch+json"); resp.StatusCode != http.StatusOK {
					t.Errorf("patch %s: %d %s", name, resp.StatusCode, body)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// BenchmarkCRList2000Managed measures a LIST (JSON) of 2,000 custom
// resources of about 1 KiB with managedFields, whose schema has a default,
// through the gateway and its real backends (bench/upstream's
// BenchmarkList2000Managed compares the same read with upstream).
func BenchmarkCRList2000Managed(b *testing.B) {
	g := newTestGateway(b)
	seedWidgets(b, g, 2000)
	const list = "/apis/bench.example.com/v1/namespaces/default/widgets"
	resp, body := g.do("GET", list, nil, "Accept", "application/json")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"managedFields"`) {
		b.Fatalf("%d %.200s", resp.StatusCode, body)
	}
	// A sub-benchmark: the seeding above runs once per -count.
	b.Run("json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			g.do("GET", list, nil, "Accept", "application/json")
		}
	})
}

// BenchmarkCRApply measures server-side applies of a Widget of about
// 1 KiB through the gateway and its real backends, one at a time: "create"
// applies objects that do not exist yet, "update" changes spec.replicas of
// one object the apply's manager owns (bench/upstream's ApplyCreate and
// ApplyUpdate, which compare the same writes with upstream).
func BenchmarkCRApply(b *testing.B) {
	g := newTestGateway(b)
	g.createCRD(widgetCRD())
	const path = "/apis/bench.example.com/v1/namespaces/default/widgets/"
	b.Run("create", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			name := fmt.Sprintf("c%06d", i)
			if resp, body := g.do("PATCH", path+name+"?fieldManager=bench", widgetApply(name, i), "Content-Type", applyCT); resp.StatusCode != http.StatusCreated {
				b.Fatalf("apply %s: %d %s", name, resp.StatusCode, body)
			}
			i++
		}
	})
	b.Run("update", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			want := http.StatusOK
			if i == 0 {
				want = http.StatusCreated
			}
			if resp, body := g.do("PATCH", path+"u?fieldManager=bench", widgetApply("u", i+1), "Content-Type", applyCT); resp.StatusCode != want {
				b.Fatalf("apply u: %d %s", resp.StatusCode, body)
			}
			i++
		}
	})
}
