package httpx

import (
	"context"

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
