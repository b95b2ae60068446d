package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/converter"
	"github.com/crdplane/crdplane/services/gateway"
	"github.com/crdplane/crdplane/services/gateway/localpki"
	"github.com/crdplane/crdplane/services/registry"
	"github.com/crdplane/crdplane/services/storage"
	"github.com/crdplane/crdplane/services/validator"
)

// TestAPIKubectl walks the custom-resource API surface with kubectl 1.33
// against `crdplane run`: printer columns (the reference's SPEC, REPLICAS,
// AGE example, -o wide), the scale and status subresources, finalizers,
// label and field selectors (the reference's shirts), cluster-scoped
// resources, all namespaces, chunked lists, get -w, server-side dry run,
// YAML output and --validate=strict|warn|false.
func TestAPIKubectl(t *testing.T) {
	s := startServer(t, "")
	s.must(t, "apply", "-f", testdata("api-crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
	s.must(t, "apply", "-f", testdata("api-crontab.yaml"))

	t.Run("printer columns", func(t *testing.T) {
		out := s.must(t, "get", "crontab", "my-new-cron-object")
		wantLines(t, out, `^NAME\s+SPEC\s+REPLICAS\s+AGE$`, `^my-new-cron-object\s+\* \* \* \* \*\s+1\s+\d+s$`)
		out = s.must(t, "get", "ct", "-o", "wide")
		wantLines(t, out, `^NAME\s+SPEC\s+REPLICAS\s+AGE\s+IMAGE$`, `^my-new-cron-object\s+\* \* \* \* \*\s+1\s+\d+s\s+my-awesome-cron-image$`)
		out = s.must(t, "get", "crd")
		wantLines(t, out, `^NAME\s+CREATED AT$`, `^crontabs\.stable\.example\.com\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	})

	t.Run("scale subresource", func(t *testing.T) {
		out := s.must(t, "scale", "--replicas=5", "crontabs/my-new-cron-object")
		if strings.TrimSpace(out) != "crontab.stable.example.com/my-new-cron-object scaled" {
			t.Fatalf("scale: %q", out)
		}
		if out := s.must(t, "get", "crontabs", "my-new-cron-object", "-o", "jsonpath={.spec.replicas}"); out != "5" {
			t.Fatalf("replicas after scale: %q", out)
		}
		s.must(t, "patch", "ct", "my-new-cron-object", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":3,"labelSelector":"app=cron"}}`)
		out = s.must(t, "get", "ct", "my-new-cron-object", "--subresource=scale")
		wantLines(t, out, `^NAME\s+DESIRED\s+AVAILABLE\s+AGE$`, `^my-new-cron-object\s+5\s+3\s+\d+s$`)
		out = s.must(t, "get", "ct", "my-new-cron-object", "--subresource=scale", "-o", "jsonpath={.apiVersion}/{.kind} {.spec.replicas} {.status.replicas} {.status.selector}")
		if out != "autoscaling/v1/Scale 5 3 app=cron" {
			t.Fatalf("scale object: %q", out)
		}
		if errOut := s.fails(t, "scale", "--replicas=2", "--current-replicas=4", "ct/my-new-cron-object"); !strings.Contains(errOut, "Expected replicas to be 4, was 5") {
			t.Fatalf("precondition: %s", errOut)
		}
	})

	t.Run("status subresource and generation", func(t *testing.T) {
		gen := func() string {
			return s.must(t, "get", "ct", "my-new-cron-object", "-o", "jsonpath={.metadata.generation}")
		}
		before := gen()
		// The main resource ignores .status; the status subresource changes
		// only .status; neither bumps the generation.
		if out := s.must(t, "patch", "ct", "my-new-cron-object", "--type=merge", "-p", `{"status":{"replicas":9}}`); !strings.Contains(out, "patched (no change)") {
			t.Fatalf("status through the main resource: %s", out)
		}
		s.must(t, "patch", "ct", "my-new-cron-object", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":4},"spec":{"replicas":7}}`)
		if out := s.must(t, "get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.replicas} {.status.replicas}"); out != "5 4" || gen() != before {
			t.Fatalf("status write: %q generation %s (was %s)", out, gen(), before)
		}
		// Status writes validate the status.
		errOut := s.fails(t, "patch", "ct", "my-new-cron-object", "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":"x"}}`)
		if !strings.Contains(errOut, `status.replicas: Invalid value: "string": replicas in body must be of type integer: "string"`) {
			t.Fatalf("invalid status: %s", errOut)
		}
		// A spec change bumps it.
		s.must(t, "patch", "ct", "my-new-cron-object", "--type=merge", "-p", `{"spec":{"image":"other"}}`)
		if g := gen(); g == before {
			t.Fatalf("spec change kept generation %s", g)
		}
	})

	t.Run("finalizers", func(t *testing.T) {
		s.mustIn(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"held","finalizers":["stable.example.com/finalizer"]},"spec":{"replicas":1}}`, "create", "-f", "-")
		if out := s.must(t, "delete", "ct", "held", "--wait=false"); strings.TrimSpace(out) != `crontab.stable.example.com "held" deleted` {
			t.Fatalf("delete: %q", out)
		}
		if ts := s.must(t, "get", "ct", "held", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
			t.Fatal("no deletionTimestamp")
		}
		// Once deleting, finalizers can only be removed.
		errOut := s.fails(t, "patch", "ct", "held", "--type=merge", "-p", `{"metadata":{"finalizers":["stable.example.com/finalizer","stable.example.com/other"]}}`)
		if !strings.Contains(errOut, `metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"stable.example.com/other"}`) {
			t.Fatalf("new finalizer: %s", errOut)
		}
		// Deleting again changes nothing; removing the last finalizer deletes it.
		s.must(t, "delete", "ct", "held", "--wait=false")
		s.must(t, "patch", "ct", "held", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		if errOut := s.fails(t, "get", "ct", "held"); !strings.Contains(errOut, `crontabs.stable.example.com "held" not found`) {
			t.Fatalf("get after finalizers: %s", errOut)
		}
	})

	t.Run("all namespaces, label selectors, chunks", func(t *testing.T) {
		for _, o := range []struct{ ns, name, labels string }{
			{"team-a", "a1", `{"env":"prod","tier":"web"}`},
			{"team-a", "a2", `{"env":"staging","tier":"db","legacy":"yes"}`},
			{"team-b", "b1", `{"env":"prod","tier":"db"}`},
			{"team-b", "b2", `{"env":"dev"}`},
		} {
			s.mustIn(t, fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":%q,"namespace":%q,"labels":%s},"spec":{"replicas":1}}`, o.name, o.ns, o.labels), "create", "-f", "-")
		}
		names := func(args ...string) string {
			out := s.must(t, append([]string{"get", "ct", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}"}, args...)...)
			return strings.TrimSpace(out)
		}
		if got := names("-l", "env in (prod,staging),!legacy"); got != "team-a/a1 team-b/b1" {
			t.Fatalf("set-based selector: %q", got)
		}
		if got := names("-l", "tier,tier!=web"); got != "team-a/a2 team-b/b1" {
			t.Fatalf("exists and not-equal: %q", got)
		}
		if got := names("-l", "env notin (prod),env"); got != "team-a/a2 team-b/b2" {
			t.Fatalf("notin: %q", got)
		}
		if got := names("--field-selector", "metadata.namespace=team-b,metadata.name!=b2"); got != "team-b/b1" {
			t.Fatalf("field selector: %q", got)
		}
		out := s.must(t, "get", "ct", "-A", "-l", "env=prod")
		// (No cronSpec: the SPEC cell is null, printed empty.)
		wantLines(t, out, `^NAMESPACE\s+NAME\s+SPEC\s+REPLICAS\s+AGE$`, `^team-a\s+a1\s+1\s+\d+s$`, `^team-b\s+b1\s+1\s+\d+s$`)
		// Chunked: every object, one request per object.
		if got := names("--chunk-size=1"); got != "default/my-new-cron-object team-a/a1 team-a/a2 team-b/b1 team-b/b2" {
			t.Fatalf("chunked: %q", got)
		}
		if errOut := s.fails(t, "get", "ct", "-l", "env in (prod"); !strings.Contains(errOut, "unable to parse requirement") && !strings.Contains(errOut, "found '', expected: ',' or ')'") {
			t.Fatalf("bad selector: %s", errOut)
		}
	})

	t.Run("field selectors of the reference", func(t *testing.T) {
		s.must(t, "apply", "-f", testdata("api-shirt-crd.yaml"))
		s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/shirts.stable.example.com")
		s.must(t, "apply", "-f", testdata("api-shirts.yaml"))
		out := s.must(t, "get", "shirts.stable.example.com")
		wantLines(t, out, `^NAME\s+COLOR\s+SIZE$`, `^example1\s+blue\s+S$`, `^example2\s+blue\s+M$`, `^example3\s+green\s+M$`)
		out = s.must(t, "get", "shirts.stable.example.com", "--field-selector", "spec.color=blue")
		if n := strings.Count(out, "\n"); n != 3 || !strings.Contains(out, "example1") || !strings.Contains(out, "example2") {
			t.Fatalf("blue shirts:\n%s", out)
		}
		// (The reference prints example2 here; upstream answers example3.)
		out = s.must(t, "get", "shirts.stable.example.com", "--field-selector", "spec.color=green,spec.size=M")
		wantLines(t, out, `^example3\s+green\s+M$`)
		if errOut := s.fails(t, "get", "shirts.stable.example.com", "--field-selector", "spec.style=polo"); !strings.Contains(errOut, "field label not supported: spec.style") {
			t.Fatalf("unsupported field: %s", errOut)
		}
		// Field selectors on a watch.
		out = s.must(t, "get", "shirts.stable.example.com", "--field-selector", "spec.size=M", "-w", "--request-timeout=2s", "-o", "name")
		if strings.TrimSpace(out) != "shirt.stable.example.com/example2\nshirt.stable.example.com/example3" {
			t.Fatalf("watch with field selector: %q", out)
		}
	})

	t.Run("cluster-scoped", func(t *testing.T) {
		s.must(t, "apply", "-f", testdata("api-widget-crd.yaml"))
		s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.example.com")
		s.mustIn(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":"L"}}`, "create", "-f", "-")
		out := s.must(t, "get", "widgets", "-o", "jsonpath={.items[0].metadata.name}/{.items[0].metadata.namespace}")
		if out != "w1/" {
			t.Fatalf("cluster-scoped list: %q", out)
		}
		if errOut := s.fails(t, "get", "widgets", "--field-selector", "metadata.namespace=default"); !strings.Contains(errOut, "field label not supported: metadata.namespace") {
			t.Fatalf("namespace selector on a cluster-scoped resource: %s", errOut)
		}
		if errOut := s.fails(t, "get", "--raw", "/apis/example.com/v1/namespaces/default/widgets"); !strings.Contains(errOut, "NotFound") {
			t.Fatalf("namespaced path: %s", errOut)
		}
		s.must(t, "delete", "widget", "w1")
	})

	t.Run("get -w", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kubectlBinary(), "--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir,
			"get", "ct", "-w", "--output-watch-events", "--request-timeout=8s")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 64)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		expect := func(pattern string) {
			t.Helper()
			re := regexp.MustCompile(pattern)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("watch ended before %s", pattern)
					}
					if re.MatchString(l) {
						return
					}
				case <-ctx.Done():
					t.Fatalf("no line matching %s", pattern)
				}
			}
		}
		expect(`^EVENT\s+NAME\s+SPEC\s+REPLICAS\s+AGE$`)
		expect(`^ADDED\s+my-new-cron-object\s+`)
		s.mustIn(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"watched"},"spec":{"cronSpec":"*/5 * * * *","replicas":2}}`, "create", "-f", "-")
		expect(`^ADDED\s+watched\s+\*/5 \* \* \* \*\s+2\s+\d+s$`)
		s.must(t, "scale", "--replicas=3", "ct/watched")
		expect(`^MODIFIED\s+watched\s+\*/5 \* \* \* \*\s+3\s+`)
		s.must(t, "delete", "ct", "watched")
		expect(`^DELETED\s+watched\s+`)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})

	t.Run("dry run, YAML, pretty", func(t *testing.T) {
		out := s.mustIn(t, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"dry"},"spec":{"replicas":1}}`, "create", "-f", "-", "--dry-run=server", "-o", "yaml")
		for _, want := range []string{"uid: ", "creationTimestamp: ", "namespace: default", "generation: 1"} {
			if !strings.Contains(out, want) {
				t.Fatalf("dry run lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "resourceVersion") {
			t.Fatalf("dry-run create has a resourceVersion:\n%s", out)
		}
		if errOut := s.fails(t, "get", "ct", "dry"); !strings.Contains(errOut, `crontabs.stable.example.com "dry" not found`) {
			t.Fatalf("dry run stored the object: %s", errOut)
		}
		s.must(t, "scale", "--replicas=9", "ct/my-new-cron-object", "--dry-run=server")
		if out := s.must(t, "get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.replicas}"); out != "5" {
			t.Fatalf("dry-run scale stored: %s", out)
		}
		out = s.must(t, "get", "--raw", "/apis/stable.example.com/v1/namespaces/default/crontabs/my-new-cron-object?pretty=true")
		if !strings.HasPrefix(out, "{\n  \"apiVersion\": \"stable.example.com/v1\",\n") {
			t.Fatalf("pretty:\n%s", out)
		}
	})

	t.Run("field validation", func(t *testing.T) {
		const obj = `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"%s"},"spec":{"replicas":1,"bogus":true}}`
		_, errOut, err := s.kubectl(t, fmt.Sprintf(obj, "strict"), "create", "--validate=strict", "-f", "-")
		if err == nil || !strings.Contains(errOut, `CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "spec.bogus"`) {
			t.Fatalf("strict: %v %s", err, errOut)
		}
		out, errOut, err := s.kubectl(t, fmt.Sprintf(obj, "warn"), "create", "--validate=warn", "-f", "-")
		if err != nil || !strings.Contains(errOut, `Warning: unknown field "spec.bogus"`) || !strings.Contains(out, "created") {
			t.Fatalf("warn: %v %s %s", err, out, errOut)
		}
		out, errOut, err = s.kubectl(t, fmt.Sprintf(obj, "ignore"), "create", "--validate=false", "-f", "-")
		if err != nil || strings.Contains(errOut, "Warning") || !strings.Contains(out, "created") {
			t.Fatalf("ignore: %v %s %s", err, out, errOut)
		}
		if out := s.must(t, "get", "ct", "ignore", "-o", "jsonpath={.spec}"); strings.Contains(out, "bogus") {
			t.Fatalf("unknown field stored: %s", out)
		}
	})
}

