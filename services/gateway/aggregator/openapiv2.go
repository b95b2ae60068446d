package aggregator

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	openapiaggregator "k8s.io/kube-aggregator/pkg/controllers/openapi/aggregator"
	kubeopenapiaggregator "k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// OpenAPI v2, as kube-aggregator's OpenAPI aggregator: /openapi/v2 is the
// local document with the document of each available APIService merged
// in, in kube-aggregator's order (by group priority, then version
// priority): the backend's /openapi/v2, downloaded through the proxy as
// system:aggregator with kube-aggregator's downloader (its ETag sent
// back), kept to the paths of the APIService's group version
// (/apis/<group>/<version>/), and merged with kube-openapi's
// MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters. The
// merged document is served by kube-openapi's OpenAPIService (JSON or
// protobuf, ETag, gzip), rebuilt only when the local document's ETag or a
// backend's changes.

// openAPIv2Spec is an APIService's downloaded document.
type openAPIv2Spec struct {
	mu         sync.Mutex // serialises the downloader
	downloader openapiaggregator.CacheableDownloader
	spec       *spec.Swagger // filtered; nil until downloaded
	etag       string
}

// mergedV2 is the last merged document.
type mergedV2 struct {
	localETag string // the local document's
	key       string // the local ETag and the backends' names and ETags
	service   *handler.OpenAPIService
	mux       *http.ServeMux
}

// refreshOpenAPIv2 downloads the APIService's backend document (a 304
// keeps the last one; an error too, as kube-aggregator's LastSuccess).
func (a *Aggregator) refreshOpenAPIv2(s *apiregistrationv1.APIService) {
	b, ok := a.state.Load().byGroupVersion[s.Spec.Group+"/"+s.Spec.Version]
	if !ok {
		return
	}
	a.discMu.Lock()
	e := a.openAPIv2[s.Name]
	if e == nil {
		e = &openAPIv2Spec{}
		a.openAPIv2[s.Name] = e
	}
	a.discMu.Unlock()

	// the proxy's forward, without the availability check: the check that
	// calls this has just passed
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.forward(w, r, b) })
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.downloader == nil {
		d := openapiaggregator.NewDownloader()
		e.downloader = openapiaggregator.NewCacheableDownloader(s.Name, &d, h)
	} else {
		e.downloader.UpdateHandler(h)
	}
	sw, etag, err := e.downloader.Get()
	if err != nil {
		a.log.Debug("APIService OpenAPI v2", "apiservice", s.Name, "err", err)
		return
	}
	if etag == e.etag && e.spec != nil {
		return
	}
	filtered := kubeopenapiaggregator.FilterSpecByPathsWithoutSideEffects(sw, []string{"/apis/" + s.Spec.Group + "/" + s.Spec.Version + "/"})
	a.discMu.Lock()
	e.spec, e.etag = filtered, etag
	a.discMu.Unlock()
}

