package validator

import (
	"context"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// scaleGVK is the kind of the scale subresource.
var scaleGVK = runtimeschema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// pathOf is a JSON path of a CRD's scale paths (".spec.replicas") as a
// field path.
func pathOf(jsonPath string) fieldpath.Path {
	parts := strings.Split(strings.TrimPrefix(jsonPath, "."), ".")
	elems := make([]any, len(parts))
	for i, p := range parts {
		elems[i] = p
	}
	return fieldpath.MakePathOrDie(elems...)
}

// scaleMappings maps each version of the CRD with a scale subresource to
// its spec replicas path, for moving managedFields entries between the
// custom resource and its scale (managedfields.ScaleHandler).
func scaleMappings(crd *CRD) managedfields.ResourcePathMappings {
	m := managedfields.ResourcePathMappings{}
	for _, v := range crd.Spec.Versions {
		gv := crd.Spec.Group + "/" + v.Name
		if v.Subresources != nil && v.Subresources.Scale != nil {
			m[gv] = pathOf(v.Subresources.Scale.SpecReplicasPath)
		} else {
			m[gv] = nil
		}
	}
	return m
}

// scaleOf is the autoscaling/v1 Scale of a custom resource, as upstream's
// scale subresource presents it (name, namespace, uid, resourceVersion,
// creationTimestamp; spec and status replicas; the status selector), typed
// as upstream's handler hands it to the field manager.
func (a *admission) scaleOf(obj map[string]any, entries []metav1.ManagedFieldsEntry) *autoscalingv1.Scale {
	sc := a.cv.scale
	field := func(path string) []string { return strings.Split(strings.TrimPrefix(path, "."), ".") }
	src := &unstructured.Unstructured{Object: obj}
	out := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name: src.GetName(), Namespace: src.GetNamespace(), UID: src.GetUID(),
			ResourceVersion: src.GetResourceVersion(), CreationTimestamp: src.GetCreationTimestamp(),
			ManagedFields: entries,
		},
	}
	if r, ok, _ := unstructured.NestedInt64(obj, field(sc.SpecReplicasPath)...); ok {
		out.Spec.Replicas = int32(r) //nolint:gosec // validated to fit an int32
	}
	if r, ok, _ := unstructured.NestedInt64(obj, field(sc.StatusReplicasPath)...); ok {
		out.Status.Replicas = int32(r) //nolint:gosec // validated to fit an int32
	}
	if p := sc.LabelSelectorPath; p != nil {
		out.Status.Selector, _, _ = unstructured.NestedString(obj, field(*p)...)
	}
	return out
}

// scaleManaged runs a scale write through the scale's field manager
// (upstream: the Scale's managedFields are the custom resource's entries
// that own the replicas path, moved to autoscaling/v1; afterwards they are
// moved back): write gets the live Scale and returns the written one. It
// returns the written Scale's spec.replicas and the custom resource's new
// managedFields.
func (a *admission) scaleManaged(ctx context.Context, write func(fm *managedfields.FieldManager, live *autoscalingv1.Scale) (runtime.Object, error)) (int64, []metav1.ManagedFieldsEntry, error) {
	fms, err := a.managers(ctx)
	if err != nil {
		return 0, nil, err
	}
	if fms.scale == nil {
		return 0, nil, fmt.Errorf("CustomResourceDefinition %s version %s has no scale subresource", a.cv.crdName, a.cv.version)
	}
	parent := &unstructured.Unstructured{Object: a.old}
	handler := managedfields.NewScaleHandler(parent.GetManagedFields(), runtimeschema.GroupVersion{Group: a.cv.group, Version: a.cv.version}, scaleMappings(a.cv.crd))
	entries, err := handler.ToSubresource()
	if err != nil {
		return 0, nil, err
	}
	out, err := write(fms.scale, a.scaleOf(runtime.DeepCopyJSON(a.old), entries))
	if err != nil {
		return 0, nil, err
	}
	written, ok := out.(*autoscalingv1.Scale)
	if !ok {
		return 0, nil, fmt.Errorf("field manager returned %T", out)
	}
	replicas := int64(written.Spec.Replicas)
	mf, err := handler.ToParent(written.GetManagedFields())
	if err != nil {
		return 0, nil, err
	}
	return replicas, mf, nil
}
