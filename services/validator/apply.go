package validator

import (
	"context"
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/jsonenc"
	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/objsize"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// managers are the field managers of the admission's CRD version: the
// compiled version's own when its conversion runs in process, else built
// for this request around a converter that calls the converter service
// with ctx (kept for the rest of the request: a write may need them twice).
func (a *admission) managers(ctx context.Context) (*fieldManagers, error) {
	if a.fms != nil {
		return a.fms, nil
	}
	ms, err := a.cv.managed()
	if err != nil {
		return nil, err
	}
	if ms.local != nil {
		a.fms = ms.local
		return a.fms, nil
	}
	var compiled func(version string) (*compiledVersion, error)
	if a.cache != nil {
		compiled = func(version string) (*compiledVersion, error) { return a.cache.get(a.cv.crd, version) }
	}
	a.remote = newRemoteConverter(ctx, a.converter, a.cv.crd, compiled)
	if a.fms, err = a.cv.newFieldManagers(ms.tc, &versionConverter{crd: a.cv.crd, remote: a.remote}); err != nil {
		return nil, err
	}
	return a.fms, nil
}

// conversionFailure is the first failure of the converter service in this
// admission that is not the conversion's own (the converter unreachable,
// overloaded): the write fails with it.
func (a *admission) conversionFailure() error {
	if a.remote == nil {
		return nil
	}
	return a.remote.failed
}

// manager is the field manager of the admission's subresource.
func (a *admission) manager(ctx context.Context) (*managedfields.FieldManager, error) {
	fm, err := a.managers(ctx)
	if err != nil {
		return nil, err
	}
	if a.status {
		return fm.status, nil
	}
	return fm.main, nil
}

// live is the object a write starts from, for the field manager: the old
// object on update, else an empty object of the kind (as upstream's
// handlers create it).
func (a *admission) live() runtime.Object {
	if a.old != nil {
		return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(a.old)}
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(a.cv.apiVersion)
	u.SetKind(a.cv.kind)
	return u
}

// liveShared is live without the copy, for the field manager's Update,
// which only reads the live object (its typed conversion and compare, its
// entries): the copy is needed only by Apply, which builds on it.
func (a *admission) liveShared() runtime.Object {
	if a.old != nil {
		return &unstructured.Unstructured{Object: a.old}
	}
	return a.live()
}

// updateManagedFields records a create's, update's or patch's "Update"
// of manager in obj's metadata.managedFields (obj as decoded: pruned and
// defaulted, as upstream's handlers hand it to the field manager). As
// v1.33's UpdateNoErrors, a failure (entries recorded at a version that
// does not convert: the webhook refuses the object, a field the schema
// does not declare) clears the object's managedFields instead of failing
// the write (v0.37's keeps the live object's). A converter service that
// cannot answer fails the write (upstream has no such hop; dropping the
// entries for it would lose them).
func (a *admission) updateManagedFields(ctx context.Context, obj map[string]any, manager string) (map[string]any, error) {
	if a.scale {
		_, mf, err := a.scaleManaged(ctx, func(fm *managedfields.FieldManager, live *autoscalingv1.Scale) (runtime.Object, error) {
			return updateNoErrors(fm, live, a.scaleOf(obj, live.ManagedFields), manager), nil
		})
		if err != nil {
			return nil, err
		}
		if err := a.conversionFailure(); err != nil {
			return nil, err
		}
		(&unstructured.Unstructured{Object: obj}).SetManagedFields(mf)
		return obj, nil
	}
	fm, err := a.manager(ctx)
	if err != nil {
		return nil, err
	}
	out := updateNoErrors(fm, a.liveShared(), &unstructured.Unstructured{Object: obj}, manager)
	if err := a.conversionFailure(); err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("field manager returned %T", out)
	}
	return u.Object, nil
}

// updateNoErrors is v1.33's FieldManager.UpdateNoErrors: the updated
// object, or newObj without managedFields when the update fails.
func updateNoErrors(fm *managedfields.FieldManager, live, newObj runtime.Object, manager string) runtime.Object {
	out, err := fm.Update(live, newObj, manager)
	if err != nil {
		if acc, aErr := meta.Accessor(newObj); aErr == nil {
			acc.SetManagedFields(nil)
		}
		return newObj
	}
	return out
}