// serveOpenAPIv2 serves /openapi/v2: the local document alone while no
// available APIService has one, else the merged document.
func (a *Aggregator) serveOpenAPIv2(w http.ResponseWriter, r *http.Request, next http.Handler, st *state) {
	type remote struct {
		name string
		spec *spec.Swagger
		etag string
	}
	var remotes []remote
	a.discMu.Lock()
	for _, s := range byPriority(st) {
		b := st.byGroupVersion[s.Spec.Group+"/"+s.Spec.Version]
		if e := a.openAPIv2[s.Name]; e != nil && e.spec != nil && b != nil && b.available {
			remotes = append(remotes, remote{s.Name, e.spec, e.etag})
		}
	}
	a.discMu.Unlock()
	if len(remotes) == 0 {
		next.ServeHTTP(w, r)
		return
	}

	// the local document's ETag (its body only when it changed)
	a.v2Mu.Lock()
	last := a.v2Merged
	a.v2Mu.Unlock()
	r2 := r.Clone(r.Context())
	r2.Header.Set("Accept", "application/json")
	r2.Header.Del("Accept-Encoding")
	dropConditions(r2.Header)
	if last != nil {
		r2.Header.Set("If-None-Match", last.localETag)
	}
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r2)
	res := rec.Result()
	localETag := res.Header.Get("Etag")
	switch {
	case res.StatusCode == http.StatusNotModified && last != nil:
		localETag = last.localETag
	case res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"):
		copyResponse(w, res, rec.Body.Bytes())
		return
	}
	var key strings.Builder
	key.WriteString(localETag)
	for _, rm := range remotes {
		key.WriteString("|" + rm.name + "=" + rm.etag)
	}
	m := last
	if m == nil || m.key != key.String() {
		var local *spec.Swagger
		if res.StatusCode == http.StatusOK {
			local = &spec.Swagger{}
			if err := local.UnmarshalJSON(rec.Body.Bytes()); err != nil {
				copyResponse(w, res, rec.Body.Bytes())
				return
			}
		} else {
			// 304: the local document as last parsed is in the merged one's
			// first part; fetch it again in full
			r2.Header.Del("If-None-Match")
			rec = httptest.NewRecorder()
			next.ServeHTTP(rec, r2)
			local = &spec.Swagger{}
			if rec.Code != http.StatusOK || local.UnmarshalJSON(rec.Body.Bytes()) != nil {
				copyResponse(w, rec.Result(), rec.Body.Bytes())
				return
			}
		}
		merged := &spec.Swagger{}
		*merged = *local
		merged.Paths, merged.Definitions, merged.Parameters = nil, nil, nil
		parts := []*spec.Swagger{local}
		for _, rm := range remotes {
			parts = append(parts, rm.spec)
		}
		for _, part := range parts {
			// kube-openapi merges the GVK lists of definitions both have
			// into the destination's extensions, which must exist:
			// crdplane's own Status and DeleteOptions carry no GVK list,
			// kube-apiserver's do
			for name, d := range merged.Definitions {
				if d.Extensions == nil {
					d.Extensions = spec.Extensions{}
					merged.Definitions[name] = d
				}
			}
			if err := kubeopenapiaggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(merged, part); err != nil {
				http.Error(w, "failed to build merge specs: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		m = &mergedV2{localETag: localETag, key: key.String(), service: handler.NewOpenAPIService(merged), mux: http.NewServeMux()}
		m.service.RegisterOpenAPIVersionedService("/openapi/v2", m.mux)
		a.v2Mu.Lock()
		a.v2Merged = m
		a.v2Mu.Unlock()
	}
	// kube-openapi's handler sets the Vary headers (the edge's are
	// dropped) and compresses as upstream's
	w.Header().Del("Vary")
	r3 := r.Clone(r.Context())
	r3.URL.Path = httpx.RequestURL(r).Path
	m.mux.ServeHTTP(w, r3)
}

// byPriority is kube-aggregator's order of the OpenAPI v2 merge
// (pkg/controllers/openapi/aggregator's sortByPriority): by group priority
// (the group's highest groupPriorityMinimum), higher first, then by name.
// Within a group that is by name alone: upstream compares an APIService's
// version priority with itself there.
func byPriority(st *state) []*apiregistrationv1.APIService {
	groupPriority := map[string]int32{}
	var out []*apiregistrationv1.APIService
	for _, s := range st.sorted {
		if s.Spec.Service == nil {
			continue
		}
		out = append(out, s)
		if p, ok := groupPriority[s.Spec.Group]; !ok || s.Spec.GroupPriorityMinimum > p {
			groupPriority[s.Spec.Group] = s.Spec.GroupPriorityMinimum
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Spec.Group != out[j].Spec.Group {
			if pi, pj := groupPriority[out[i].Spec.Group], groupPriority[out[j].Spec.Group]; pi != pj {
				return pi > pj
			}
		}
		return out[i].Name < out[j].Name
	})
	return out
}
