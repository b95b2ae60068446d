package registry

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// syncEstablished marks a CRD whose names were accepted as Established
// (False "InvalidCABundle" when its conversion webhook's CA bundle cannot
// be used).
func (c *controllers) syncEstablished(ctx context.Context, name string) error {
	cur, ok := c.inf.get(name)
	if !ok || !conditionTrue(cur, condNamesAccepted) || conditionTrue(cur, condEstablished) {
		return nil
	}
	want := condition{
		Type:    condEstablished,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InitialNamesAccepted",
		Message: "the initial names have been accepted",
	}
	if invalidConversionCABundle(cur) {
		want = condition{
			Type:    condEstablished,
			Status:  apiextensionsv1.ConditionFalse,
			Reason:  "InvalidCABundle",
			Message: "The conversion webhook CABundle is invalid",
		}
	}
	// Written once: the write brings the CRD back here (still not
	// Established), and upstream's status update of an unchanged object
	// stores nothing.
	if conditionEquivalent(&want, findCondition(cur, condEstablished)) {
		return nil
	}
	crd := cur.DeepCopy()
	setCondition(crd, want)
	return c.writeStatus(ctx, crd, cur)
}

func invalidConversionCABundle(crd *CRD) bool {
	cv := crd.Spec.Conversion
	if cv == nil || cv.Webhook == nil || cv.Webhook.ClientConfig == nil {
		return false
	}
	b := cv.Webhook.ClientConfig.CABundle
	return len(b) > 0 && checkCABundle(b) != nil
}

// syncAPIApproval keeps the KubernetesAPIApprovalPolicyConformant condition
// of CRDs in protected groups in line with their approval annotation.
func (c *controllers) syncAPIApproval(ctx context.Context, name string) error {
	cur, ok := c.inf.get(name)
	if !ok {
		return nil
	}
	want := approvalCondition(cur)
	if want == nil || conditionEquivalent(want, findCondition(cur, condAPIApproval)) {
		return nil
	}
	crd := cur.DeepCopy()
	setCondition(crd, *want)
	return c.writeStatus(ctx, crd, cur)
}