// apply is a server-side apply: the apply patch decoded as upstream's
// applyPatcher decodes it, merged into the live object by the field
// manager (conflicts are its 409), the result prepared as a create or an
// update of the main resource or status, then decoded (pruned, defaulted)
// and validated as any write.
func (a *admission) apply(ctx context.Context, req *validatorv1.AdmitRequest) (*validatorv1.AdmitResponse, error) {
	var err error
	if len(req.GetOldObject()) > 0 {
		if a.old, _, err = a.decode(req.GetOldObject(), true); err != nil {
			return nil, fmt.Errorf("old object: %w", err)
		}
		a.update = true
	}
	if len(req.GetApplyPatch()) > objsize.MaxBytes {
		// What the HTTP edge answers a body over MaxRequestBodyBytes.
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", objsize.MaxBytes))
	}
	// The patch is parsed once when strict decoding accepts it (into a
	// map, strict decoding differs only in refusing duplicate keys, so its
	// result is the lenient one); the strict error is answered after the
	// merge, as upstream checks it after applying.
	patchObj := map[string]any{}
	var strictErr error
	strict := false
	switch req.GetFieldValidation() {
	case metav1.FieldValidationStrict, metav1.FieldValidationWarn, "":
		strict = true
		strictErr = yaml.UnmarshalStrict(req.GetApplyPatch(), &patchObj)
	}
	if !strict || strictErr != nil {
		patchObj = map[string]any{}
		if err := yaml.Unmarshal(req.GetApplyPatch(), &patchObj); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		}
	}
	merged, err := a.merge(ctx, patchObj, req.GetFieldManager(), req.GetForce())
	if err != nil {
		if cerr := a.conversionFailure(); cerr != nil {
			return nil, cerr
		}
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, err
		}
		// Upstream answers the field manager's other failures (a patch
		// that does not fit the schema, duplicate list-map keys) as a
		// plain 500 with the error's text.
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 500, Message: err.Error(),
		}}
	}
	var warnings []string
	if strictErr != nil {
		if req.GetFieldValidation() == metav1.FieldValidationStrict {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", strictErr))
		}
		warnings = yamlWarnings(strictErr.Error())
	}
	obj := merged
	if err := objmeta.CheckNameAndNamespace(obj, req.GetNamespace(), req.GetName(), a.cv.namespaced); err != nil {
		return nil, err
	}
	if a.old == nil {
		objmeta.PrepareCreate(obj, time.Now(), a.cv.hasStatus)
	} else {
		sub := req.GetSubresource()
		if a.scale {
			sub = "" // a scale write is an update of the main resource
		}
		obj = objmeta.PrepareUpdate(obj, runtime.DeepCopyJSON(a.old), a.cv.hasStatus, sub)
	}
	// The merged object decoded as any written object (its JSON numbers
	// as the validator's decoder reads them), pruned and defaulted.
	raw, err := jsonenc.Append(nil, obj)
	if err != nil {
		return nil, fmt.Errorf("encode applied object: %w", err)
	}
	if obj, _, err = a.decode(raw, false); err != nil {
		return nil, err
	}
	a.warnings = append(a.warnings, warnings...)
	resp, err := a.finish(ctx, obj, len(raw))
	if err != nil {
		return nil, err
	}
	resp.Created = a.old == nil
	return resp, nil
}

// merge applies patchObj for manager with the field manager of the
// admission's subresource. On the scale subresource the patch is a Scale:
// its replicas land at the version's spec replicas path of the stored
// object.
func (a *admission) merge(ctx context.Context, patchObj map[string]any, manager string, force bool) (map[string]any, error) {
	patch := &unstructured.Unstructured{Object: patchObj}
	if a.scale {
		replicas, mf, err := a.scaleManaged(ctx, func(fm *managedfields.FieldManager, live *autoscalingv1.Scale) (runtime.Object, error) {
			return fm.Apply(live, patch, manager, force)
		})
		if err != nil {
			return nil, err
		}
		obj := runtime.DeepCopyJSON(a.old)
		path := strings.Split(strings.TrimPrefix(a.cv.scale.SpecReplicasPath, "."), ".")
		if err := unstructured.SetNestedField(obj, replicas, path...); err != nil {
			return nil, err
		}
		(&unstructured.Unstructured{Object: obj}).SetManagedFields(mf)
		return obj, nil
	}
	fm, err := a.manager(ctx)
	if err != nil {
		return nil, err
	}
	merged, err := fm.Apply(a.live(), patch, manager, force)
	if err != nil {
		return nil, err
	}
	u, ok := merged.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("field manager returned %T", merged)
	}
	return u.Object, nil
}

// yamlWarnings splits a YAML strict decoding error into one warning a
// line, as upstream's parseYAMLWarnings does (anything else is one
// warning).
func yamlWarnings(msg string) []string {
	rest, ok := strings.CutPrefix(msg, "error converting YAML to JSON: yaml: unmarshal errors:\n")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "yaml: unmarshal errors:\n"); !ok {
			return []string{msg}
		}
	}
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}
