// Package clientgo drives a running API server with client-go the way
// programs use it: the typed apiextensions clientset, the dynamic and
// metadata clients, informers and listers, discovery and the deferred
// discovery REST mapper. The same tests build against several client-go
// minors: go.mod is the newest, go130.mod and go133.mod the older ones
// (go test -modfile=go130.mod). KUBECONFIG names the server; the tests
// create every object under names unique to the run and delete them.
package clientgo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const runLabel = "crdplane.io/clients-run"

// config is the rest.Config of $KUBECONFIG.
func config(t *testing.T) *rest.Config {
	t.Helper()
	kc := os.Getenv("KUBECONFIG")
	if kc == "" {
		t.Fatal("KUBECONFIG is not set: run through e2e/clients/run.sh (make test-clients)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("load %s: %v", kc, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fixture is one CRD of the run: Widget in its own group.
type fixture struct {
	suffix    string
	group     string
	namespace string
	crd       *apiextv1.CustomResourceDefinition
}

func (f fixture) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: f.group, Version: "v1", Resource: "widgets"}
}

func newFixture(t *testing.T) fixture {
	s := unique(t)
	f := fixture{suffix: s, group: "c" + s + ".clients.crdplane.io", namespace: "clients-" + s}
	f.crd = widgetCRD(f.group, s)
	return f
}

// widgetCRD is a CRD whose spec is written out in full (every field the
// server would default is set), so what is read back must equal it.
func widgetCRD(group, suffix string) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "widgets." + group,
			Labels:      map[string]string{runLabel: suffix},
			Annotations: map[string]string{"clients.crdplane.io/note": "client matrix"},
		},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
				ShortNames: []string{"wg" + suffix}, Categories: []string{"clients" + suffix},
			},
			Scope:      apiextv1.NamespaceScoped,
			Conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type:        "object",
					Description: "Widget is a test object of the client matrix.",
					Properties: map[string]apiextv1.JSONSchemaProps{
						"spec": {Type: "object", Description: "Desired state.", Properties: map[string]apiextv1.JSONSchemaProps{
							"size":  {Type: "integer", Description: "How many parts the widget has.", Minimum: ptr(0.0)},
							"color": {Type: "string", Description: "The widget's colour."},
						}},
						"status": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
							"phase":    {Type: "string"},
							"observed": {Type: "integer"},
						}},
					},
				}},
				Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: []apiextv1.CustomResourceColumnDefinition{
					{Name: "Size", Type: "integer", JSONPath: ".spec.size"},
					{Name: "Color", Type: "string", JSONPath: ".spec.color", Priority: 1},
				},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

// install creates f's CRD with the typed clientset and waits until it is
// Established; it is deleted when the test ends.
func install(t *testing.T, cfg *rest.Config, f fixture) *apiextv1.CustomResourceDefinition {
	t.Helper()
	ctx := ctxFor(t)
	cs := apiextclient.NewForConfigOrDie(cfg)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, f.crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", f.crd.Name, err)
	}
	t.Cleanup(func() { deleteCRD(t, cs, f.crd.Name) })
	return waitEstablished(t, cs, f.crd.Name)
}

func waitEstablished(t *testing.T, cs apiextclient.Interface, name string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	var got *apiextv1.CustomResourceDefinition
	err := wait.PollUntilContextTimeout(ctxFor(t), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				got = c
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not Established: %v", name, err)
	}
	return got
}

func deleteCRD(t *testing.T, cs apiextclient.Interface, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cs.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup: delete CRD %s: %v", name, err)
		return
	}
	if err := waitGone(ctx, func(ctx context.Context) error {
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Errorf("cleanup: CRD %s: %v", name, err)
	}
}

// waitGone polls get until it answers NotFound.
func waitGone(ctx context.Context, get func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		if apierrors.IsNotFound(last) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("still there (last get: %v): %w", last, err)
	}
	return nil
}

// mustEqual fails the test when got and want differ, showing both as JSON.
func mustEqual(t *testing.T, what string, got, want any, equal bool) {
	t.Helper()
	if !equal {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("%s: read back differs from what was written\ngot:  %s\nwant: %s", what, g, w)
	}
}
