// Package kubectl drives a running API server with one kubectl binary
// ($KUBECTL; the runner passes kubectl 1.27, 1.30 and 1.33 in turn):
// apply (client- and server-side), get -o wide, explain, edit through
// KUBE_EDITOR, JSON and merge patches, wait, delete with each --cascade.
// KUBECONFIG names the server; every object is named for the run and
// deleted at the end.
package kubectl

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

type cli struct {
	bin, cache string
}

func newCLI(t *testing.T) cli {
	t.Helper()
	bin := os.Getenv("KUBECTL")
	if bin == "" || os.Getenv("KUBECONFIG") == "" {
		t.Fatal("KUBECTL and KUBECONFIG must be set: run through e2e/clients/run.sh (make test-clients)")
	}
	return cli{bin: bin, cache: t.TempDir()}
}

// run runs kubectl with stdin and extra environment.
func (k cli) run(t *testing.T, stdin string, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--cache-dir", k.cache}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func (k cli) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := k.run(t, stdin, nil, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// object reads one object as JSON.
func (k cli) object(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var o map[string]any
	out := k.must(t, "", append([]string{"get", "-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("get %v: %v: %s", args, err, out)
	}
	return o
}

func get(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// mustEqual compares JSON values (numbers as JSON decodes them).
func mustEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Fatalf("%s: read back %s, wrote %s", what, g, want)
	}
}

type fixture struct {
	cli
	suffix, group, ns, crd, res string
}

// setup applies a Widget CRD in a group of its own and waits until it is
// established; it is deleted (with its objects) when the test ends.
func setup(t *testing.T) fixture {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	s := hex.EncodeToString(b)
	f := fixture{cli: newCLI(t), suffix: s, group: "k" + s + ".kubectl.clients.crdplane.io", ns: "clients-" + s}
	f.crd = "widgets." + f.group
	f.res = "widgets." + f.group
	f.must(t, fmt.Sprintf(crdYAML, f.group, s), "apply", "-f", "-")
	t.Cleanup(func() {
		if out, errOut, err := f.run(t, "", nil, "delete", "crd", f.crd, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Errorf("cleanup: delete crd: %v %s %s", err, out, errOut)
		}
	})
	f.must(t, "", "wait", "--for", "condition=established", "--timeout=60s", "crd/"+f.crd)
	// Discovery may trail the Established condition by a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, err := f.run(t, "", nil, "get", f.res, "-n", f.ns); err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.must(t, "", "get", f.res, "-n", f.ns)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return f
}

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
  labels: {crdplane.io/clients-run: "%[2]s"}
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        description: Widget is a test object of the client matrix.
        properties:
          spec:
            type: object
            description: Desired state of the widget.
            properties:
              size: {type: integer, description: How many parts the widget has.}
              color: {type: string, description: The widget's colour.}
              parts: {type: array, items: {type: string}}
          status:
            type: object
            properties:
              phase: {type: string}
`

func (f fixture) widget(name, spec string) string {
	return fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {app: clients}\nspec: %s\n", f.group, name, f.ns, spec)
}

func TestApply(t *testing.T) {
	f := setup(t)
	crd := f.object(t, "crd", f.crd)
	mustEqual(t, "crd spec.names", get(crd, "spec", "names"), `{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"}`)
	mustEqual(t, "crd labels", get(crd, "metadata", "labels"), `{"crdplane.io/clients-run":"`+f.suffix+`"}`)

	out := f.must(t, f.widget("a1", `{size: 3, color: red, parts: [p, q]}`), "apply", "-f", "-")
	if !strings.Contains(out, "widget.") || !strings.Contains(out, "/a1 created") {
		t.Fatalf("apply: %q", out)
	}
	o := f.object(t, f.res, "a1", "-n", f.ns)
	mustEqual(t, "spec", get(o, "spec"), `{"size":3,"color":"red","parts":["p","q"]}`)
	mustEqual(t, "labels", get(o, "metadata", "labels"), `{"app":"clients"}`)
	if get(o, "metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration") == nil {
		t.Fatalf("no last-applied-configuration annotation: %v", get(o, "metadata"))
	}
	// Re-apply with a field removed and one changed: a three-way merge.
	out = f.must(t, f.widget("a1", `{size: 4, parts: [p, q]}`), "apply", "-f", "-")
	if !strings.Contains(out, "/a1 configured") {
		t.Fatalf("re-apply: %q", out)
	}
	mustEqual(t, "spec after re-apply", get(f.object(t, f.res, "a1", "-n", f.ns), "spec"), `{"size":4,"parts":["p","q"]}`)
	out = f.must(t, f.widget("a1", `{size: 4, parts: [p, q]}`), "apply", "-f", "-")
	if !strings.Contains(out, "/a1 unchanged") {
		t.Fatalf("apply unchanged: %q", out)
	}
}

func TestApplyServerSide(t *testing.T) {
	f := setup(t)
	f.must(t, f.widget("s1", `{size: 1, color: red}`), "apply", "--server-side", "--field-manager=clients", "-f", "-")
	o := f.object(t, f.res, "s1", "-n", f.ns, "--show-managed-fields")
	mustEqual(t, "spec", get(o, "spec"), `{"size":1,"color":"red"}`)
	mf, _ := get(o, "metadata", "managedFields").([]any)
	if len(mf) != 1 || get(mf[0].(map[string]any), "manager") != "clients" || get(mf[0].(map[string]any), "operation") != "Apply" {
		t.Fatalf("managedFields: %v", mf)
	}
	// A second manager taking a field conflicts unless forced.
	_, errOut, err := f.run(t, f.widget("s1", `{color: blue}`), nil, "apply", "--server-side", "--field-manager=other", "-f", "-")
	if err == nil || !strings.Contains(errOut, "conflict") {
		t.Fatalf("conflicting apply: err %v, stderr %s", err, errOut)
	}
	f.must(t, f.widget("s1", `{color: blue}`), "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-")
	mustEqual(t, "spec after forced apply", get(f.object(t, f.res, "s1", "-n", f.ns), "spec"), `{"size":1,"color":"blue"}`)
}

func TestGetWide(t *testing.T) {
	f := setup(t)
	f.must(t, f.widget("g1", `{size: 7, color: teal}`)+"---\n"+f.widget("g2", `{size: 8, color: plum}`), "apply", "-f", "-")
	out := f.must(t, "", "get", f.res, "-n", f.ns, "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^NAME\s+SIZE\s+COLOR$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^g1\s+7\s+teal$`).MatchString(lines[1]) || !regexp.MustCompile(`^g2\s+8\s+plum$`).MatchString(lines[2]) {
		t.Fatalf("get -o wide:\n%s", out)
	}
	out = f.must(t, "", "get", f.res, "-n", f.ns)
	if !regexp.MustCompile(`^NAME\s+SIZE\n`).MatchString(out) {
		t.Fatalf("get (priority-1 column hidden):\n%s", out)
	}
	out = f.must(t, "", "get", f.res, "-n", f.ns, "-l", "app=clients", "-o", "name")
	if strings.TrimSpace(out) != "widget."+f.group+"/g1\nwidget."+f.group+"/g2" {
		t.Fatalf("get -o name:\n%s", out)
	}
	out = f.must(t, "", "get", "crd", f.crd, "-o", "wide")
	if !regexp.MustCompile(`(?m)^NAME\s+CREATED AT\n` + regexp.QuoteMeta(f.crd) + `\s+\d{4}-`).MatchString(out) {
		t.Fatalf("get crd -o wide:\n%s", out)
	}
}

func TestExplain(t *testing.T) {
	f := setup(t)
	out := f.must(t, "", "explain", "widgets.spec", "--api-version="+f.group+"/v1")
	for _, want := range []string{"KIND:", "Widget", "spec <Object>", "Desired state of the widget.", "size\t<integer>", "How many parts the widget has.", "parts\t<[]string>"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explain lacks %q:\n%s", want, out)
		}
	}
	out = f.must(t, "", "explain", "customresourcedefinitions.spec.versions.schema")
	if !strings.Contains(out, "openAPIV3Schema") {
		t.Fatalf("explain CRD schema:\n%s", out)
	}
}

func TestEdit(t *testing.T) {
	f := setup(t)
	f.must(t, f.widget("e1", `{size: 2, color: red}`), "apply", "-f", "-")
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i -e 's/color: red/color: purple/' -e 's/size: 2/size: 12/' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := f.run(t, "", []string{"KUBE_EDITOR=" + editor, "EDITOR="}, "edit", f.res+"/e1", "-n", f.ns)
	if err != nil || !strings.Contains(out, "/e1 edited") {
		t.Fatalf("edit: %v\n%s\n%s", err, out, errOut)
	}
	mustEqual(t, "spec after edit", get(f.object(t, f.res, "e1", "-n", f.ns), "spec"), `{"size":12,"color":"purple"}`)
	// An edit that changes nothing.
	noop := filepath.Join(t.TempDir(), "noop.sh")
	if err := os.WriteFile(noop, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = f.run(t, "", []string{"KUBE_EDITOR=" + noop}, "edit", f.res+"/e1", "-n", f.ns)
	if err != nil || !strings.Contains(out+errOut, "Edit cancelled, no changes made.") {
		t.Fatalf("no-op edit: %v\n%s\n%s", err, out, errOut)
	}
}

func TestPatch(t *testing.T) {
	f := setup(t)
	f.must(t, f.widget("p1", `{size: 1, color: red, parts: [a]}`), "apply", "-f", "-")
	f.must(t, "", "patch", f.res, "p1", "-n", f.ns, "--type", "merge", "-p", `{"spec":{"size":5,"color":null}}`)
	mustEqual(t, "after merge patch", get(f.object(t, f.res, "p1", "-n", f.ns), "spec"), `{"size":5,"parts":["a"]}`)
	f.must(t, "", "patch", f.res, "p1", "-n", f.ns, "--type", "json", "-p", `[{"op":"add","path":"/spec/parts/-","value":"b"},{"op":"add","path":"/spec/color","value":"green"}]`)
	mustEqual(t, "after json patch", get(f.object(t, f.res, "p1", "-n", f.ns), "spec"), `{"size":5,"color":"green","parts":["a","b"]}`)
	_, errOut, err := f.run(t, "", nil, "patch", f.res, "p1", "-n", f.ns, "--type", "json", "-p", `[{"op":"test","path":"/spec/size","value":6}]`)
	if err == nil || !strings.Contains(errOut, "invalid") {
		t.Fatalf("failing json patch test: %v %s", err, errOut)
	}
	f.must(t, "", "patch", f.res, "p1", "-n", f.ns, "--subresource", "status", "--type", "merge", "-p", `{"status":{"phase":"Ready"}}`)
	o := f.object(t, f.res, "p1", "-n", f.ns)
	mustEqual(t, "status after status patch", get(o, "status"), `{"phase":"Ready"}`)
	mustEqual(t, "spec after status patch", get(o, "spec"), `{"size":5,"color":"green","parts":["a","b"]}`)
}

func TestWait(t *testing.T) {
	f := setup(t)
	f.must(t, f.widget("w1", `{size: 1}`), "apply", "-f", "-")
	type result struct {
		out, errOut string
		err         error
	}
	background := func(args ...string) chan result {
		c := make(chan result, 1)
		go func() { o, e, err := f.run(t, "", nil, args...); c <- result{o, e, err} }()
		return c
	}
	waiting := background("wait", f.res+"/w1", "-n", f.ns, "--for=jsonpath={.status.phase}=Ready", "--timeout=60s")
	time.Sleep(time.Second)
	f.must(t, "", "patch", f.res, "w1", "-n", f.ns, "--subresource", "status", "--type", "merge", "-p", `{"status":{"phase":"Ready"}}`)
	r := <-waiting
	if r.err != nil || !strings.Contains(r.out, "/w1 condition met") {
		t.Fatalf("wait --for=jsonpath: %v\n%s\n%s", r.err, r.out, r.errOut)
	}
	mustEqual(t, "status", get(f.object(t, f.res, "w1", "-n", f.ns), "status"), `{"phase":"Ready"}`)

	waiting = background("wait", f.res+"/w1", "-n", f.ns, "--for=delete", "--timeout=60s")
	time.Sleep(time.Second)
	f.must(t, "", "delete", f.res, "w1", "-n", f.ns, "--wait=false")
	r = <-waiting
	if r.err != nil {
		t.Fatalf("wait --for=delete: %v\n%s\n%s", r.err, r.out, r.errOut)
	}
	if _, _, err := f.run(t, "", nil, "get", f.res, "w1", "-n", f.ns); err == nil {
		t.Fatal("w1 still there after wait --for=delete")
	}
}

func TestDeleteCascade(t *testing.T) {
	f := setup(t)
	f.must(t, f.widget("d1", `{size: 1}`)+"---\n"+f.widget("d2", `{size: 2}`)+"---\n"+f.widget("d3", `{size: 3}`), "apply", "-f", "-")

	out := f.must(t, "", "delete", f.res, "d1", "-n", f.ns, "--cascade=background")
	if !strings.Contains(out, `"d1" deleted`) {
		t.Fatalf("delete --cascade=background: %q", out)
	}
	if _, _, err := f.run(t, "", nil, "get", f.res, "d1", "-n", f.ns); err == nil {
		t.Fatal("d1 still there")
	}
	// Orphan and foreground put the garbage collector's finalizer on the
	// object; a server without a garbage collector keeps it until the
	// finalizer is removed.
	for name, fin := range map[string]string{"d2": "orphan", "d3": "foregroundDeletion"} {
		policy := map[string]string{"orphan": "orphan", "foregroundDeletion": "foreground"}[fin]
		f.must(t, "", "delete", f.res, name, "-n", f.ns, "--cascade="+policy, "--wait=false")
		o := f.object(t, f.res, name, "-n", f.ns)
		if get(o, "metadata", "deletionTimestamp") == nil {
			t.Fatalf("%s after delete --cascade=%s: no deletionTimestamp", name, policy)
		}
		mustEqual(t, name+" finalizers", get(o, "metadata", "finalizers"), `["`+fin+`"]`)
		mustEqual(t, name+" spec", get(o, "spec"), fmt.Sprintf(`{"size":%c}`, name[1]))
		f.must(t, "", "patch", f.res, name, "-n", f.ns, "--type", "json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		f.must(t, "", "wait", f.res+"/"+name, "-n", f.ns, "--for=delete", "--timeout=60s")
	}

	// Deleting the CRD deletes its objects.
	f.must(t, f.widget("d4", `{size: 4}`), "apply", "-f", "-")
	out = f.must(t, "", "delete", "crd", f.crd, "--cascade=background", "--timeout=60s")
	if !strings.Contains(out, f.crd+"\" deleted") && !strings.Contains(out, f.crd+" deleted") {
		t.Fatalf("delete crd: %q", out)
	}
	if _, _, err := f.run(t, "", nil, "get", "crd", f.crd); err == nil {
		t.Fatal("CRD still there after delete")
	}
}

// TestNamespaces: kubectl get ns (NAME STATUS AGE from the server's Table),
// create ns, and delete ns, which waits until the namespace and the custom
// resource in it are gone. A server without core/v1 namespaces (the
// standalone upstream apiextensions-apiserver) skips it.
func TestNamespaces(t *testing.T) {
	f := setup(t)
	if out, _, err := f.run(t, "", nil, "api-resources", "--api-group="); err != nil || !strings.Contains(out, "namespaces") {
		t.Skipf("the server does not serve core/v1 namespaces: %v %s", err, out)
	}
	out := f.must(t, "", "get", "ns", "default", "kube-system")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME STATUS AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "default Active ") {
		t.Fatalf("get ns: %q", out)
	}
	if out := f.must(t, "", "create", "ns", f.ns); !strings.Contains(out, "namespace/"+f.ns+" created") {
		t.Fatalf("create ns: %q", out)
	}
	ns := f.object(t, "ns", f.ns)
	mustEqual(t, "spec", get(ns, "spec"), `{"finalizers":["kubernetes"]}`)
	mustEqual(t, "status", get(ns, "status"), `{"phase":"Active"}`)
	f.must(t, f.widget("d1", `{size: 1}`), "apply", "-f", "-")
	if out := f.must(t, "", "delete", "ns", f.ns, "--timeout=60s"); !strings.Contains(out, `namespace "`+f.ns+`" deleted`) {
		t.Fatalf("delete ns: %q", out)
	}
	if out, errOut, err := f.run(t, "", nil, "get", "ns", f.ns); err == nil || !strings.Contains(errOut, `namespaces "`+f.ns+`" not found`) {
		t.Fatalf("get ns after delete: %v %q %q", err, out, errOut)
	}
	if out := f.must(t, "", "get", f.res, "-A", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("widgets left after the namespace went: %q", out)
	}
}
