package controllerruntime

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func init() {
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// gadgetReconciler writes each Gadget's status from its spec.
type gadgetReconciler struct{ c client.Client }

func (r *gadgetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var g Gadget
	if err := r.c.Get(ctx, req.NamespacedName, &g); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if g.Status.ObservedGeneration == g.Generation {
		return reconcile.Result{}, nil
	}
	g.Status = GadgetStatus{Phase: "Ready", Doubled: 2 * g.Spec.Size, ObservedGeneration: g.Generation}
	return reconcile.Result{}, r.c.Status().Update(ctx, &g)
}

// TestManager runs a manager whose controller installs its CRD with the
// typed client, then reconciles Gadgets and writes their status.
func TestManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	suffix := unique(t)
	group := "g" + suffix + ".cr.clients.crdplane.io"
	scheme := newScheme(t, group)

	// The operator installs its own CRD at start, through the typed client.
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd := gadgetCRD(group, suffix)
	want := crd.Spec.DeepCopy()
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("install CRD: %v", err)
	}
	t.Cleanup(func() { deleteCRD(t, c, crd.Name) })
	if !apiequality.Semantic.DeepEqual(crd.Spec, *want) {
		t.Fatalf("created CRD spec differs from the one written: %+v", crd.Spec)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var got apiextv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return apiequality.Semantic.DeepEqual(got.Spec, *want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD not established with the spec written: %v", err)
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("gadget" + suffix).For(&Gadget{}).
		Complete(&gadgetReconciler{c: mgr.GetClient()}); err != nil {
		t.Fatalf("controller: %v", err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	}()

	ns := "clients-" + suffix
	g := &Gadget{ObjectMeta: metav1.ObjectMeta{Name: "g1", Namespace: ns, Labels: map[string]string{runLabel: suffix}},
		Spec: GadgetSpec{Size: 3, Color: "red"}}
	if err := mgr.GetClient().Create(ctx, g); err != nil {
		t.Fatalf("create gadget: %v", err)
	}
	if g.Spec != (GadgetSpec{Size: 3, Color: "red"}) || g.UID == "" {
		t.Fatalf("create answered %+v", g)
	}
	reader := mgr.GetAPIReader()
	waitStatus := func(want GadgetSpec) Gadget {
		t.Helper()
		var got Gadget
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			if err := reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: "g1"}, &got); err != nil {
				return false, err
			}
			return got.Status.ObservedGeneration == got.Generation, nil
		})
		if err != nil {
			t.Fatalf("status not written for generation %d: %v (%+v)", got.Generation, err, got.Status)
		}
		if got.Spec != want || got.Status != (GadgetStatus{Phase: "Ready", Doubled: 2 * want.Size, ObservedGeneration: got.Generation}) {
			t.Fatalf("read back %+v / %+v, want spec %+v and its status", got.Spec, got.Status, want)
		}
		return got
	}
	got := waitStatus(GadgetSpec{Size: 3, Color: "red"})

	// The manager's cached client sees the same object.
	var cached Gadget
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(g), &cached); err != nil {
			return false, nil
		}
		return cached.ResourceVersion == got.ResourceVersion, nil
	})
	if err != nil || cached.Spec != got.Spec || cached.Status != got.Status || cached.UID != got.UID {
		t.Fatalf("cache: %v %+v, want %+v", err, cached, got)
	}
	var list GadgetList
	if err := mgr.GetClient().List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{runLabel: suffix}); err != nil || len(list.Items) != 1 {
		t.Fatalf("cached list: %v, %d items", err, len(list.Items))
	}

	// A spec change is reconciled again.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Size = 5
	if err := mgr.GetClient().Patch(ctx, &got, patch); err != nil {
		t.Fatalf("patch: %v", err)
	}
	waitStatus(GadgetSpec{Size: 5, Color: "red"})

	if err := mgr.GetClient().Delete(ctx, &got); err != nil {
		t.Fatalf("delete: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(reader.Get(ctx, client.ObjectKeyFromObject(&got), &Gadget{})), nil
	})
	if err != nil {
		t.Fatalf("gadget not deleted: %v", err)
	}
}

func deleteCRD(t *testing.T, c client.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crd := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
		t.Errorf("cleanup: delete CRD %s: %v", name, err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: name}, &apiextv1.CustomResourceDefinition{})), nil
	})
	if err != nil {
		t.Errorf("cleanup: CRD %s not deleted: %v", name, err)
	}
}
