package clientgo

import (
	"context"
	"testing"
	"time"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// TestInformers runs shared informers (typed for CRDs, dynamic and
// metadata for custom resources) and checks their listers follow writes.
func TestInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	cfg := config(t)
	f := newFixture(t)
	crd := install(t, cfg, f)
	ws := dynamic.NewForConfigOrDie(cfg).Resource(f.gvr()).Namespace(f.namespace)
	pre, err := ws.Create(ctx, widget(f, "i0", 1, "red"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	byRun := func(o *metav1.ListOptions) { o.LabelSelector = runLabel + "=" + f.suffix }
	crdFactory := apiextinformers.NewSharedInformerFactoryWithOptions(apiextclient.NewForConfigOrDie(cfg), 0, apiextinformers.WithTweakListOptions(byRun))
	crdLister := crdFactory.Apiextensions().V1().CustomResourceDefinitions().Lister()
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, f.namespace, byRun)
	dynInformer := dynFactory.ForResource(f.gvr())
	metaFactory := metadatainformer.NewFilteredSharedInformerFactory(metadata.NewForConfigOrDie(cfg), 0, f.namespace, byRun)
	metaInformer := metaFactory.ForResource(f.gvr())
	events := make(chan string, 100)
	if _, err := dynInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- "add " + obj.(*unstructured.Unstructured).GetName() },
		UpdateFunc: func(_, obj any) { events <- "update " + obj.(*unstructured.Unstructured).GetName() },
		DeleteFunc: func(obj any) { events <- "delete" },
	}); err != nil {
		t.Fatal(err)
	}
	crdFactory.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	defer func() { cancel(); crdFactory.Shutdown(); dynFactory.Shutdown(); metaFactory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), crdFactory.Apiextensions().V1().CustomResourceDefinitions().Informer().HasSynced,
		dynInformer.Informer().HasSynced, metaInformer.Informer().HasSynced) {
		t.Fatal("informers did not sync")
	}

	c, err := crdLister.Get(crd.Name)
	if err != nil {
		t.Fatalf("CRD lister: %v", err)
	}
	mustEqual(t, "CRD lister: spec", c.Spec, crd.Spec, apiequality.Semantic.DeepEqual(c.Spec, crd.Spec))
	if all, _ := crdFactory.Apiextensions().V1().CustomResourceDefinitions().Lister().List(labels.Everything()); len(all) != 1 {
		t.Fatalf("CRD lister: %d CRDs with the run's label, want 1", len(all))
	}

	// Listed at start.
	o, err := dynInformer.Lister().ByNamespace(f.namespace).Get("i0")
	if err != nil {
		t.Fatalf("dynamic lister: %v", err)
	}
	mustEqual(t, "dynamic lister: i0", o, pre.Object, sameObject(o.(*unstructured.Unstructured), pre))

	// Created, updated, deleted after the informers started.
	created, err := ws.Create(ctx, widget(f, "i1", 2, "blue"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create i1: %v", err)
	}
	waitListed(t, dynInformer.Lister().ByNamespace(f.namespace).Get, metaInformer.Lister().ByNamespace(f.namespace).Get, "i1", created)
	patched, err := ws.Patch(ctx, "i1", types.MergePatchType, []byte(`{"spec":{"size":9}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch i1: %v", err)
	}
	waitListed(t, dynInformer.Lister().ByNamespace(f.namespace).Get, metaInformer.Lister().ByNamespace(f.namespace).Get, "i1", patched)
	if err := ws.Delete(ctx, "i1", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete i1: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err1 := dynInformer.Lister().ByNamespace(f.namespace).Get("i1")
		_, err2 := metaInformer.Lister().ByNamespace(f.namespace).Get("i1")
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
	if err != nil {
		t.Fatalf("i1 still listed after delete: %v", err)
	}
	want := []string{"add i0", "add i1", "update i1", "delete"}
	for _, w := range want {
		select {
		case got := <-events:
			if got != w {
				t.Fatalf("handler event %q, want %q (order %v)", got, w, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("handler: no %q event", w)
		}
	}
	if err := ws.Delete(ctx, "i0", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete i0: %v", err)
	}
}

func waitListed(t *testing.T, dynGet, metaGet func(string) (runtime.Object, error), name string, want *unstructured.Unstructured) {
	t.Helper()
	var last any
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		o, err := dynGet(name)
		if err != nil {
			return false, nil
		}
		last = o
		m, err := metaGet(name)
		if err != nil {
			return false, nil
		}
		u := o.(*unstructured.Unstructured)
		pom := m.(*metav1.PartialObjectMetadata)
		return sameObject(u, want) && pom.ResourceVersion == want.GetResourceVersion() && pom.UID == want.GetUID(), nil
	})
	if err != nil {
		t.Fatalf("listers did not show %s at rv %s: last %v", name, want.GetResourceVersion(), last)
	}
}
