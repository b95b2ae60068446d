package gateway

import (
	"context"

	"github.com/crdplane/crdplane/services/gateway/crd"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/rbac"
)

// The Kubernetes wire formats (pkg/kubewire through httpx): which kind of
// endpoint a request is, for content negotiation and body decoding.

// writeTarget is the endpoint kind of a create, update, patch or delete.
func writeTarget(group, version, plural, sub string) httpx.Target {
	switch {
	case isCRDs(group, version, plural):
		return httpx.TargetCRD
	case rbac.IsRBAC(group):
		return httpx.TargetRBAC
	case sub == "scale":
		return httpx.TargetScale
	}
	return httpx.TargetCustomResource
}

// bodyFor describes a create or update body's endpoint for
// httpx.DecodeRequestBody: a protobuf body of a custom resource is
// answered with a 400 naming its kind, resolved here (a path that serves
// nothing is its 404 first).
func (a *kubeAPI) bodyFor(ctx context.Context, group, version, plural, namespace, sub string) httpx.BodyFor {
	return httpx.BodyFor{
		Target: writeTarget(group, version, plural, sub),
		Group:  group, Version: version,
		Kind: func() (string, error) {
			return a.crAPI.Kind(ctx, group, version, plural, namespace)
		},
	}
}

// isCRDs reports whether a request addresses the CRDs themselves.
func isCRDs(group, ver, plural string) bool {
	return crd.IsCRDs(group, ver, plural)
}
