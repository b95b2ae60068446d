package controllerruntime

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestEnvtestEnvironment points envtest.Environment at the server as an
// existing cluster: Start installs a CRD and waits until it is served, Stop
// removes it. Start first reads the default Namespace (core/v1): crdplane
// serves core/v1 namespaces; a server without them (the standalone
// upstream apiextensions-apiserver, SERVER=upstream) cannot pass it, and
// the test says so.
func TestEnvtestEnvironment(t *testing.T) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	if res, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerResourcesForGroupVersion("v1"); err != nil ||
		!slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == "namespaces" }) {
		t.Skipf("the server does not serve core/v1 namespaces (%v), which envtest.Environment.Start reads; TestEnvtestInstallCRDs covers the rest", err)
	}
	existing := true
	envtestFlow(t, func(crd *apiextv1.CustomResourceDefinition) (*rest.Config, func() error, error) {
		env := &envtest.Environment{
			UseExistingCluster: &existing,
			CRDs:               []*apiextv1.CustomResourceDefinition{crd},
			CRDInstallOptions:  envtest.CRDInstallOptions{CleanUpAfterUse: true},
		}
		cfg, err := env.Start()
		return cfg, env.Stop, err
	})
}

// TestEnvtestInstallCRDs runs what envtest.Environment does on an existing
// cluster after its namespace check: InstallCRDs (create, then wait until
// discovery serves them) and UninstallCRDs (delete, then wait until gone).
func TestEnvtestInstallCRDs(t *testing.T) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		t.Fatal(err)
	}
	envtestFlow(t, func(crd *apiextv1.CustomResourceDefinition) (*rest.Config, func() error, error) {
		opts := envtest.CRDInstallOptions{CRDs: []*apiextv1.CustomResourceDefinition{crd}}
		_, err := envtest.InstallCRDs(cfg, opts)
		return cfg, func() error { return envtest.UninstallCRDs(cfg, opts) }, err
	})
}

func envtestFlow(t *testing.T, start func(*apiextv1.CustomResourceDefinition) (*rest.Config, func() error, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	suffix := unique(t)
	group := "e" + suffix + ".cr.clients.crdplane.io"
	crd := gadgetCRD(group, suffix)
	want := crd.Spec.DeepCopy()
	cfg, stop, err := start(crd)
	if err != nil {
		t.Fatalf("envtest start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	scheme := newScheme(t, group)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var got apiextv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
		t.Fatalf("get installed CRD: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(got.Spec, *want) {
		t.Fatalf("installed CRD spec differs: %+v", got.Spec)
	}

	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "clients-" + suffix}, Spec: GadgetSpec{Size: 2, Color: "blue"}}
	if err := c.Create(ctx, g); err != nil {
		t.Fatalf("create gadget: %v", err)
	}
	var back Gadget
	if err := c.Get(ctx, client.ObjectKeyFromObject(g), &back); err != nil {
		t.Fatalf("get gadget: %v", err)
	}
	if back.Spec != g.Spec || back.UID != g.UID || back.ResourceVersion != g.ResourceVersion {
		t.Fatalf("read back %+v, wrote %+v", back, g)
	}
	if err := c.Delete(ctx, &back); err != nil {
		t.Fatalf("delete gadget: %v", err)
	}

	stopped = true
	if err := stop(); err != nil {
		t.Fatalf("envtest stop: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextv1.CustomResourceDefinition{})), nil
	})
	if err != nil {
		t.Fatalf("CRD still there after envtest Stop: %v", err)
	}
}
