// Package helm drives a running API server with Helm 3's Go SDK (the
// actions the helm CLI runs: install, upgrade, uninstall) on a chart that
// carries its CRD in crds/ and custom resources in templates/. Releases
// are kept in Helm's memory driver: the default drivers store them in core/v1
// Secrets or ConfigMaps, which an apiextensions-only server does not serve,
// so every action runs in this one process. KUBECONFIG names the server.
package helm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const chartYAML = `apiVersion: v2
name: widgets
description: The client matrix's chart (a CRD in crds/, Widgets in templates/).
type: application
version: 0.1.0
`

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
`

const templateYAML = `apiVersion: %[1]s/v1
kind: Widget
metadata:
  name: {{ .Release.Name }}-main
  namespace: {{ .Release.Namespace }}
  labels: {app: widgets}
spec:
  size: {{ .Values.size }}
  color: {{ .Values.color | quote }}
{{- if .Values.extra }}
---
apiVersion: %[1]s/v1
kind: Widget
metadata:
  name: {{ .Release.Name }}-extra
  namespace: {{ .Release.Namespace }}
spec:
  size: {{ add .Values.size 1 }}
{{- end }}
`

const valuesYAML = "size: 3\ncolor: red\nextra: false\n"

func TestHelm(t *testing.T) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	suffix := hex.EncodeToString(b)
	group := "h" + suffix + ".helm.clients.crdplane.io"
	ns := "clients-" + suffix
	name := "r" + suffix

	dir := t.TempDir()
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(dir, v))
	}
	t.Setenv("HELM_NAMESPACE", ns)
	chartDir := filepath.Join(dir, "widgets")
	for path, content := range map[string]string{
		"Chart.yaml":            chartYAML,
		"values.yaml":           valuesYAML,
		"crds/widget.yaml":      fmt.Sprintf(crdYAML, group),
		"templates/widget.yaml": fmt.Sprintf(templateYAML, group),
	} {
		p := filepath.Join(chartDir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}

	settings := cli.New()
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "memory", t.Logf); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(rc)
	crds := dc.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	widgets := dc.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := crds.Delete(ctx, "widgets."+group, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete CRD: %v", err)
		}
	})

	// helm install: the CRD from crds/ first, then the templates.
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Timeout = name, ns, 2*time.Minute
	rel, err := install.RunWithContext(ctx, chrt, nil)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed || rel.Version != 1 {
		t.Fatalf("helm install: release %s v%d", rel.Info.Status, rel.Version)
	}
	crd, err := crds.Get(ctx, "widgets."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CRD from crds/: %v", err)
	}
	if g, _, _ := unstructured.NestedString(crd.Object, "spec", "group"); g != group {
		t.Fatalf("CRD group %q", g)
	}
	main := readBack(t, widgets, name+"-main", map[string]any{"size": int64(3), "color": "red"})
	if main.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" || main.GetAnnotations()["meta.helm.sh/release-name"] != name ||
		main.GetAnnotations()["meta.helm.sh/release-namespace"] != ns || main.GetLabels()["app"] != "widgets" {
		t.Fatalf("helm's ownership labels and annotations: %v %v", main.GetLabels(), main.GetAnnotations())
	}
	if _, err := widgets.Get(ctx, name+"-extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("extra widget before upgrade: %v", err)
	}

	// helm upgrade: changed values, one object more.
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout = ns, 2*time.Minute
	rel, err = upgrade.RunWithContext(ctx, name, chrt, map[string]any{"size": 5, "color": "blue", "extra": true})
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed || rel.Version != 2 {
		t.Fatalf("helm upgrade: release %s v%d", rel.Info.Status, rel.Version)
	}
	readBack(t, widgets, name+"-main", map[string]any{"size": int64(5), "color": "blue"})
	readBack(t, widgets, name+"-extra", map[string]any{"size": int64(6)})

	// helm upgrade back: the object the chart no longer renders is deleted.
	upgrade = action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout = ns, 2*time.Minute
	if rel, err = upgrade.RunWithContext(ctx, name, chrt, map[string]any{"size": 4}); err != nil || rel.Version != 3 {
		t.Fatalf("helm upgrade 2: %v", err)
	}
	readBack(t, widgets, name+"-main", map[string]any{"size": int64(4), "color": "red"})
	waitGone(t, widgets, name+"-extra")

	// helm uninstall: the templates' objects go, the CRD stays (Helm never
	// deletes what crds/ installed).
	res, err := action.NewUninstall(cfg).Run(name)
	if err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if res.Release.Info.Status != release.StatusUninstalled {
		t.Fatalf("helm uninstall: %s", res.Release.Info.Status)
	}
	waitGone(t, widgets, name+"-main")
	if _, err := crds.Get(ctx, "widgets."+group, metav1.GetOptions{}); err != nil {
		t.Fatalf("CRD after uninstall: %v", err)
	}
}

func readBack(t *testing.T, r dynamic.ResourceInterface, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	o, err := r.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	if got := o.Object["spec"]; !reflect.DeepEqual(got, spec) {
		t.Fatalf("%s: read back spec %v, the chart rendered %v", name, got, spec)
	}
	return o
}

func waitGone(t *testing.T, r dynamic.ResourceInterface, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := r.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("%s not deleted: %v", name, err)
	}
}
