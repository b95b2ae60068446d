package registry

import (
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Condition types and reasons the registry sets, worded as upstream's.
const (
	condEstablished   = apiextensionsv1.Established
	condNamesAccepted = apiextensionsv1.NamesAccepted
	condTerminating   = apiextensionsv1.Terminating
	condAPIApproval   = apiextensionsv1.KubernetesAPIApprovalPolicyConformant

	cleanupFinalizer = apiextensionsv1.CustomResourceCleanupFinalizer
)

type condition = apiextensionsv1.CustomResourceDefinitionCondition

// findCondition returns crd's condition of type t, or nil.
func findCondition(crd *CRD, t apiextensionsv1.CustomResourceDefinitionConditionType) *condition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// conditionTrue reports whether crd has condition t with status True.
func conditionTrue(crd *CRD, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	c := findCondition(crd, t)
	return c != nil && c.Status == apiextensionsv1.ConditionTrue
}

// setCondition adds or replaces the condition of c's type. The transition
// time moves only when the status changes (or was never set).
func setCondition(crd *CRD, c condition) {
	c.LastTransitionTime = now()
	existing := findCondition(crd, c.Type)
	if existing == nil {
		crd.Status.Conditions = append(crd.Status.Conditions, c)
		return
	}
	if existing.Status != c.Status || existing.LastTransitionTime.IsZero() {
		existing.LastTransitionTime = c.LastTransitionTime
	}
	existing.Status, existing.Reason, existing.Message = c.Status, c.Reason, c.Message
}

// removeCondition drops crd's condition of type t.
func removeCondition(crd *CRD, t apiextensionsv1.CustomResourceDefinitionConditionType) {
	out := crd.Status.Conditions[:0:0]
	for _, c := range crd.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	crd.Status.Conditions = out
}

// conditionEquivalent compares conditions ignoring their transition times.
func conditionEquivalent(a, b *condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

func hasFinalizer(crd *CRD, f string) bool {
	for _, x := range crd.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

func removeFinalizer(crd *CRD, f string) {
	out := []string{}
	for _, x := range crd.Finalizers {
		if x != f {
			out = append(out, x)
		}
	}
	crd.Finalizers = out
}

// storageVersion returns the name of crd's storage version ("" if none).
func storageVersion(crd *CRD) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// recordStorageVersion adds the storage version (the first version marked
// storage, even one without a name, as upstream's strategy) to
// status.storedVersions.
func recordStorageVersion(crd *CRD) {
	for _, v := range crd.Spec.Versions {
		if !v.Storage {
			continue
		}
		if !slices.Contains(crd.Status.StoredVersions, v.Name) {
			crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
		}
		return
	}
}
