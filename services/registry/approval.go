package registry

import (
	"fmt"
	"net/url"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// approvalAnnotation marks a CRD of a protected group as approved by API
// review (KEP-1111).
const approvalAnnotation = apiextensionsv1.KubeAPIApprovedAnnotation

type approval int

const (
	approvalInvalid approval = iota
	approvalApproved
	approvalBypassed
	approvalMissing
)

// protectedGroup reports whether group is owned by the Kubernetes project.
func protectedGroup(group string) bool {
	return group == "k8s.io" || strings.HasSuffix(group, ".k8s.io") ||
		group == "kubernetes.io" || strings.HasSuffix(group, ".kubernetes.io")
}

// approvalState reads the approval annotation.
func approvalState(annotations map[string]string) (approval, string) {
	v := annotations[approvalAnnotation]
	u, err := url.ParseRequestURI(v)
	switch {
	case v == "":
		return approvalMissing, fmt.Sprintf("protected groups must have approval annotation %q, see https://github.com/kubernetes/enhancements/pull/1111", approvalAnnotation)
	case strings.HasPrefix(v, "unapproved"):
		return approvalBypassed, fmt.Sprintf("not approved: %q", v)
	case err == nil && u != nil && u.Host != "" && u.Scheme != "":
		return approvalApproved, fmt.Sprintf("approved in %v", v)
	default:
		return approvalInvalid, fmt.Sprintf("protected groups must have approval annotation %q with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111", approvalAnnotation)
	}
}

// approvalCondition is the KubernetesAPIApprovalPolicyConformant condition a
// CRD should carry (nil outside the protected groups).
func approvalCondition(crd *CRD) *condition {
	if !protectedGroup(crd.Spec.Group) {
		return nil
	}
	state, reason := approvalState(crd.Annotations)
	c := &condition{Type: condAPIApproval, Status: apiextensionsv1.ConditionFalse, Message: reason}
	switch state {
	case approvalInvalid:
		c.Reason = "InvalidAnnotation"
	case approvalMissing:
		c.Reason = "MissingAnnotation"
	case approvalApproved:
		c.Status, c.Reason = apiextensionsv1.ConditionTrue, "ApprovedAnnotation"
	case approvalBypassed:
		c.Reason = "UnapprovedAnnotation"
	}
	return c
}
