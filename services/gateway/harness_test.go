package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
)

const testToken = "test-token"

// testGateway is a gateway over the real backend services (storage on an
// embedded etcd, registry, validator, converter), served by httptest.
type testGateway struct {
	t        testing.TB
	svc      *Service
	srv      *httptest.Server
	backends *backendtest.Backends
}

func newTestGateway(t testing.TB, opts ...backendtest.Options) *testGateway {
	t.Helper()
	return newTestGatewayWith(t, nil, opts...)
}

// newTestGatewayWith is newTestGateway with the configuration changed by
// configure (nil: as it is).
func newTestGatewayWith(t testing.TB, configure func(*Config), opts ...backendtest.Options) *testGateway {
	t.Helper()
	b := backendtest.Start(t, opts...)
	cfg := Config{
		RegistryAddr:  b.RegistryAddr,
		ValidatorAddr: b.ValidatorAddr,
		StorageAddr:   b.StorageAddr,
		ConverterAddr: b.ConverterAddr,
		Tokens:        []string{testToken},
		CRDWait:       5 * time.Second,
	}
	if configure != nil {
		configure(&cfg)
	}
	svc, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	g := &testGateway{t: t, svc: svc, srv: srv, backends: b}
	g.waitReady()
	return g
}

func (g *testGateway) waitReady() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.svc.crds.WaitSynced(ctx); err != nil {
		g.t.Fatalf("CRD cache never synced: %v", err)
	}
	g.waitBootstrapPolicy(ctx)
}

// waitBootstrapPolicy waits until the registry's leader has written the
// RBAC bootstrap policy and aggregated admin, edit and view: tests that
// count etcd revisions see no background writes after it.
func (g *testGateway) waitBootstrapPolicy(ctx context.Context) {
	g.t.Helper()
	done := func() bool {
		resp, _ := g.do("GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:public-info-viewer", nil)
		if resp.StatusCode != http.StatusOK {
			return false
		}
		for _, role := range []string{"admin", "edit", "view"} {
			resp, body := g.do("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/"+role, nil)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"rules":[{`) {
				return false
			}
		}
		return true
	}
	for !done() {
		select {
		case <-ctx.Done():
			g.t.Fatal("the RBAC bootstrap policy was never written")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// do sends a request (body: []byte, string or anything JSON-encodable)
// with the test token and returns the response and its body.
func (g *testGateway) do(method, path string, body any, header ...string) (*http.Response, []byte) {
	g.t.Helper()
	return g.doWith(g.srv.Client(), method, path, body, header...)
}

// doWith is do through client (one that does not follow redirects, say).
func (g *testGateway) doWith(client *http.Client, method, path string, body any, header ...string) (*http.Response, []byte) {
	g.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			g.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.srv.URL+path, r)
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, data
}

// expect checks a response's code and returns its body decoded.
func (g *testGateway) expect(code int, method, path string, body any, header ...string) map[string]any {
	g.t.Helper()
	resp, data := g.do(method, path, body, header...)
	if resp.StatusCode != code {
		g.t.Fatalf("%s %s: got %d, want %d: %s", method, path, resp.StatusCode, code, data)
	}
	if len(data) == 0 {
		return nil
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		g.t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, path, err, data)
	}
	return out
}

// cronTabSchema is the structural schema of both test versions: spec
// fields (replicas at most 10), status.phase; unknown fields are pruned.
func cronTabSchema() map[string]any {
	str := map[string]any{"type": "string"}
	return map[string]any{"openAPIV3Schema": map[string]any{
		"type": "object",
		"properties": map[string]any{
			"spec": map[string]any{"type": "object", "properties": map[string]any{
				"cronSpec": str, "image": str, "color": str, "size": str,
				"replicas": map[string]any{"type": "integer", "maximum": 10},
			}},
			"status": map[string]any{"type": "object", "properties": map[string]any{"phase": str}},
		},
	}}
}

// cronTabCRD is the CRD of the tests: namespaced crontabs with v1
// (storage, status subresource, selectable .spec.color) and v1beta1
// (served, deprecated, the same schema and selectable field: upstream
// hoists identical per-version settings to the top level and then refuses
// per-version selectable fields next to a top-level schema).
func cronTabCRD() map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "crontabs.stable.example.com"},
		"spec": map[string]any{
			"group": "stable.example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList"},
			"versions": []any{
				map[string]any{
					"name": "v1", "served": true, "storage": true,
					"schema":           cronTabSchema(),
					"subresources":     map[string]any{"status": map[string]any{}},
					"selectableFields": []any{map[string]any{"jsonPath": ".spec.color"}},
				},
				map[string]any{
					"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
					"schema":           cronTabSchema(),
					"subresources":     map[string]any{"status": map[string]any{}},
					"selectableFields": []any{map[string]any{"jsonPath": ".spec.color"}},
				},
			},
		},
	}
}

// createCronTabCRD creates the CRD (requests for its resource wait until
// the gateway serves it).
func (g *testGateway) createCronTabCRD() {
	g.t.Helper()
	g.createCRD(cronTabCRD())
}

// createCRD creates a CRD and waits until the registry reports it
// Established.
func (g *testGateway) createCRD(crd map[string]any) {
	g.t.Helper()
	g.expect(http.StatusCreated, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
	name := str(meta(crd)["name"])
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := g.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, nil)
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"type":"Established","status":"True"`) {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("CRD %s never Established: %d %s", name, resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func cronTab(name string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}
}

func meta(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	return m
}

func str(v any) string { s, _ := v.(string); return s }

// expectPageNotFound checks kube-apiserver's answer for a path it does not
// serve: net/http's text/plain "404 page not found", not a Status.
func (g *testGateway) expectPageNotFound(method, path string, body any) {
	g.t.Helper()
	resp, b := g.do(method, path, body)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || string(b) != "404 page not found\n" {
		g.t.Fatalf("%s %s: %d %s %q, want 404 text/plain \"404 page not found\"", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
