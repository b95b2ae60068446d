package aggregator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// OpenAPI v3, as kube-aggregator's openapiv3 aggregator: the /openapi/v3
// index lists, beside the local documents, the document of each available
// APIService's group version as its backend's index names it (its
// serverRelativeURL, with the backend's hash), and
// /openapi/v3/apis/<group>/<version> is the backend's document, fetched as
// system:kube-aggregator. OpenAPI v2 is merged too (openapiv2.go).

// openAPIv3Index is the index's shape.
type openAPIv3Index struct {
	Paths map[string]struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	} `json:"paths"`
}

// refreshOpenAPI keeps the backend's index entry of the APIService's group
// version.
func (a *Aggregator) refreshOpenAPI(ctx context.Context, s *apiregistrationv1.APIService) {
	url, err := a.fetchOpenAPIEntry(ctx, s)
	if err != nil {
		a.log.Debug("APIService OpenAPI v3", "apiservice", s.Name, "err", err)
		return
	}
	a.discMu.Lock()
	a.openAPIv3[s.Name] = url
	a.discMu.Unlock()
}

func (a *Aggregator) fetchOpenAPIEntry(ctx context.Context, s *apiregistrationv1.APIService) (string, error) {
	b, ok := a.state.Load().byGroupVersion[s.Spec.Group+"/"+s.Spec.Version]
	if !ok || b.transportErr != nil {
		return "", fmt.Errorf("no transport to %s", s.Name)
	}
	client := a.aggregatorClient(b)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+a.cfg.Resolver.Resolve(b.ref)+"/openapi/v3", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /openapi/v3: %d", resp.StatusCode)
	}
	var idx openAPIv3Index
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&idx); err != nil {
		return "", err
	}
	e, ok := idx.Paths["apis/"+s.Spec.Group+"/"+s.Spec.Version]
	if !ok {
		return "", fmt.Errorf("the backend's index has no apis/%s/%s", s.Spec.Group, s.Spec.Version)
	}
	return e.ServerRelativeURL, nil
}

// aggregatorClient is an HTTP client to a backend as the aggregator
// itself (system:kube-aggregator in system:masters).
func (a *Aggregator) aggregatorClient(b *backend) *http.Client {
	return &http.Client{Transport: transport.NewAuthProxyRoundTripper("system:kube-aggregator", "", []string{"system:masters"}, nil, b.roundTripper), Timeout: 5 * time.Second}
}

// serveOpenAPIIndex serves /openapi/v3: the local index with the
// APIServices' entries added.
func (a *Aggregator) serveOpenAPIIndex(w http.ResponseWriter, r *http.Request, next http.Handler, st *state) {
	if r.Method != http.MethodGet {
		next.ServeHTTP(w, r)
		return
	}
	// the local index in full: the client's conditions are the merged
	// index's, not the local one's
	r2 := r.Clone(r.Context())
	dropConditions(r2.Header)
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r2)
	res := rec.Result()
	body := rec.Body.Bytes()
	var idx map[string]map[string]any
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &idx) != nil || idx["paths"] == nil {
		copyResponse(w, res, body)
		return
	}
	a.discMu.Lock()
	for _, s := range st.sorted {
		b := st.byGroupVersion[s.Spec.Group+"/"+s.Spec.Version]
		if u, ok := a.openAPIv3[s.Name]; ok && b != nil && b.available {
			idx["paths"]["apis/"+s.Spec.Group+"/"+s.Spec.Version] = map[string]string{"serverRelativeURL": u}
		}
	}
	a.discMu.Unlock()
	merged, err := json.Marshal(idx)
	if err != nil {
		copyResponse(w, res, body)
		return
	}
	for k, v := range res.Header {
		// the local index's validators and type are not the merged one's
		switch k {
		case "Content-Length", "Content-Type", "Etag", "Last-Modified":
		default:
			w.Header()[k] = v
		}
	}
	// as kube-aggregator's specProxier serves it (v1.33): net/http's
	// ServeContent, modified now, no ETag, and no Content-Type set, so
	// that ServeContent sniffs it ("text/plain; charset=utf-8"); ranges
	// and If-Modified-Since answered as ServeContent answers them
	http.ServeContent(w, r, "/openapi/v3", time.Now(), bytes.NewReader(merged))
}

// dropConditions removes a request's conditional headers (RFC 7232 and
// Range): the local document is asked for in full when the answer is a
// merge of it.
func dropConditions(h http.Header) {
	for _, k := range []string{"If-None-Match", "If-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range"} {
		h.Del(k)
	}
}

// serveOpenAPIDocument serves /openapi/v3/apis/<group>/<version> of an
// available APIService: its backend's document.
func (a *Aggregator) serveOpenAPIDocument(w http.ResponseWriter, r *http.Request, b *backend) {
	if !b.available {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if b.transportErr != nil {
		http.Error(w, b.transportErr.Error(), http.StatusInternalServerError)
		return
	}
	// the backend's address, the path of the APIService's group version,
	// the client's hash only
	u := url.URL{Scheme: "https", Host: a.cfg.Resolver.Resolve(b.ref), Path: "/openapi/v3/apis/" + b.apiService.Spec.Group + "/" + b.apiService.Spec.Version}
	if hash := httpx.RequestURL(r).Query().Get("hash"); hash != "" {
		u.RawQuery = url.Values{"hash": {hash}}.Encode()
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil) //nolint:gosec // G704: the host is the registered APIService's backend, as the proxy's
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, h := range []string{"Accept", "If-None-Match"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := a.aggregatorClient(b).Do(req) //nolint:gosec // G704: as above
	if err != nil {
		http.Error(w, "error trying to reach service: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for _, h := range []string{"Content-Type", "Etag", "Cache-Control", "Expires", "Last-Modified"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
