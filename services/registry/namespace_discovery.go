package registry

import (
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The legacy core group as crdplane serves it: namespaces (and their
// status and finalize subresources), listed as kube-apiserver lists them.
var (
	nsVerbs         = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	nsFinalizeVerbs = []string{"update"}
)

// coreDocs are the rendered documents of /api/v1 (legacy) and /api
// (aggregated, v2 and v2beta1); they never change.
var coreDocs = sync.OnceValue(func() map[string]document {
	v1 := &metav1.APIResourceList{
		// /api/v1 carries no apiVersion (kube-apiserver's legacy
		// discovery writes the kind only)
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList"},
		GroupVersion: nsGV.Version,
		APIResources: []metav1.APIResource{
			{
				Name: nsResource, SingularName: "namespace", Kind: nsKind, Verbs: nsVerbs,
				ShortNames: []string{"ns"}, StorageVersionHash: storageVersionHash("", nsGV.Version, nsKind),
			},
			{Name: nsResource + "/finalize", Kind: nsKind, Verbs: nsFinalizeVerbs},
			{Name: nsResource + "/status", Kind: nsKind, Verbs: subresourceVerbs},
		},
	}
	kind := &metav1.GroupVersionKind{Version: nsGV.Version, Kind: nsKind}
	group := apidiscoveryv2.APIGroupDiscovery{Versions: []apidiscoveryv2.APIVersionDiscovery{{
		Version:   nsGV.Version,
		Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: []apidiscoveryv2.APIResourceDiscovery{{
			Resource: nsResource, ResponseKind: kind, Scope: apidiscoveryv2.ScopeCluster,
			SingularResource: "namespace", Verbs: nsVerbs, ShortNames: []string{"ns"},
			Subresources: []apidiscoveryv2.APISubresourceDiscovery{
				{Subresource: "finalize", ResponseKind: kind, Verbs: nsFinalizeVerbs},
				{Subresource: "status", ResponseKind: kind, Verbs: subresourceVerbs},
			},
		}},
	}}}
	docs := map[string]document{"v1": newDocument(mustJSON(v1))}
	for v, g := range map[string][]byte{"v2": mustJSON(group), "v2beta1": mustJSON(toV2beta1(group))} {
		body := `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/` + v + `","metadata":{},"items":[` + string(g) + `]}`
		docs["aggregated/"+v] = newDocument([]byte(body))
	}
	return docs
})

// coreDocument returns /api (aggregated discovery only: the gateway renders
// the legacy APIVersions, which name the client's address) or
// /api/<version>.
func coreDocument(ver, accept string) (string, document, error) {
	docs := coreDocs()
	if ver == "" {
		ct, v, ok := wantsAggregated(accept)
		if !ok {
			return "", document{}, notFoundResource()
		}
		return ct, docs["aggregated/"+v], nil
	}
	d, ok := docs[ver]
	if !ok || ver != nsGV.Version {
		return "", document{}, notFoundResource()
	}
	return jsonContentType, d, nil
}
