package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crdplane/crdplane/services/gateway"
	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

const token = "integration-token"

// platform is the real backend services (shared with the gateway's own
// tests) and gateways in front of them, in this process.
type platform struct {
	gw     *gateway.Service
	base   string
	client *http.Client
	rest   *rest.Config

	regAddr, valAddr, stoAddr string
	pki                       *localpki.PKI
}

func startPlatform(t *testing.T) *platform {
	t.Helper()
	b := backendtest.Start(t)
	regAddr, valAddr, stoAddr := b.RegistryAddr, b.ValidatorAddr, b.StorageAddr
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &platform{regAddr: regAddr, valAddr: valAddr, stoAddr: stoAddr, pki: pki}
	p.gw, p.rest = p.addGateway(t)
	p.base = p.rest.Host
	if p.client, err = rest.HTTPClientFor(p.rest); err != nil {
		t.Fatal(err)
	}
	return p
}

// addGateway starts one more gateway on the platform's services, serving
// HTTPS, and returns it once ready with a client configuration for it.
func (p *platform) addGateway(t *testing.T) (*gateway.Service, *rest.Config) {
	t.Helper()
	cert, err := tls.X509KeyPair(p.pki.ServingCertPEM, p.pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), gateway.Config{
		ListenAddr: "127.0.0.1:0", RegistryAddr: p.regAddr, ValidatorAddr: p.valAddr, StorageAddr: p.stoAddr,
		TLSCert: &cert, Tokens: []string{token}, ShutdownGrace: time.Second,
	})
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done; _ = gw.Close() })

	cfg := &rest.Config{
		Host:            "https://" + gw.Addr(),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.pki.CACertPEM, ServerName: "localhost"},
		QPS:             1000,
		Burst:           1000,
	}
	// Ready: the gateway's CRD cache synced from the registry.
	deadline := time.Now().Add(30 * time.Second)
	for gw.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready: %v", gw.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return gw, cfg
}

func (p *platform) do(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

const crdJSON = `{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "crontabs.stable.example.com"},
  "spec": {
    "group": "stable.example.com",
    "scope": "Namespaced",
    "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList", "shortNames": ["ct"]},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "spec": {"type": "object", "properties": {
            "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
            "image": {"type": "string"},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10}
          }},
          "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }
      }}
    }]
  }
}`

var crontabsGVR = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

func cronTab(name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"cronSpec": "* * * * */5", "image": "my-cron-image", "replicas": replicas},
	}}
}

