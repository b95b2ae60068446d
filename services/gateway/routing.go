package gateway

import (
	"net/http"
	"strings"

	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/rbac"
)

// kubeRouter routes custom resource requests the way kube-apiserver does
// where the verb-per-path routes of the grpc-gateway mux cannot: it reads
// a request as upstream's RequestInfoFactory does (the verb from the
// method, the namespace, resource, name and subresource from the path)
// and answers as the custom resource handler does:
//
//   - HEAD is a GET (net/http drops the body), as it is on the OpenAPI and
//     health paths (headAsGet);
//   - POST on an object is a create in its collection (upstream's create
//     handler ignores the URL's name);
//   - PUT or PATCH on a collection is 400 "name must be provided";
//   - any other method (OPTIONS, FOO) is 405 `<verb> is not supported on
//     resources of kind "<plural>.<group>"` with an empty verb, as is a
//     verb the status or scale subresource does not serve (POST, DELETE);
//     a subresource the version does not have is 404;
//
// all of them once the resource resolves (else upstream's 404), with the
// version's deprecation warnings. Everything else goes to the mux, as do
// the CRDs themselves.
type kubeRouter struct {
	mux http.Handler
	api *kubeAPI
}

func (k *kubeRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead && headAsGet(r.URL.Path) {
		r2 := *r
		r2.Method = http.MethodGet
		k.mux.ServeHTTP(w, &r2)
		return
	}
	ri, ok := parseRequestInfo(r.Method, r.URL.Path)
	if !ok || isCRDs(ri.group, ri.version, ri.resource) || rbac.IsRBAC(ri.group) {
		k.mux.ServeHTTP(w, r)
		return
	}
	switch {
	case r.Method == http.MethodHead:
		r2 := *r
		r2.Method = http.MethodGet
		k.mux.ServeHTTP(w, &r2)
	case ri.verb == "create" && ri.name != "" && ri.subresource == "":
		r2 := *r
		u := *r.URL
		u.Path, u.RawPath = ri.collectionPath(), ""
		r2.URL = &u
		r2.RequestURI = u.RequestURI()
		k.mux.ServeHTTP(w, &r2)
	case (ri.verb == "update" || ri.verb == "patch") && ri.name == "",
		ri.verb == "",
		ri.subresource != "" && (ri.verb == "create" || ri.verb == "delete"):
		k.refuse(w, r, ri)
	default:
		k.mux.ServeHTTP(w, r)
	}
}

// headAsGet reports whether kube-apiserver serves path outside go-restful,
// with handlers that answer HEAD as GET: the OpenAPI documents
// (kube-openapi's handlers) and the health checks. go-restful's routes
// (discovery, /version, the CRD and core resources) answer HEAD 405.
func headAsGet(path string) bool {
	for _, p := range []string{"/openapi/v2", "/openapi/v3", "/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// refuse answers a request the custom resource handler refuses once the
// resource resolves.
func (k *kubeRouter) refuse(w http.ResponseWriter, r *http.Request, ri requestInfo) {
	warnings, err := k.api.crAPI.Refuse(r.Context(), ri.group, ri.version, ri.resource, ri.namespace, ri.name, ri.subresource, ri.verb)
	for _, warning := range warnings {
		w.Header().Add("Warning", httpx.WarningHeader(warning))
	}
	httpx.WriteError(w, r, err)
}

// requestInfo is what upstream's RequestInfoFactory reads of a resource
// request under /apis.
type requestInfo struct {
	group, version, namespace, resource, name, subresource string
	// verb is the request's: create, get, list, update, patch, delete,
	// deletecollection, or "" for any other method.
	verb string
}

// parseRequestInfo reads /apis/<group>/<version>/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]
// as upstream does; ok is false for anything else (discovery, the legacy
// watch paths, other prefixes, empty segments).
func parseRequestInfo(method, path string) (ri requestInfo, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) < 4 || parts[0] != "apis" {
		return ri, false
	}
	for _, p := range parts {
		if p == "" {
			return ri, false
		}
	}
	ri.group, ri.version = parts[1], parts[2]
	rest := parts[3:]
	if rest[0] == "watch" || rest[0] == "proxy" {
		return ri, false
	}
	switch method {
	case http.MethodPost:
		ri.verb = "create"
	case http.MethodGet, http.MethodHead:
		ri.verb = "get"
	case http.MethodPut:
		ri.verb = "update"
	case http.MethodPatch:
		ri.verb = "patch"
	case http.MethodDelete:
		ri.verb = "delete"
	}
	if rest[0] == "namespaces" && len(rest) > 1 {
		ri.namespace = rest[1]
		// namespaces/<ns>/status and /finalize are the namespace's own.
		if len(rest) > 2 && rest[2] != "status" && rest[2] != "finalize" {
			rest = rest[2:]
		}
	}
	ri.resource = rest[0]
	if len(rest) >= 2 {
		ri.name = rest[1]
	}
	if len(rest) >= 3 {
		ri.subresource = rest[2]
	}
	if ri.name == "" {
		switch ri.verb {
		case "get":
			ri.verb = "list"
		case "delete":
			ri.verb = "deletecollection"
		}
	}
	return ri, true
}

// collectionPath is the path of the request's collection.
func (ri requestInfo) collectionPath() string {
	if ri.namespace != "" {
		return "/apis/" + ri.group + "/" + ri.version + "/namespaces/" + ri.namespace + "/" + ri.resource
	}
	return "/apis/" + ri.group + "/" + ri.version + "/" + ri.resource
}
