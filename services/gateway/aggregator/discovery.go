package aggregator

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/endpoints"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/crdplane/crdplane/pkg/kubewire"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// versionDiscovery is what a backend's discovery says of its group
// version (aggregated discovery's entry).
type versionDiscovery struct {
	entry apidiscoveryv2.APIVersionDiscovery
}

// acceptV2 is client-go's aggregated discovery Accept, what upstream's
// discovery manager asks backends for.
const acceptV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// refreshDiscovery fetches the backend's discovery of the APIService's
// group version, as kube-aggregator's discovery manager: its aggregated
// /apis, or, when the backend serves none, /apis/<group>/<version>
// converted. A failure keeps the last one (marked Stale when served).
func (a *Aggregator) refreshDiscovery(ctx context.Context, s *apiregistrationv1.APIService) {
	entry, err := a.fetchDiscovery(ctx, s)
	if err != nil {
		a.log.Debug("APIService discovery", "apiservice", s.Name, "err", err)
		return
	}
	a.discMu.Lock()
	a.discovery[s.Name] = &versionDiscovery{entry: entry}
	a.discMu.Unlock()
}

func (a *Aggregator) fetchDiscovery(ctx context.Context, s *apiregistrationv1.APIService) (apidiscoveryv2.APIVersionDiscovery, error) {
	st := a.state.Load()
	b, ok := st.byGroupVersion[s.Spec.Group+"/"+s.Spec.Version]
	if !ok || b.transportErr != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, fmt.Errorf("no transport to %s", s.Name)
	}
	client := a.aggregatorClient(b)
	host := a.cfg.Resolver.Resolve(b.ref)
	get := func(path, accept string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+path, nil)
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Accept", accept)
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		return resp, body, err
	}
	gv := metav1.GroupVersion{Group: s.Spec.Group, Version: s.Spec.Version}
	resp, body, err := get("/apis", acceptV2)
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	if resp.StatusCode == http.StatusOK && isAggregated(resp.Header.Get("Content-Type")) {
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			return apidiscoveryv2.APIVersionDiscovery{}, err
		}
		for _, g := range list.Items {
			if g.Name != gv.Group {
				continue
			}
			for _, v := range g.Versions {
				if v.Version == gv.Version {
					return v, nil
				}
			}
		}
		return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version}, nil
	}
	resp, body, err = get("/apis/"+gv.Group+"/"+gv.Version, "application/json")
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return apidiscoveryv2.APIVersionDiscovery{}, fmt.Errorf("failed to download legacy discovery for %s: %s", "/apis/"+gv.Group+"/"+gv.Version, body)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	resources, err := endpoints.ConvertGroupVersionIntoToDiscovery(list.APIResources)
	if err != nil {
		return apidiscoveryv2.APIVersionDiscovery{}, err
	}
	return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: resources}, nil
}

func isAggregated(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json" && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
}

// remoteGroups are the APIServices' groups that the local server does not
// serve, in upstream's order (group priority, then name; versions by
// priority), each with its APIServices.
func remoteGroups(st *state, local map[string]bool) [][]*apiregistrationv1.APIService {
	var out [][]*apiregistrationv1.APIService
	for _, s := range st.sorted {
		if s.Spec.Group == "" || local[s.Spec.Group] {
			continue
		}
		if n := len(out); n > 0 && out[n-1][0].Spec.Group == s.Spec.Group {
			out[n-1] = append(out[n-1], s)
			continue
		}
		out = append(out, []*apiregistrationv1.APIService{s})
	}
	return out
}

// apiGroup is upstream's convertToDiscoveryAPIGroup: the versions by
// priority, the first preferred.
func apiGroup(services []*apiregistrationv1.APIService) metav1.APIGroup {
	g := metav1.APIGroup{Name: services[0].Spec.Group}
	for _, s := range services {
		v := metav1.GroupVersionForDiscovery{GroupVersion: s.Spec.Group + "/" + s.Spec.Version, Version: s.Spec.Version}
		if len(g.Versions) == 0 {
			g.PreferredVersion = v
		}
		g.Versions = append(g.Versions, v)
	}
	return g
}

// serveGroup serves /apis/<group> of a group the APIServices serve, as
// upstream's apiGroupHandler.
func (a *Aggregator) serveGroup(w http.ResponseWriter, r *http.Request, group string, st *state) {
	var services []*apiregistrationv1.APIService
	for _, s := range st.sorted {
		if s.Spec.Group == group {
			services = append(services, s)
		}
	}
	g := apiGroup(services)
	g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
	writeJSON(w, r, g)
}