func TestPlatform(t *testing.T) {
	p := startPlatform(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if code, body := p.do(t, "GET", "/apis", ""); code != 200 {
		t.Fatalf("/apis: %d %s", code, body)
	}
	if code, body := p.do(t, "GET", "/apis", "", "Authorization", "Bearer wrong"); code != 401 || !strings.Contains(string(body), `"reason":"Unauthorized"`) {
		t.Fatalf("bad token: %d %s", code, body)
	}

	_, restB := p.addGateway(t)
	dynB, err := dynamic.NewForConfig(restB)
	if err != nil {
		t.Fatal(err)
	}

	// CRD create → Established.
	code, body := p.do(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crdJSON)
	if code != http.StatusCreated {
		t.Fatalf("create CRD: %d %s", code, body)
	}
	established := time.Now().Add(20 * time.Second)
	for {
		code, body := p.do(t, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com", "")
		if code == 200 && strings.Contains(string(body), `"type":"Established","status":"True"`) {
			break
		}
		if time.Now().After(established) {
			t.Fatalf("CRD never Established: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	dyn, err := dynamic.NewForConfig(p.rest)
	if err != nil {
		t.Fatal(err)
	}
	crs := dyn.Resource(crontabsGVR).Namespace("default")

	// A second gateway, running since before the CRD existed, serves the
	// new CRD's objects as soon as the client saw it Established (through
	// the first one): no sleeping, well within a second.
	start := time.Now()
	if _, err := dynB.Resource(crontabsGVR).Namespace("other").Create(ctx, cronTab("via-b", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the second gateway: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("create through the second gateway took %v", d)
	}

	// Watch from the start (list RV) while writing.
	list, err := crs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 0 || list.GetResourceVersion() == "" {
		t.Fatalf("empty list: %d items rv %q", len(list.Items), list.GetResourceVersion())
	}
	w, err := crs.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	// Create right after Established.
	a, err := crs.Create(ctx, cronTab("a", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if a.GetGeneration() != 1 || a.GetUID() == "" || a.GetResourceVersion() == "" {
		t.Fatalf("created: %+v", a.Object["metadata"])
	}
	expectEvent(t, w, watch.Added, "a")

	got, err := crs.Get(ctx, "a", metav1.GetOptions{})
	if err != nil || got.GetResourceVersion() != a.GetResourceVersion() {
		t.Fatalf("get: %v", err)
	}

	// Update: spec change bumps generation; a stale write conflicts.
	upd := got.DeepCopy()
	_ = unstructured.SetNestedField(upd.Object, int64(3), "spec", "replicas")
	updated, err := crs.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil || updated.GetGeneration() != 2 {
		t.Fatalf("update: %v gen %d", err, updated.GetGeneration())
	}
	expectEvent(t, w, watch.Modified, "a")
	_, err = crs.Update(ctx, upd, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `Operation cannot be fulfilled on crontabs.stable.example.com "a": the object has been modified`) {
		t.Fatalf("stale update: %v", err)
	}

	// Status subresource.
	st := updated.DeepCopy()
	st.Object["status"] = map[string]any{"phase": "Running"}
	if _, err := crs.UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	expectEvent(t, w, watch.Modified, "a")

	// Patch.
	patched, err := crs.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"image":"v2"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	if img, _, _ := unstructured.NestedString(patched.Object, "spec", "image"); img != "v2" || patched.GetGeneration() != 3 {
		t.Fatalf("patched: %v gen %d", patched.Object["spec"], patched.GetGeneration())
	}
	if phase, _, _ := unstructured.NestedString(patched.Object, "status", "phase"); phase != "Running" {
		t.Fatalf("status lost by patch: %v", patched.Object["status"])
	}
	expectEvent(t, w, watch.Modified, "a")

	// 422 with upstream's wording and causes.
	_, err = crs.Create(ctx, cronTab("bad", 15), metav1.CreateOptions{})
	var se *apierrors.StatusError
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid create: %v", err)
	}
	if se, _ = err.(*apierrors.StatusError); se == nil || se.ErrStatus.Message != `CronTab.stable.example.com "bad" is invalid: spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10` {
		t.Fatalf("422 message: %v", err)
	}
	if len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Field != "spec.replicas" {
		t.Fatalf("422 causes: %+v", se.ErrStatus.Details)
	}
	bad := cronTab("bad2", 0)
	_ = unstructured.SetNestedField(bad.Object, "nope", "spec", "cronSpec")
	_, err = crs.Create(ctx, bad, metav1.CreateOptions{})
	if se, _ = err.(*apierrors.StatusError); se == nil || !strings.HasPrefix(se.ErrStatus.Message, `CronTab.stable.example.com "bad2" is invalid: [`) || len(se.ErrStatus.Details.Causes) != 2 {
		t.Fatalf("two errors: %v", err)
	}

	// Unknown fields: 400 under fieldValidation=Strict.
	code, body = p.do(t, "POST", "/apis/stable.example.com/v1/namespaces/default/crontabs?fieldValidation=Strict",
		`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"strict"},"spec":{"bogus":1}}`)
	if code != 400 || !strings.Contains(string(body), `strict decoding error: unknown field \"spec.bogus\"`) {
		t.Fatalf("strict: %d %s", code, body)
	}

	// List sees the object; delete removes it.
	list, err = crs.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.GetKind() != "CronTabList" {
		t.Fatalf("list: %v %d", err, len(list.Items))
	}
	if err := crs.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	expectEvent(t, w, watch.Deleted, "a")
	if _, err := crs.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
}

func expectEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed, want %s %s", typ, name)
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			u, _ := ev.Object.(*unstructured.Unstructured)
			if ev.Type != typ || u == nil || u.GetName() != name {
				b, _ := json.Marshal(ev.Object)
				t.Fatalf("got %s %s, want %s %s", ev.Type, b, typ, name)
			}
			return
		case <-timeout:
			t.Fatalf("no %s event for %s", typ, name)
		}
	}
}
