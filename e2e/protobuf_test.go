package e2e

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/crdplane/crdplane/platform/platformtest"
)

// TestClientGoProtobuf drives the CRD API with client-go's typed
// apiextensions clientset speaking protobuf, as controllers configure it
// (ContentType application/vnd.kubernetes.protobuf): create, get, list,
// watch, update and delete, then the metadata client (PartialObjectMetadata
// in protobuf) on the CRDs.
func TestClientGoProtobuf(t *testing.T) {
	_, cfg := platformtest.Start(t)
	pb := rest.CopyConfig(cfg)
	pb.ContentType = runtime.ContentTypeProtobuf
	pb.AcceptContentTypes = runtime.ContentTypeProtobuf + ", " + runtime.ContentTypeJSON
	cs := apiextensionsclient.NewForConfigOrDie(pb)
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	list, err := crds.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := crds.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.pb.e2e.example.com", Labels: map[string]string{"pb": "yes"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "pb.e2e.example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}},
				}},
			}},
		},
	}
	created, err := crds.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Spec.Names.ListKind != "GizmoList" {
		t.Fatalf("created: %+v %+v", created.ObjectMeta, created.Spec.Names)
	}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	nextCRDEvent(t, w, watch.Added, created.Name)

	// get until Established (the controllers' status, read in protobuf)
	var got *apiextensionsv1.CustomResourceDefinition
	for deadline := time.Now().Add(10 * time.Second); ; {
		if got, err = crds.Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if established(got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never Established: %+v", got.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sel, err := crds.List(ctx, metav1.ListOptions{LabelSelector: "pb=yes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Items) != 1 || sel.Items[0].UID != created.UID {
		t.Fatalf("list: %d items", len(sel.Items))
	}

	got.Labels["updated"] = "yes"
	updated, err := crds.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Labels["updated"] != "yes" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update: %+v", updated.ObjectMeta)
	}
	if _, err := crds.Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}
	for {
		ev := nextCRDEvent(t, w, watch.Modified, crd.Name)
		if ev.Labels["updated"] == "yes" {
			break
		}
	}

	// the metadata client: PartialObjectMetadata(List) in protobuf
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crdRes := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	pm, err := mc.Resource(crdRes).Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil || pm.Labels["updated"] != "yes" {
		t.Fatalf("metadata get: %v %+v", err, pm)
	}
	pml, err := mc.Resource(crdRes).List(ctx, metav1.ListOptions{LabelSelector: "pb=yes"})
	if err != nil || len(pml.Items) != 1 {
		t.Fatalf("metadata list: %v %+v", err, pml)
	}

	if err := crds.Delete(ctx, crd.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := crds.Get(ctx, crd.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("CRD never deleted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// nextCRDEvent reads a watch's next event of the CRD name (others skipped),
// which must be of type want.
func nextCRDEvent(t *testing.T, w watch.Interface, want watch.EventType, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			crd, isCRD := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !isCRD {
				t.Fatalf("watch event %s of %T: %+v", ev.Type, ev.Object, ev.Object)
			}
			if crd.Name != name {
				continue
			}
			if ev.Type != want {
				t.Fatalf("watch event %s, want %s", ev.Type, want)
			}
			return crd
		case <-timeout:
			t.Fatalf("no %s event", want)
		}
	}
}