// serveAPIs serves /apis: the local document (the registry's) with the
// APIServices' groups added, legacy (APIGroupList) or aggregated
// (APIGroupDiscoveryList v2, JSON). Other encodings (protobuf) are the
// local document's alone.
func (a *Aggregator) serveAPIs(w http.ResponseWriter, r *http.Request, next http.Handler, st *state) {
	if r.Method != http.MethodGet {
		next.ServeHTTP(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("If-None-Match")
	// a client that negotiates protobuf (legacy or aggregated) gets the
	// merged list in protobuf: merged in JSON, then encoded
	neg, err := kubewire.Negotiate(kubewire.Request{Accept: r.Header.Get("Accept"), RawQuery: r.URL.RawQuery, UserAgent: r.UserAgent()}, kubewire.TargetRootDiscovery)
	pb := err == nil && neg.Protobuf()
	if pb {
		r2.Header.Set("Accept", "application/json")
		if neg.Transform == kubewire.TransformAPIGroupDiscoveryList {
			r2.Header.Set("Accept", acceptV2)
		}
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r2)
	res := rec.Result()
	ct := res.Header.Get("Content-Type")
	body := rec.Body.Bytes()
	var out any
	switch {
	case res.StatusCode != http.StatusOK:
	case isAggregated(ct):
		var list apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(body, &list); err != nil {
			break
		}
		local := map[string]bool{}
		for _, g := range list.Items {
			local[g.Name] = true
		}
		for _, services := range remoteGroups(st, local) {
			list.Items = append(list.Items, a.groupDiscovery(st, services))
		}
		out = &list
	case strings.HasPrefix(ct, "application/json"):
		var list metav1.APIGroupList
		if err := json.Unmarshal(body, &list); err != nil || list.Kind != "APIGroupList" {
			break
		}
		local := map[string]bool{}
		for _, g := range list.Groups {
			local[g.Name] = true
		}
		for _, services := range remoteGroups(st, local) {
			list.Groups = append(list.Groups, apiGroup(services))
		}
		out = &list
	}
	if out == nil {
		if pb && res.StatusCode == http.StatusOK {
			// not a list to merge: the local server's own answer in the
			// encoding asked for
			next.ServeHTTP(w, r)
			return
		}
		copyResponse(w, res, body)
		return
	}
	merged, err := json.Marshal(out)
	if err != nil {
		copyResponse(w, res, body)
		return
	}
	var wire []byte
	if pb {
		if wire, err = httpx.Wire().Object(merged); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	for k, v := range res.Header {
		if k != "Content-Length" && k != "Etag" {
			w.Header()[k] = v
		}
	}
	if pb {
		ct := kubewire.ContentTypeProtobuf
		if isAggregated(res.Header.Get("Content-Type")) {
			ct += ";g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
		}
		w.Header().Set("Content-Type", ct)
	}
	if isAggregated(ct) {
		// one ETag for either encoding, as upstream's (of the JSON)
		etag := fmt.Sprintf("%q", fmt.Sprintf("%X", sha512.Sum512(merged)))
		w.Header().Set("Etag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	if pb {
		_, _ = w.Write(wire)
		return
	}
	_, _ = w.Write(append(merged, '\n'))
}

// groupDiscovery is the aggregated discovery entry of a remote group: each
// version as its backend last described it (Current), or empty and Stale
// while it cannot be fetched.
func (a *Aggregator) groupDiscovery(st *state, services []*apiregistrationv1.APIService) apidiscoveryv2.APIGroupDiscovery {
	g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: services[0].Spec.Group}}
	a.discMu.Lock()
	defer a.discMu.Unlock()
	for _, s := range services {
		entry := apidiscoveryv2.APIVersionDiscovery{Version: s.Spec.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessStale}
		b := st.byGroupVersion[s.Spec.Group+"/"+s.Spec.Version]
		if d, ok := a.discovery[s.Name]; ok && b != nil && b.available {
			entry = d.entry
			entry.Freshness = apidiscoveryv2.DiscoveryFreshnessCurrent
		}
		g.Versions = append(g.Versions, entry)
	}
	return g
}

func copyResponse(w http.ResponseWriter, res *http.Response, body []byte) {
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}

func writeJSON(w http.ResponseWriter, _ *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}
