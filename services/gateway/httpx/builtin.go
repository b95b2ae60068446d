package httpx

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/patch"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// RegistryWriteOptions are the options of a write of a built-in kind the
// registry serves (CRDs, Namespaces, the RBAC kinds): the User-Agent names
// the manager of requests without fieldManager (managedFields).
func RegistryWriteOptions(ctx context.Context, dryRun []string, fieldManager, fieldValidation string) *registryv1.WriteOptions {
	return &registryv1.WriteOptions{
		DryRun: len(dryRun) > 0, FieldManager: fieldManager, FieldValidation: fieldValidation,
		UserAgent: RequestMetaFrom(ctx).UserAgent,
	}
}

// BuiltinPatchTypeAllowed reports whether kube-apiserver's PATCH route of
// a built-in kind (a go-restful route) consumes patches of type pt: JSON
// patch, merge patch, strategic merge patch and apply.
func BuiltinPatchTypeAllowed(pt string) bool {
	switch pt {
	case patch.JSONPatch, patch.MergePatch, patch.StrategicMerge, patch.ApplyYAML:
		return true
	}
	return false
}

// BuiltinCreateOptions validates the options of a create of a built-in
// kind the registry serves, as kube-apiserver validates CreateOptions
// (422 naming CreateOptions), and returns them as the registry's.
func BuiltinCreateOptions(ctx context.Context, dryRun []string, fieldManager, fieldValidation string) (*registryv1.WriteOptions, error) {
	opts := &metav1.CreateOptions{DryRun: dryRun, FieldManager: fieldManager, FieldValidation: fieldValidation}
	if errs := metav1validation.ValidateCreateOptions(opts); len(errs) > 0 {
		return nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "CreateOptions"}, "", errs)
	}
	return RegistryWriteOptions(ctx, dryRun, fieldManager, fieldValidation), nil
}

// BuiltinUpdateOptions is BuiltinCreateOptions for an update
// (UpdateOptions).
func BuiltinUpdateOptions(ctx context.Context, dryRun []string, fieldManager, fieldValidation string) (*registryv1.WriteOptions, error) {
	opts := &metav1.UpdateOptions{DryRun: dryRun, FieldManager: fieldManager, FieldValidation: fieldValidation}
	if errs := metav1validation.ValidateUpdateOptions(opts); len(errs) > 0 {
		return nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "UpdateOptions"}, "", errs)
	}
	return RegistryWriteOptions(ctx, dryRun, fieldManager, fieldValidation), nil
}

// BuiltinPatchOptions checks a patch of a built-in kind the registry
// serves: its type (the request's Content-Type; go-restful's 415 for one
// the route does not consume) and its options (PatchOptions, as
// kube-apiserver validates them for that type). It returns the patch type
// and the registry's write options.
func BuiltinPatchOptions(ctx context.Context, dryRun []string, fieldManager, fieldValidation string, force bool) (string, *registryv1.WriteOptions, error) {
	pt := patch.Type(RequestMetaFrom(ctx).ContentType)
	if !BuiltinPatchTypeAllowed(pt) {
		return "", nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", "415: Unsupported Media Type", 0, false)
	}
	opts := &metav1.PatchOptions{DryRun: dryRun, FieldManager: fieldManager, FieldValidation: fieldValidation}
	if force {
		opts.Force = &force
	}
	if errs := metav1validation.ValidatePatchOptions(opts, types.PatchType(pt)); len(errs) > 0 {
		return "", nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	wo := RegistryWriteOptions(ctx, dryRun, fieldManager, fieldValidation)
	wo.Force = force
	return pt, wo, nil
}
