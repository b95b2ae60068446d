package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

	"github.com/crdplane/crdplane/examples/crontab-conversion-webhook/conversion"
	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

var (
	ctV1beta1 = schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "crontabs"}
	ctV1      = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "crontabs"}
)

// conversionWebhook is the example CronTab conversion webhook, served over
// TLS from this process on a fixed loopback address (so it can stop and
// come back).
type conversionWebhook struct {
	addr    string
	caPEM   []byte
	cert    tls.Certificate
	handler *conversion.Handler
	srv     *http.Server
}

func startConversionWebhook(t *testing.T, names ...string) *conversionWebhook {
	t.Helper()
	pki, err := localpki.Generate(append([]string{"localhost"}, names...), []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	w := &conversionWebhook{addr: "127.0.0.1:0", caPEM: pki.CACertPEM, cert: cert, handler: &conversion.Handler{}}
	w.start(t)
	t.Cleanup(w.stop)
	return w
}

func (w *conversionWebhook) start(t *testing.T) {
	t.Helper()
	ln, err := tls.Listen("tcp", w.addr, &tls.Config{Certificates: []tls.Certificate{w.cert}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	w.addr = ln.Addr().String()
	w.srv = &http.Server{Handler: w.handler.Mux("/convert"), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
}

func (w *conversionWebhook) stop() {
	if w.srv != nil {
		_ = w.srv.Close()
	}
}

func (w *conversionWebhook) url() string { return "https://" + w.addr + "/convert" }

// conversionCRD is testdata/conversion-crontab-crd.yaml pointing at w.
func conversionCRD(t *testing.T, w *conversionWebhook) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(testdata("conversion-crontab-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.NewReplacer("WEBHOOK_URL", w.url(), "CA_BUNDLE", base64.StdEncoding.EncodeToString(w.caPEM)).Replace(string(b))
	return platformtest.Object(t, []byte(doc))
}

func cronTabAt(apiVersion, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": "CronTab",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"cronSpec": "* * * * */5", "replicas": int64(3)},
	}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

// storedAt reads an object straight from etcd: its apiVersion and body.
func storedAt(t *testing.T, p *platform.Platform, name string) (string, map[string]any, int64) {
	t.Helper()
	resp, err := p.EtcdClient().Get(context.Background(), "/registry/example.com/crontabs/default/"+name)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v (%d keys)", name, err, len(resp.Kvs))
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		t.Fatal(err)
	}
	av, _ := m["apiVersion"].(string)
	return av, m, resp.Kvs[0].ModRevision
}

func str(u *unstructured.Unstructured, field string) string {
	s, _, _ := unstructured.NestedString(u.Object, field)
	return s
}

// TestWebhookConversionE2E drives a two-version CRD whose versions convert
// through the example webhook (started here, TLS with a generated CA):
// writes and reads across versions, list and watch at the non-storage
// version, validation at the request version, a webhook failure and a
// webhook outage as Status errors, and a storage version change followed
// by `crdplane migrate-storage`.
func TestWebhookConversionE2E(t *testing.T) {
	p, cfg := platformtest.Start(t)
	wh := startConversionWebhook(t)
	dc := dynamic.NewForConfigOrDie(cfg)
	platformtest.CreateCRD(t, dc, conversionCRD(t, wh))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	beta, v1 := dc.Resource(ctV1beta1).Namespace("default"), dc.Resource(ctV1).Namespace("default")
	reviews := wh.handler.Reviews

	t.Run("create at v1beta1, read at v1", func(t *testing.T) {
		created, err := beta.Create(ctx, cronTabAt("example.com/v1beta1", "local", map[string]any{"hostPort": "localhost:1234"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.GetAPIVersion() != "example.com/v1beta1" || str(created, "hostPort") != "localhost:1234" {
			t.Fatalf("created: %v", created.Object)
		}
		before := reviews()
		got, err := v1.Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAPIVersion() != "example.com/v1" || str(got, "host") != "localhost" || str(got, "port") != "1234" || got.Object["hostPort"] != nil {
			t.Fatalf("read at v1: %v", got.Object)
		}
		if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
			t.Fatalf("metadata changed by conversion: %v", got.Object["metadata"])
		}
		if n := reviews() - before; n != 1 {
			t.Fatalf("%d webhook calls for one read", n)
		}
		// At the storage version: no webhook call.
		before = reviews()
		if _, err := beta.Get(ctx, "local", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := reviews() - before; n != 0 {
			t.Fatalf("%d webhook calls for a read at the stored version", n)
		}
	})

	t.Run("create at v1, read at v1beta1", func(t *testing.T) {
		created, err := v1.Create(ctx, cronTabAt("example.com/v1", "remote", map[string]any{"host": "example.com", "port": "2345"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.GetAPIVersion() != "example.com/v1" || str(created, "host") != "example.com" || str(created, "port") != "2345" {
			t.Fatalf("created: %v", created.Object)
		}
		if av, m, _ := storedAt(t, p, "remote"); av != "example.com/v1beta1" || m["hostPort"] != "example.com:2345" || m["host"] != nil {
			t.Fatalf("stored: %v", m)
		}
		got, err := beta.Get(ctx, "remote", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if str(got, "hostPort") != "example.com:2345" {
			t.Fatalf("read at v1beta1: %v", got.Object)
		}
	})

	t.Run("validation at the request version", func(t *testing.T) {
		_, err := v1.Create(ctx, cronTabAt("example.com/v1", "invalid", map[string]any{"host": "h", "port": "http"}), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `port: Invalid value: "http": port in body should match '^[0-9]+$'`) {
			t.Fatalf("v1 create with a non-numeric port: %v", err)
		}
		// v1beta1's schema has no such rule: accepted, and converted on reads.
		if _, err := beta.Create(ctx, cronTabAt("example.com/v1beta1", "lenient", map[string]any{"hostPort": "h:http"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		u := cronTabAt("example.com/v1", "too-many", map[string]any{"host": "h", "port": "1"})
		_ = unstructured.SetNestedField(u.Object, int64(11), "spec", "replicas")
		if _, err := v1.Create(ctx, u, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10") {
			t.Fatalf("v1 create over v1's maximum: %v", err)
		}
		if err := beta.Delete(ctx, "lenient", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("list, watch, update and patch at v1", func(t *testing.T) {
		before := reviews()
		list, err := v1.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// One call at most: objects converted before (the same
		// resourceVersion) come from the cache of converted objects.
		if n := reviews() - before; n > 1 {
			t.Fatalf("%d webhook calls for one list", n)
		}
		if list.GetAPIVersion() != "example.com/v1" || len(list.Items) != 2 {
			t.Fatalf("list: %s, %d items", list.GetAPIVersion(), len(list.Items))
		}
		for _, it := range list.Items {
			if it.GetAPIVersion() != "example.com/v1" || str(&it, "host") == "" || it.Object["hostPort"] != nil {
				t.Fatalf("item: %v", it.Object)
			}
		}
		w, err := v1.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		patched, err := v1.Patch(ctx, "local", types.MergePatchType, []byte(`{"port":"4321"}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if str(patched, "port") != "4321" || str(patched, "host") != "localhost" {
			t.Fatalf("patched: %v", patched.Object)
		}
		if _, m, _ := storedAt(t, p, "local"); m["hostPort"] != "localhost:4321" {
			t.Fatalf("stored after patch: %v", m)
		}
		upd := patched.DeepCopy()
		upd.Object["host"] = "127.0.0.1"
		if _, err := v1.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"localhost:4321", "127.0.0.1:4321"} {
			select {
			case ev := <-w.ResultChan():
				u, ok := ev.Object.(*unstructured.Unstructured)
				if ev.Type != watch.Modified || !ok || u.GetAPIVersion() != "example.com/v1" || str(u, "host")+":"+str(u, "port") != want {
					t.Fatalf("watch event %s %v, want MODIFIED at v1 with %s", ev.Type, ev.Object, want)
				}
			case <-ctx.Done():
				t.Fatal("no watch event")
			}
		}
		if _, m, _ := storedAt(t, p, "local"); m["hostPort"] != "127.0.0.1:4321" {
			t.Fatalf("stored after update: %v", m)
		}
	})

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	kc := &server{Kubeconfig: kubeconfig, cacheDir: filepath.Join(t.TempDir(), "cache")}

	// Server-side apply at one version over managedFields entries recorded
	// at the other: the validator converts the object through the
	// converter and the webhook to compare it with those entries, as
	// upstream's field manager does (conformance case 390 compares the
	// answers with upstream's).
	t.Run("server-side apply across versions", func(t *testing.T) {
		apply := func(ri dynamic.ResourceInterface, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
			return ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: manager, Force: force})
		}
		if _, err := apply(beta, cronTabAt("example.com/v1beta1", "ssa", map[string]any{"hostPort": "a.example:1"}), "applier-beta", false); err != nil {
			t.Fatal(err)
		}
		before := reviews()
		_, err := apply(v1, cronTabAt("example.com/v1", "ssa", map[string]any{"port": "2"}), "applier-v1", false)
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `Apply failed with 1 conflict: conflict with "applier-beta": .hostPort`) {
			t.Fatalf("apply at v1 over the v1beta1 applier's hostPort: %v", err)
		}
		if reviews() == before {
			t.Fatal("the conflict was found without converting the object")
		}
		got, err := apply(v1, cronTabAt("example.com/v1", "ssa", map[string]any{"port": "2"}), "applier-v1", true)
		if err != nil {
			t.Fatal(err)
		}
		if str(got, "host") != "a.example" || str(got, "port") != "2" {
			t.Fatalf("forced apply: %v", got.Object)
		}
		// The v1beta1 applier keeps its other fields, not hostPort.
		var managers []string
		for _, e := range got.GetManagedFields() {
			managers = append(managers, e.Manager+"@"+e.APIVersion)
			if e.Manager == "applier-beta" && strings.Contains(e.FieldsV1.GetRawString(), "f:hostPort") {
				t.Errorf("applier-beta still owns hostPort: %s", e.FieldsV1.GetRawString())
			}
		}
		if !slices.Equal(managers, []string{"applier-beta@example.com/v1beta1", "applier-v1@example.com/v1"}) {
			t.Fatalf("managedFields after the forced apply: %v", managers)
		}
	})

	t.Run("webhook failure", func(t *testing.T) {
		if _, err := beta.Create(ctx, cronTabAt("example.com/v1beta1", "bad", map[string]any{"hostPort": "nocolon"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		const msg = "conversion webhook for example.com/v1beta1, Kind=CronTab failed: hostPort could not be parsed into a separate host and port"
		_, err := v1.Get(ctx, "bad", metav1.GetOptions{})
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError || se.ErrStatus.Reason != "" || se.ErrStatus.Message != msg {
			t.Fatalf("read of an unconvertible object: %v", err)
		}
		if errOut := kc.fails(t, "get", "crontabs.v1.example.com", "bad"); strings.TrimSpace(errOut) != "Error from server: "+msg {
			t.Fatalf("kubectl: %q", errOut)
		}
		// The list fails as a whole (as upstream); single reads of others don't.
		if _, err := v1.List(ctx, metav1.ListOptions{}); !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError {
			t.Fatalf("list: %v", err)
		}
		if _, err := v1.Get(ctx, "remote", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := beta.Delete(ctx, "bad", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("webhook down, then back", func(t *testing.T) {
		if _, err := v1.Get(ctx, "remote", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		wh.stop()
		// Beyond upstream: an object version converted before is served
		// from the cache of converted objects without the webhook.
		if _, err := v1.Get(ctx, "remote", metav1.GetOptions{}); err != nil {
			t.Fatalf("read of a conversion served before, with the webhook down: %v", err)
		}
		// A new resourceVersion (written at the storage version, no
		// conversion) needs the webhook.
		cur, err := beta.Get(ctx, "remote", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.SetAnnotations(map[string]string{"changed": "while the webhook is down"})
		if _, err := beta.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = v1.Get(ctx, "remote", metav1.GetOptions{})
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError ||
			!strings.HasPrefix(se.ErrStatus.Message, `conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post "`+wh.url()+`?timeout=30s": dial tcp `+wh.addr) ||
			!strings.HasSuffix(se.ErrStatus.Message, "connection refused") {
			t.Fatalf("read with the webhook down: %v", err)
		}
		if _, err := v1.Create(ctx, cronTabAt("example.com/v1", "lost", map[string]any{"host": "h", "port": "1"}), metav1.CreateOptions{}); !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInternalServerError {
			t.Fatalf("write with the webhook down: %v", err)
		}
		// Reads that need no conversion still work.
		if _, err := beta.Get(ctx, "remote", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		wh.start(t)
		got, err := v1.Get(ctx, "remote", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("after the webhook came back: %v", err)
		}
		if str(got, "host") != "example.com" || str(got, "port") != "2345" {
			t.Fatalf("read: %v", got.Object)
		}
		if _, err := v1.Get(ctx, "lost", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the failed create left something: %v", err)
		}
	})

	t.Run("storage version change and migrate-storage", func(t *testing.T) {
		crds := dc.Resource(platformtest.CRDs)
		crd, err := crds.Get(ctx, "crontabs.example.com", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			v.(map[string]any)["storage"] = v.(map[string]any)["name"] == "v1"
		}
		_ = unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if sv := storedVersions(t, dc); !slices.Equal(sv, []string{"v1beta1", "v1"}) {
			t.Fatalf("storedVersions %v after the storage version change", sv)
		}
		// New writes go to v1 (once the gateway has seen the change).
		for i := 0; ; i++ {
			if _, err := beta.Create(ctx, cronTabAt("example.com/v1beta1", "new", map[string]any{"hostPort": "new.example.com:80"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			av, m, _ := storedAt(t, p, "new")
			if av == "example.com/v1" {
				if m["host"] != "new.example.com" || m["port"] != "80" {
					t.Fatalf("stored: %v", m)
				}
				break
			}
			if i == 50 {
				t.Fatalf("new object still stored at %s", av)
			}
			_ = beta.Delete(ctx, "new", metav1.DeleteOptions{})
			time.Sleep(20 * time.Millisecond)
		}
		for _, name := range []string{"local", "remote"} {
			if av, _, _ := storedAt(t, p, name); av != "example.com/v1beta1" {
				t.Fatalf("%s stored at %s before the migration", name, av)
			}
		}
		_, _, newRev := storedAt(t, p, "new")

		out := migrateStorage(t, kubeconfig, "--crd", "crontabs.example.com")
		t.Logf("migrate-storage:\n%s", out)
		for _, name := range []string{"local", "remote", "new"} {
			av, m, rev := storedAt(t, p, name)
			if av != "example.com/v1" || m["hostPort"] != nil || m["host"] == nil {
				// Upstream's storage compares the object encoded at the
				// storage version with the stored bytes, so an unchanged
				// update of an object stored at an older version rewrites
				// it: the gateway's no-op check must too.
				t.Fatalf("%s still stored at %s after an unchanged update at the storage version (the update must rewrite it at example.com/v1): %v", name, av, m)
			}
			if name == "new" && rev != newRev {
				t.Fatalf("an object already at v1 was written again (revision %d → %d)", newRev, rev)
			}
		}
		if sv := storedVersions(t, dc); !slices.Equal(sv, []string{"v1"}) {
			t.Fatalf("storedVersions %v after the migration", sv)
		}
		// Reads at v1beta1 convert from v1 now.
		got, err := beta.Get(ctx, "remote", metav1.GetOptions{})
		if err != nil || str(got, "hostPort") != "example.com:2345" {
			t.Fatalf("read at v1beta1: %v %v", err, got)
		}
		// Running it again is a no-op.
		if out := migrateStorage(t, kubeconfig); !strings.Contains(out, "crontabs.example.com: every object is stored at v1 already") {
			t.Fatalf("second run:\n%s", out)
		}
	})
}

func storedVersions(t *testing.T, dc dynamic.Interface) []string {
	t.Helper()
	crd, err := dc.Resource(platformtest.CRDs).Get(context.Background(), "crontabs.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sv, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	return sv
}

// migrateStorage runs `crdplane migrate-storage` and returns its output.
func migrateStorage(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, crdplaneBinary(t), append([]string{"migrate-storage", "--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("crdplane migrate-storage: %v\n%s", err, out)
	}
	return string(out)
}

// TestRunServiceWebhook: `crdplane run --service-endpoint` maps a CRD's
// clientConfig.service webhook to an address outside any cluster; the TLS
// server name stays the service's DNS name, as upstream checks it.
func TestRunServiceWebhook(t *testing.T) {
	wh := startConversionWebhook(t, "crontab-conversion.webhooks.svc")
	s := startServer(t, "", "--service-endpoint", "crontab-conversion.webhooks="+wh.addr)
	b, err := os.ReadFile(testdata("conversion-crontab-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := strings.NewReplacer(
		"url: WEBHOOK_URL", "service: {namespace: webhooks, name: crontab-conversion, path: /convert}",
		"CA_BUNDLE", base64.StdEncoding.EncodeToString(wh.caPEM)).Replace(string(b))
	s.mustIn(t, crd, "apply", "-f", "-")
	s.must(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/crontabs.example.com")
	s.mustIn(t, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"svc","namespace":"default"},"hostPort":"db.example.com:5432","spec":{"cronSpec":"* * * * */5"}}`, "create", "-f", "-")
	out := s.must(t, "get", "crontabs.v1.example.com", "svc", "-o", "jsonpath={.apiVersion} {.host} {.port}")
	if out != "example.com/v1 db.example.com 5432" {
		t.Fatalf("read at v1: %q", out)
	}
	if wh.handler.Reviews() == 0 {
		t.Fatal("the webhook saw no review")
	}
}
