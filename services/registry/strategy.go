package registry

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objmeta"
)

// prepareForCreate sets what the server owns on a new CRD, as
// kube-apiserver's BeforeCreate and the CRD strategy do: system metadata
// (uid, creationTimestamp, generation 1, a name from generateName, no
// resourceVersion or deletion fields, no namespace) and a fresh status whose
// storedVersions hold the storage version.
func prepareForCreate(crd *CRD) error {
	meta, err := metaMap(&crd.ObjectMeta)
	if err != nil {
		return err
	}
	obj := objmeta.Object{"metadata": meta}
	if err := objmeta.CheckNameAndNamespace(obj, "", "", false); err != nil {
		return err
	}
	objmeta.PrepareCreate(obj, now().Time, false)
	if err := setMetaMap(&crd.ObjectMeta, objmeta.Meta(obj)); err != nil {
		return err
	}
	crd.Status = CRDStatus{}
	recordStorageVersion(crd)
	return nil
}

// prepareForUpdate merges an update of the main resource into old, as
// BeforeUpdate and the CRD strategy do: status is kept from old, the
// generation moves on when the spec changed, immutable metadata stays, and a
// new storage version is recorded in storedVersions.
func prepareForUpdate(crd, old *CRD) {
	keepSystemMeta(crd, old)
	crd.Status = *old.Status.DeepCopy()
	if !apiequality.Semantic.DeepEqual(old.Spec, crd.Spec) {
		crd.Generation = old.Generation + 1
	}
	recordStorageVersion(crd)
}

// prepareForStatusUpdate merges an update of the status subresource into
// old: the spec is kept from old. As upstream's CRD status strategy, the
// request's metadata (labels, annotations, finalizers) is taken as sent,
// except for the system fields.
func prepareForStatusUpdate(crd, old *CRD) {
	keepSystemMeta(crd, old)
	crd.Spec = *old.Spec.DeepCopy()
}

// keepSystemMeta applies the generic BeforeUpdate rules.
func keepSystemMeta(crd, old *CRD) {
	crd.Namespace = ""
	crd.Generation = old.Generation
	if crd.UID == "" {
		crd.UID = old.UID
	}
	if !old.CreationTimestamp.IsZero() {
		crd.CreationTimestamp = old.CreationTimestamp
	}
	if old.DeletionTimestamp != nil {
		crd.DeletionTimestamp = old.DeletionTimestamp.DeepCopy()
	}
	if old.DeletionGracePeriodSeconds != nil && crd.DeletionGracePeriodSeconds == nil {
		v := *old.DeletionGracePeriodSeconds
		crd.DeletionGracePeriodSeconds = &v
	}
}

// shouldDeleteOnUpdate reports whether an update that leaves crd without
// finalizers after deletion was requested removes it (upstream's
// ShouldDeleteDuringUpdate).
func shouldDeleteOnUpdate(crd, old *CRD) bool {
	if len(crd.Finalizers) > 0 || old.DeletionTimestamp == nil {
		return false
	}
	return old.DeletionGracePeriodSeconds == nil || *old.DeletionGracePeriodSeconds == 0
}

// markForDeletion is the first delete of a CRD: deletionTimestamp, the
// cleanup finalizer and the Terminating condition.
func markForDeletion(crd *CRD) {
	if crd.DeletionTimestamp == nil {
		t := now()
		crd.DeletionTimestamp = &t
	}
	if !hasFinalizer(crd, cleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, cleanupFinalizer)
	}
	setCondition(crd, condition{
		Type:    condTerminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
}

// validateCRDCreate validates a prepared new CRD; a 422 on failure.
func validateCRDCreate(ctx context.Context, crd *CRD) error {
	return validateCRD(ctx, nil, crd, nil)
}

// validateCRDUpdate validates a prepared update of the main resource.
func validateCRDUpdate(ctx context.Context, crd, old *CRD) error {
	return validateCRD(ctx, nil, crd, old)
}

// validateCRD validates a prepared create (old nil) or update of the main
// resource: the registry's own rules, then the validator's schema checks
// (CEL, defaults) when checks is set. The result is a 422 listing every
// field error, or another Status when validation could not run. A valid
// crd's defaults are left as upstream's validation leaves them
// (coerceDefaults).
func validateCRD(ctx context.Context, checks schemaChecks, crd, old *CRD) error {
	_, err := validateCRDWithWarnings(ctx, checks, crd, old)
	return err
}

func validateCRDWithWarnings(ctx context.Context, checks schemaChecks, crd, old *CRD) ([]string, error) {
	in, err := toInternal(crd)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var errs field.ErrorList
	if old == nil {
		errs = validateCreate(ctx, in)
	} else {
		oldIn, err := toInternal(old)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		errs = validateUpdate(ctx, in, oldIn)
	}
	// before the validator's checks, which compile the schemas (and are
	// skipped when this finds a fault)
	errs = append(errs, validateCompiledSize(crd, old, in)...)
	errs, warnings, err := withSchemaChecks(ctx, checks, crd, old, errs)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return warnings, invalid(crd.Name, errs)
	}
	// as upstream's validation, which coerces the defaults it checks in
	// place
	coerceDefaults(crd)
	return warnings, nil
}

// validateCRDStatusUpdate validates a prepared update of the status.
func validateCRDStatusUpdate(ctx context.Context, crd, old *CRD) error {
	in, err := toInternal(crd)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	oldIn, err := toInternal(old)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return invalid(crd.Name, validateStatusUpdate(ctx, in, oldIn))
}

func invalid(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fielderr.NewInvalid(crdGK, name, errs)
}

func metaMap(m *metav1.ObjectMeta) (map[string]any, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	return out, nil
}

func setMetaMap(m *metav1.ObjectMeta, in map[string]any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	var out metav1.ObjectMeta
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("decode metadata: %w", err)
	}
	*m = out
	return nil
}
