package registry

import (
	"mime"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// aggregatedResource is one resource of aggregated discovery.
type aggregatedResource struct {
	resource, singular string
	kind               *metav1.GroupVersionKind
	cluster            bool
	verbs              []string
	shortNames         []string
	categories         []string
	status             *metav1.GroupVersionKind // status subresource's kind
	scale              bool
}

// wantsAggregated picks aggregated discovery (apidiscovery.k8s.io v2 or
// v2beta1 APIGroupDiscoveryList) when the Accept header asks for it before
// plain JSON.
func wantsAggregated(accept string) (contentType, version string, ok bool) {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt != "application/json" && mt != "*/*" && mt != "application/*" {
			continue
		}
		if params["g"] == "apidiscovery.k8s.io" && params["as"] == "APIGroupDiscoveryList" {
			if v := params["v"]; v == "v2" || v == "v2beta1" {
				return "application/json;g=apidiscovery.k8s.io;v=" + v + ";as=APIGroupDiscoveryList", v, true
			}
			continue
		}
		if params["as"] == "" {
			return "", "", false // plain JSON preferred
		}
	}
	return "", "", false
}

// aggregated renders the group's APIGroupDiscovery (apidiscovery.k8s.io
// v2).
func (g *discoveryGroup) aggregated() apidiscoveryv2.APIGroupDiscovery {
	gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
	for _, vn := range g.order {
		v := g.versions[vn]
		vd := apidiscoveryv2.APIVersionDiscovery{Version: vn, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		res := append([]aggregatedResource(nil), v.aggregated...)
		sort.Slice(res, func(i, j int) bool { return res[i].resource < res[j].resource })
		for _, r := range res {
			vd.Resources = append(vd.Resources, r.v2())
		}
		gd.Versions = append(gd.Versions, vd)
	}
	return gd
}

func (r aggregatedResource) v2() apidiscoveryv2.APIResourceDiscovery {
	scope := apidiscoveryv2.ScopeNamespace
	if r.cluster {
		scope = apidiscoveryv2.ScopeCluster
	}
	out := apidiscoveryv2.APIResourceDiscovery{
		Resource:         r.resource,
		ResponseKind:     r.kind,
		Scope:            scope,
		SingularResource: r.singular,
		Verbs:            r.verbs,
		ShortNames:       r.shortNames,
		Categories:       r.categories,
	}
	if r.status != nil {
		out.Subresources = append(out.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: "status", ResponseKind: r.status, Verbs: subresourceVerbs,
		})
	}
	if r.scale {
		out.Subresources = append(out.Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  "scale",
			ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
			Verbs:        subresourceVerbs,
		})
	}
	return out
}

// toV2beta1 is the same group in apidiscovery.k8s.io v2beta1.
func toV2beta1(g apidiscoveryv2.APIGroupDiscovery) apidiscoveryv2beta1.APIGroupDiscovery {
	bg := apidiscoveryv2beta1.APIGroupDiscovery{ObjectMeta: g.ObjectMeta}
	for _, v := range g.Versions {
		bv := apidiscoveryv2beta1.APIVersionDiscovery{Version: v.Version, Freshness: apidiscoveryv2beta1.DiscoveryFreshness(v.Freshness)}
		for _, r := range v.Resources {
			br := apidiscoveryv2beta1.APIResourceDiscovery{
				Resource: r.Resource, ResponseKind: r.ResponseKind, Scope: apidiscoveryv2beta1.ResourceScope(r.Scope),
				SingularResource: r.SingularResource, Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
			}
			for _, s := range r.Subresources {
				br.Subresources = append(br.Subresources, apidiscoveryv2beta1.APISubresourceDiscovery{
					Subresource: s.Subresource, ResponseKind: s.ResponseKind, AcceptedTypes: s.AcceptedTypes, Verbs: s.Verbs,
				})
			}
			bv.Resources = append(bv.Resources, br)
		}
		bg.Versions = append(bg.Versions, bv)
	}
	return bg
}