// mustIn runs kubectl with stdin and fails the test on error.
func (s *server) mustIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// wantLines fails unless every pattern matches a line of out.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Fatalf("no line matches %s in:\n%s", p, out)
		}
	}
}

// apiClient is an in-process platform with a dynamic client and raw HTTPS
// access.
type apiClient struct {
	p    *platform.Platform
	cfg  *rest.Config
	dc   dynamic.Interface
	http *http.Client
}

func startAPI(t *testing.T) *apiClient {
	t.Helper()
	p, cfg := platformtest.Start(t)
	dc := dynamic.NewForConfigOrDie(cfg)
	platformtest.CreateCRD(t, dc, readObject(t, "api-crontab-crd.yaml"))
	return &apiClient{p: p, cfg: cfg, dc: dc, http: platformtest.HTTPClient(p)}
}

// raw sends one request and returns the response (body read) and its body.
func (c *apiClient) raw(t *testing.T, method, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.p.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.p.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func cronTabObj(ns, name string, labels map[string]string, replicas int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1",
		"kind":       "CronTab",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"cronSpec": "* * * * *", "image": "img", "replicas": replicas},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func itemNames(l *unstructured.UnstructuredList) string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.GetName())
	}
	return strings.Join(out, ",")
}

// TestAPIClientGo checks with client-go (and raw HTTPS where it shows the
// wire) what kubectl cannot express: status and scale writes through the
// dynamic client, deleteCollection with selectors, resourceVersion and
// resourceVersionMatch on get and list, consistent pagination and its
// expiry, watch semantics and frames, and the request limits.
func TestAPIClientGo(t *testing.T) {
	c := startAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cts := c.dc.Resource(platformtest.CronTabs).Namespace("default")

	t.Run("status and scale", func(t *testing.T) {
		o, err := cts.Create(ctx, cronTabObj("default", "st", nil, 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// UpdateStatus changes only status; Update ignores status.
		o.Object["status"] = map[string]any{"replicas": int64(2)}
		_ = unstructured.SetNestedField(o.Object, int64(8), "spec", "replicas")
		st, err := cts.UpdateStatus(ctx, o, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(st.Object, "spec", "replicas"); r != 2 || st.GetGeneration() != 1 {
			t.Fatalf("status update changed spec: %v gen %d", st.Object["spec"], st.GetGeneration())
		}
		st.Object["status"] = map[string]any{"replicas": int64(7)}
		_ = unstructured.SetNestedField(st.Object, int64(3), "spec", "replicas")
		up, err := cts.Update(ctx, st, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(up.Object, "status", "replicas"); r != 2 || up.GetGeneration() != 2 {
			t.Fatalf("main update changed status: %v gen %d", up.Object["status"], up.GetGeneration())
		}
		sc, err := cts.Get(ctx, "st", metav1.GetOptions{}, "scale")
		if err != nil {
			t.Fatal(err)
		}
		if sc.GetKind() != "Scale" || sc.GetAPIVersion() != "autoscaling/v1" {
			t.Fatalf("scale: %v", sc.Object)
		}
		_ = unstructured.SetNestedField(sc.Object, int64(6), "spec", "replicas")
		if _, err := cts.Update(ctx, sc, metav1.UpdateOptions{}, "scale"); err != nil {
			t.Fatal(err)
		}
		// The scale's resourceVersion is a precondition.
		if _, err := cts.Update(ctx, sc, metav1.UpdateOptions{}, "scale"); !apierrors.IsConflict(err) {
			t.Fatalf("stale scale: %v", err)
		}
		got, _ := cts.Get(ctx, "st", metav1.GetOptions{})
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 6 || got.GetGeneration() != 3 {
			t.Fatalf("after scale: %v gen %d", got.Object["spec"], got.GetGeneration())
		}
		if err := cts.Delete(ctx, "st", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("deleteCollection with selectors", func(t *testing.T) {
		ns := c.dc.Resource(platformtest.CronTabs).Namespace("dc")
		for i, l := range []map[string]string{{"app": "x"}, {"app": "x"}, {"app": "y"}, {"app": "x", "keep": "1"}} {
			o := cronTabObj("dc", fmt.Sprintf("o%d", i), l, 1)
			if i == 1 {
				o.SetFinalizers([]string{"example.com/hold"})
			}
			if _, err := ns.Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := ns.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=x,!keep", FieldSelector: "metadata.name!=o9"}); err != nil {
			t.Fatal(err)
		}
		l, err := ns.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// o0 is gone, o1 (finalizer) is marked, o2 and o3 do not match.
		if itemNames(l) != "o1,o2,o3" || l.Items[0].GetDeletionTimestamp() == nil || l.Items[1].GetDeletionTimestamp() != nil {
			t.Fatalf("after deleteCollection: %s", itemNames(l))
		}
		if _, err := ns.Patch(ctx, "o1", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.Get(ctx, "o1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("o1 after its finalizer: %v", err)
		}
	})

	pg := c.dc.Resource(platformtest.CronTabs).Namespace("pg")
	for i := range 5 {
		if _, err := pg.Create(ctx, cronTabObj("pg", fmt.Sprintf("p%d", i), nil, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("resourceVersion semantics", func(t *testing.T) {
		l, err := pg.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv := l.GetResourceVersion()
		if _, err := pg.Create(ctx, cronTabObj("pg", "later", nil, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		exact, err := pg.List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil || itemNames(exact) != "p0,p1,p2,p3,p4" || exact.GetResourceVersion() != rv {
			t.Fatalf("exact: %v %s", err, itemNames(exact))
		}
		newer, err := pg.List(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil || !strings.Contains(itemNames(newer), "later") {
			t.Fatalf("not older than: %v %s", err, itemNames(newer))
		}
		if any, err := pg.List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil || len(any.Items) != 6 {
			t.Fatalf("rv 0: %v", err)
		}
		var n int64
		if _, err := fmt.Sscan(rv, &n); err != nil {
			t.Fatalf("resourceVersion %q: %v", rv, err)
		}
		future := fmt.Sprint(n + 100000)
		// A read at a future resourceVersion waits 3s, then 504 with
		// Retry-After: 1, which client-go retries (up to 10 times, as
		// against kube-apiserver): read the wire instead.
		for _, path := range []string{"/apis/stable.example.com/v1/namespaces/pg/crontabs?resourceVersion=" + future, "/apis/stable.example.com/v1/namespaces/pg/crontabs/p0?resourceVersion=" + future} {
			resp, body := c.raw(t, "GET", path, "")
			if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "Too large resource version: "+future) {
				t.Fatalf("future read %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
		}
		if o, err := pg.Get(ctx, "p0", metav1.GetOptions{ResourceVersion: rv}); err != nil || o.GetName() != "p0" {
			t.Fatalf("get not older than: %v", err)
		}
		if _, err := pg.List(ctx, metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsInvalid(err) {
			t.Fatalf("exact without rv: %v", err)
		}
		if err := pg.Delete(ctx, "later", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("pagination and its expiry", func(t *testing.T) {
		p1, err := pg.List(ctx, metav1.ListOptions{Limit: 2})
		if err != nil || itemNames(p1) != "p0,p1" || p1.GetContinue() == "" || p1.GetRemainingItemCount() == nil || *p1.GetRemainingItemCount() != 3 {
			t.Fatalf("page 1: %v %s", err, itemNames(p1))
		}
		// Writes after the first page do not show in the next ones.
		if _, err := pg.Create(ctx, cronTabObj("pg", "p2a", nil, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p2, err := pg.List(ctx, metav1.ListOptions{Limit: 2, Continue: p1.GetContinue()})
		if err != nil || itemNames(p2) != "p2,p3" || p2.GetResourceVersion() != p1.GetResourceVersion() {
			t.Fatalf("page 2: %v %s", err, itemNames(p2))
		}
		compact(t, c.p)
		_, err = pg.List(ctx, metav1.ListOptions{Limit: 2, Continue: p2.GetContinue()})
		se, ok := err.(*apierrors.StatusError)
		if !ok || !apierrors.IsResourceExpired(err) || se.ErrStatus.Code != 410 || se.ErrStatus.Continue == "" ||
			!strings.HasPrefix(se.ErrStatus.Message, "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response") {
			t.Fatalf("expired continue: %#v", err)
		}
		rest, err := pg.List(ctx, metav1.ListOptions{Limit: 10, Continue: se.ErrStatus.Continue})
		if err != nil || itemNames(rest) != "p4" {
			t.Fatalf("continue from the latest: %v %s", err, itemNames(rest))
		}
	})

	t.Run("watch", func(t *testing.T) {
		wns := c.dc.Resource(platformtest.CronTabs).Namespace("w")
		a, err := wns.Create(ctx, cronTabObj("w", "a", nil, 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// resourceVersion unset: the current state first.
		w, err := wns.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nextEvent(t, w, watch.Added, "a")
		b, err := wns.Create(ctx, cronTabObj("w", "b", nil, 1), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nextEvent(t, w, watch.Added, "b")
		w.Stop()
		// Resume from a revision: only what came after.
		if _, err := wns.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err = wns.Watch(ctx, metav1.ListOptions{ResourceVersion: a.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		nextEvent(t, w, watch.Added, "b")
		nextEvent(t, w, watch.Modified, "a")
		w.Stop()
		// A label-selected watch from b's revision sees a enter and leave.
		w, err = wns.Watch(ctx, metav1.ListOptions{ResourceVersion: b.GetResourceVersion(), LabelSelector: "sel=yes"})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = wns.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"sel":"yes"}}}`), metav1.PatchOptions{})
		nextEvent(t, w, watch.Added, "b")
		_, _ = wns.Patch(ctx, "b", types.MergePatchType, []byte(`{"metadata":{"labels":{"sel":"no"}}}`), metav1.PatchOptions{})
		nextEvent(t, w, watch.Deleted, "b")
		w.Stop()
		// A watch list is refused: the WatchList feature gate is off in
		// Kubernetes 1.33, and client-go falls back to list and watch.
		yes := true
		if _, err := wns.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}); !apierrors.IsInvalid(err) ||
			!strings.Contains(err.Error(), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled") {
			t.Fatalf("watch list: %v", err)
		}
		// timeoutSeconds ends the stream.
		one := int64(1)
		w, err = wns.Watch(ctx, metav1.ListOptions{ResourceVersion: b.GetResourceVersion(), TimeoutSeconds: &one})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case _, ok := <-w.ResultChan():
			for ok {
				_, ok = <-w.ResultChan()
			}
		case <-time.After(5 * time.Second):
			t.Fatal("timeoutSeconds=1 did not end the watch")
		}
		// The frames on the wire.
		resp, body := c.raw(t, "GET", "/apis/stable.example.com/v1/namespaces/w/crontabs?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Da", "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Transfer-Encoding") != "" && resp.ProtoMajor == 1 {
			t.Fatalf("watch response %d %v", resp.StatusCode, resp.Header)
		}
		frames := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
		if len(frames) != 1 || !strings.HasPrefix(frames[0], `{"type":"ADDED","object":{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{`) || !strings.HasSuffix(frames[0], "}}") {
			t.Fatalf("frames: %q", body)
		}
		// A compacted revision: an ERROR event carrying 410 Expired.
		compact(t, c.p)
		w, err = wns.Watch(ctx, metav1.ListOptions{ResourceVersion: a.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		ev := nextEvent(t, w, watch.Error, "")
		if st := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(st) || !strings.HasPrefix(st.Error(), "too old resource version: "+a.GetResourceVersion()) {
			t.Fatalf("compacted watch: %v", st)
		}
		w.Stop()
	})

	t.Run("limits", func(t *testing.T) {
		base := "/apis/stable.example.com/v1/namespaces/default/crontabs"
		big := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"big"},"spec":{"image":"` + strings.Repeat("x", 3<<20) + `"}}`
		if resp, body := c.raw(t, "POST", base, big); resp.StatusCode != 413 || !strings.Contains(string(body), `"reason":"RequestEntityTooLarge"`) {
			t.Fatalf("413: %d %s", resp.StatusCode, body)
		}
		deep := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"deep"},"spec":{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`
		if resp, body := c.raw(t, "POST", base, deep); resp.StatusCode != 400 || !strings.Contains(string(body), "exceeded max depth") {
			t.Fatalf("deep: %d %s", resp.StatusCode, body)
		}
		if resp, body := c.raw(t, "GET", base+"?timeout=1x", ""); resp.StatusCode != 400 || !strings.Contains(string(body), "invalid timeout specified in the request URL") {
			t.Fatalf("timeout: %d %s", resp.StatusCode, body)
		}
		// A client trickling its body is cut off at ?timeout with a 504.
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", c.p.URL+base+"?timeout=1s", pr)
		req.Header.Set("Authorization", "Bearer "+c.p.Token)
		req.Header.Set("Content-Type", "application/json")
		go func() { _, _ = pw.Write([]byte(`{"apiVersion":`)) }()
		start := time.Now()
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = pw.Close()
		if resp.StatusCode != 504 || !strings.Contains(string(body), "Timeout: request did not complete within the allotted timeout") || time.Since(start) > 10*time.Second {
			t.Fatalf("slow body: %d %s after %v", resp.StatusCode, body, time.Since(start))
		}
	})

	t.Run("table and metadata", func(t *testing.T) {
		resp, body := c.raw(t, "GET", "/apis/stable.example.com/v1/namespaces/pg/crontabs?limit=2", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		var tbl metav1.Table
		if err := json.Unmarshal(body, &tbl); err != nil || resp.StatusCode != 200 {
			t.Fatalf("table: %d %s", resp.StatusCode, body)
		}
		if tbl.Kind != "Table" || len(tbl.ColumnDefinitions) != 5 || tbl.ColumnDefinitions[4].Priority != 1 || len(tbl.Rows) != 2 || tbl.Continue == "" {
			t.Fatalf("table: %s", body)
		}
		if got := fmt.Sprint(tbl.Rows[0].Cells[:3]); got != "[p0 * * * * * 1]" {
			t.Fatalf("cells %s", got)
		}
		resp, body = c.raw(t, "GET", "/apis/stable.example.com/v1/namespaces/pg/crontabs/p0", "", "Accept", "application/yaml")
		if resp.Header.Get("Content-Type") != "application/yaml" || !bytes.HasPrefix(body, []byte("apiVersion: stable.example.com/v1\nkind: CronTab\n")) {
			t.Fatalf("yaml: %s", body)
		}
		resp, body = c.raw(t, "GET", "/apis/stable.example.com/v1/namespaces/pg/crontabs/p0", "", "Accept", "application/vnd.kubernetes.protobuf")
		// upstream's 406, encoded in protobuf for a protobuf client
		if resp.StatusCode != 406 || resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !strings.Contains(string(body), "NotAcceptable") {
			t.Fatalf("protobuf: %d %s", resp.StatusCode, body)
		}
	})
}

// compact compacts etcd's history up to now (after one more write, so
// that the newest object revisions are history too).
func compact(t *testing.T, p *platform.Platform) {
	t.Helper()
	resp, err := p.EtcdClient().Put(context.Background(), "/e2e-compaction-marker", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EtcdClient().Compact(context.Background(), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
}

func nextEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch ended, want %s %s", typ, name)
		}
		got := ""
		if u, ok := ev.Object.(*unstructured.Unstructured); ok {
			got = u.GetName()
		}
		if ev.Type != typ || got != name {
			t.Fatalf("got %s %q, want %s %q", ev.Type, got, typ, name)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s %s event", typ, name)
	}
	return watch.Event{}
}

// backends are storage, registry, validator and converter served in this
// process, for tests that run gateways of their own.
type backends struct {
	storageAddr, registryAddr, validatorAddr, converterAddr string
}

var backendSeq atomic.Int64

func startBackends(t *testing.T) *backends {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := backendSeq.Add(1)
	serve := func(name string, register func(grpc.ServiceRegistrar)) string {
		addr := fmt.Sprintf("e2e-api-%s-%d", name, n)
		srv := grpcx.NewServer()
		register(srv)
		lis := grpcx.ListenInProcess(addr)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return "inproc://" + addr
	}
	b := &backends{}
	sto, err := storage.New(ctx, storage.Config{DataDir: t.TempDir(), EtcdLogLevel: "error", UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sto.Close() })
	b.storageAddr = serve("storage", sto.Register)
	reg, err := registry.New(ctx, registry.Config{StorageAddr: b.storageAddr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	b.registryAddr = serve("registry", reg.Register)
	// The validator's converter is the one served below (connected on first use).
	val, err := validator.New(ctx, validator.Config{RegistryAddr: b.registryAddr, ConverterAddr: fmt.Sprintf("inproc://e2e-api-converter-%d", n)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = val.Close() })
	b.validatorAddr = serve("validator", val.Register)
	conv, err := converter.New(ctx, converter.Config{RegistryAddr: b.registryAddr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conv.Close() })
	b.converterAddr = serve("converter", conv.Register)
	return b
}

// runningGateway is a gateway serving HTTPS until stop.
type runningGateway struct {
	gw   *gateway.Service
	stop func()
}

// startGateway serves a gateway on addr ("127.0.0.1:0" picks a port).
func (b *backends) startGateway(t *testing.T, addr string, pki *localpki.PKI, token string) *runningGateway {
	t.Helper()
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), gateway.Config{
		ListenAddr: addr, RegistryAddr: b.registryAddr, ValidatorAddr: b.validatorAddr, ConverterAddr: b.converterAddr,
		StorageAddr: b.storageAddr, TLSCert: &cert, Tokens: []string{token}, ShutdownGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; _ = gw.Close() }) }
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for gw.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready: %v", gw.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &runningGateway{gw: gw, stop: stop}
}

// storeState is an informer store's view: name → resourceVersion.
func storeState(store cache.Store) map[string]string {
	out := map[string]string{}
	for _, o := range store.List() {
		u := o.(*unstructured.Unstructured)
		out[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
	}
	return out
}

func listState(t *testing.T, ri dynamic.ResourceInterface) map[string]string {
	t.Helper()
	l, err := ri.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range l.Items {
		out[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
	}
	return out
}

// waitInSync waits until the informer's store equals the server's state.
func waitInSync(t *testing.T, store cache.Store, truth func() map[string]string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		want, got := truth(), storeState(store)
		if fmt.Sprint(sortedPairs(want)) == fmt.Sprint(sortedPairs(got)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("informer out of sync:\n got %v\nwant %v", sortedPairs(got), sortedPairs(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"@"+v)
	}
	sort.Strings(out)
	return out
}

// TestAPIInformerAcrossGatewayRestart: a client-go informer follows one
// gateway; the gateway stops while another one takes writes, then comes
// back at the same address. The informer resumes (from its last revision)
// and ends in sync with the server.
func TestAPIInformerAcrossGatewayRestart(t *testing.T) {
	b := startBackends(t)
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	const token = "e2e-api-token"
	a := b.startGateway(t, "127.0.0.1:0", pki, token)
	addrA := a.gw.Addr()
	writer := b.startGateway(t, "127.0.0.1:0", pki, token)
	cfg := func(addr string) *rest.Config {
		return &rest.Config{Host: "https://" + addr, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: pki.CACertPEM, ServerName: "localhost"}, QPS: -1}
	}
	dcW := dynamic.NewForConfigOrDie(cfg(writer.gw.Addr()))
	platformtest.CreateCRD(t, dcW, readObject(t, "api-crontab-crd.yaml"))
	cts := dcW.Resource(platformtest.CronTabs).Namespace("default")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 5 {
		if _, err := cts.Create(ctx, cronTabObj("default", fmt.Sprintf("r%d", i), nil, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg(addrA)), 0, "default", nil)
	inf := factory.ForResource(platformtest.CronTabs).Informer()
	stopInf := make(chan struct{})
	defer close(stopInf)
	factory.Start(stopInf)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	truth := func() map[string]string { return listState(t, cts) }
	waitInSync(t, inf.GetStore(), truth, 10*time.Second)

	a.stop()
	// Writes while the informer's gateway is away.
	if err := cts.Delete(ctx, "r0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cts.Patch(ctx, "r1", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cts.Create(ctx, cronTabObj("default", "r9", nil, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.startGateway(t, addrA, pki, token)
	waitInSync(t, inf.GetStore(), truth, 30*time.Second)
	// And it keeps following.
	if _, err := cts.Create(ctx, cronTabObj("default", "r10", nil, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitInSync(t, inf.GetStore(), truth, 10*time.Second)
}

// TestAPIInformerUnderLoad: an informer (list, watch, 1s resync) stays
// correct while objects are created, updated and deleted at a few hundred
// per second: its event stream never goes back in time for an object, and
// its store ends equal to the server's state.
func TestAPIInformerUnderLoad(t *testing.T) {
	c := startAPI(t)
	cts := c.dc.Resource(platformtest.CronTabs).Namespace("load")
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dc, time.Second, "load", nil)
	inf := factory.ForResource(platformtest.CronTabs).Informer()

	var (
		mu        sync.Mutex
		lastRV    = map[string]int64{}
		problems  []string
		resyncs   atomic.Int64
		delivered atomic.Int64
	)
	rvOf := func(o any) (string, int64) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		u := o.(*unstructured.Unstructured)
		var n int64
		if _, err := fmt.Sscan(u.GetResourceVersion(), &n); err != nil {
			t.Errorf("resourceVersion %q: %v", u.GetResourceVersion(), err)
		}
		return u.GetName(), n
	}
	seen := func(kind string, o any, allowEqual bool) {
		name, rv := rvOf(o)
		delivered.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := lastRV[name]; ok && (rv < prev || rv == prev && !allowEqual) {
			problems = append(problems, fmt.Sprintf("%s %s at %d after %d", kind, name, rv, prev))
		}
		lastRV[name] = rv
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { seen("add", o, false) },
		UpdateFunc: func(old, o any) {
			_, a := rvOf(old)
			_, b := rvOf(o)
			if a == b {
				resyncs.Add(1)
			}
			seen("update", o, a == b)
		},
		DeleteFunc: func(o any) { seen("delete", o, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}

	// ~300 writes/s for 6s from 12 writers over 60 names.
	const writers, duration, perSecond = 12, 6 * time.Second, 300
	var ops atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(duration)
	for w := range writers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			tick := time.NewTicker(time.Second * writers / perSecond)
			defer tick.Stop()
			for time.Now().Before(end) {
				<-tick.C
				name := fmt.Sprintf("o%d", w*5+rnd.IntN(5))
				var err error
				switch rnd.IntN(3) {
				case 0:
					_, err = cts.Create(ctx, cronTabObj("load", name, nil, 1), metav1.CreateOptions{})
				case 1:
					_, err = cts.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, 1+rnd.IntN(9)), metav1.PatchOptions{})
				default:
					err = cts.Delete(ctx, name, metav1.DeleteOptions{})
				}
				if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
					t.Errorf("write %s: %v", name, err)
					return
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d writes in %v (%.0f/s); %d events delivered, %d resyncs", ops.Load(), duration, float64(ops.Load())/duration.Seconds(), delivered.Load(), resyncs.Load())
	waitInSync(t, inf.GetStore(), func() map[string]string { return listState(t, cts) }, 15*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("events out of order: %v", problems)
	}
	if ops.Load() < int64(duration.Seconds())*perSecond/2 {
		t.Fatalf("only %d writes", ops.Load())
	}
	if resyncs.Load() == 0 {
		t.Fatal("no resync happened")
	}
}
