package cr

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// resource is one served version of a custom resource, resolved from the
// CRD cache for a request.
type resource struct {
	crd        *apiextensionsv1.CustomResourceDefinition
	group      string
	version    string // the request's version
	plural     string
	kind       string
	listKind   string
	namespaced bool
	// storageVersion is the version objects are stored at.
	storageVersion string
	// hasStatus is set when the request version has a status subresource.
	hasStatus bool
	// scale is the request version's scale subresource (nil: none).
	scale *apiextensionsv1.CustomResourceSubresourceScale
	// selectableFields are the version's selectable field paths ("spec.color").
	selectableFields []string
	// terminating is set while the CRD is being deleted.
	terminating bool
	// warnings go out with every response (deprecated versions).
	warnings []string
}

func (r *resource) apiVersion() string { return r.group + "/" + r.version }

func (r *resource) storageAPIVersion() string { return r.group + "/" + r.storageVersion }

func (r *resource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.group, Resource: r.plural}
}

func (r *resource) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.group, Kind: r.kind}
}

func (r *resource) crdRef() *commonv1.CRDRef {
	return &commonv1.CRDRef{Name: r.crd.Name, Uid: string(r.crd.UID), Generation: r.crd.Generation}
}

// webhookConversion reports whether versions convert through the converter
// service (else None: an apiVersion rewrite done in-process).
func (r *resource) webhookConversion() bool {
	c := r.crd.Spec.Conversion
	return c != nil && c.Strategy == apiextensionsv1.WebhookConverter
}

// collectionKey is the storage prefix of the collection in namespace ("":
// every namespace, or the cluster-scoped collection).
func (r *resource) collectionKey(namespace string) string {
	k := "/registry/" + r.group + "/" + r.plural + "/"
	if r.namespaced && namespace != "" {
		k += namespace + "/"
	}
	return k
}

// objectKey is the storage key of one object.
func (r *resource) objectKey(namespace, name string) string {
	if r.namespaced {
		return "/registry/" + r.group + "/" + r.plural + "/" + namespace + "/" + name
	}
	return "/registry/" + r.group + "/" + r.plural + "/" + name
}

// verbScope says whether a request may name no namespace for a namespaced
// resource (list and watch across all namespaces).
type verbScope int

const (
	scopeObject     verbScope = iota // get, create, update, patch, delete, deletecollection
	scopeCollection                  // list, watch
)

// resolve finds the served resource group/version/plural for a request in
// namespace. Whatever kube-apiserver would not route to a CRD's handler —
// unknown resource, version not served, CRD not established, scope mismatch
// — is 404 "the server could not find the requested resource".
func (a *Server) resolve(ctx context.Context, group, ver, plural, namespace string, scope verbScope) (*resource, error) {
	crd, ok := a.crds.ByResource(group, plural)
	if !ok || !servable(crd, ver) {
		crd, ok = a.catchUp(ctx, group, plural, ver)
		if !ok {
			if c, found := a.crds.ByResource(group, plural); found && unresolvable(c, ver) {
				if err := checkScope(c, namespace, scope); err != nil {
					return nil, err
				}
				return nil, errResolvingResource()
			}
			return nil, httpx.ErrNotFound()
		}
	}
	if err := checkScope(crd, namespace, scope); err != nil {
		return nil, err
	}
	return newResource(crd, ver)
}

// checkScope is upstream's 404 for a request whose namespace does not fit
// the CRD's scope.
func checkScope(crd *apiextensionsv1.CustomResourceDefinition, namespace string, scope verbScope) error {
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	if !namespaced && namespace != "" {
		return httpx.ErrNotFound()
	}
	if namespaced && namespace == "" && scope != scopeCollection {
		return httpx.ErrNotFound()
	}
	return nil
}

// unresolvable reports whether upstream's CRD handler takes requests for
// version ver of crd (the version served, the names accepted) but cannot
// build what serves them: a conversion webhook whose caBundle holds no PEM
// certificate (the CRD stays Established False "InvalidCABundle").
func unresolvable(crd *apiextensionsv1.CustomResourceDefinition, ver string) bool {
	if !apihelpers.HasServedCRDVersion(crd, ver) || !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) {
		return false
	}
	cv := crd.Spec.Conversion
	if cv == nil || cv.Strategy != apiextensionsv1.WebhookConverter || cv.Webhook == nil || cv.Webhook.ClientConfig == nil {
		return false
	}
	ca := cv.Webhook.ClientConfig.CABundle
	return len(ca) > 0 && !x509.NewCertPool().AppendCertsFromPEM(ca)
}

// errResolvingResource is upstream's 500 for a resource its CRD handler
// cannot serve.
func errResolvingResource() error {
	return apierrors.NewInternalError(errors.New("error resolving resource"))
}

// servable reports whether crd serves version ver: established and the
// version served.
func servable(crd *apiextensionsv1.CustomResourceDefinition, ver string) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) && apihelpers.HasServedCRDVersion(crd, ver)
}

// catchUp handles a CRD the cache does not serve yet: a client that saw the
// CRD established (from the registry, possibly through another gateway) may
// ask before this gateway's watch delivered it. The registry is asked once
// and, when it serves the resource, the request waits for the watch to
// deliver that generation (bounded by CRDWait). Unknown resources cost one
// registry read and no wait.
func (a *Server) catchUp(ctx context.Context, group, plural, ver string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	if a.registry == nil {
		return nil, false
	}
	name := plural + "." + group
	resp, err := a.registry.Get(ctx, &registryv1.GetRequest{Name: name})
	if err != nil {
		return nil, false
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(resp.GetObject(), crd); err != nil {
		return nil, false
	}
	if crd.Spec.Group != group || crd.Spec.Names.Plural != plural || !servable(crd, ver) {
		return nil, false
	}
	rv, _ := strconv.ParseInt(crd.ResourceVersion, 10, 64)
	wctx, cancel := context.WithTimeout(ctx, a.crdWait)
	defer cancel()
	var got *apiextensionsv1.CustomResourceDefinition
	err = a.crdEvents.wait(wctx, func() bool {
		c, ok := a.crds.ByResource(group, plural)
		if ok && servable(c, ver) {
			got = c
			return true
		}
		// The cache has seen the registry's state and still does not
		// serve it: the CRD changed in between; answer from the cache.
		return a.crds.ResourceVersion() >= rv && rv > 0
	})
	if err != nil {
		a.log.WarnContext(ctx, "CRD cache behind the registry", "crd", name, "err", err)
		return nil, false
	}
	return got, got != nil
}

// crdEvents lets requests wait for the CRD cache to change.
type crdEvents struct {
	mu      sync.Mutex
	changed chan struct{}
}

func newCRDEvents() *crdEvents { return &crdEvents{changed: make(chan struct{})} }

// notify wakes every waiter (called from the cache's OnChange).
func (e *crdEvents) notify() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// wait blocks until cond holds (checked now and after every change) or ctx ends.
func (e *crdEvents) wait(ctx context.Context, cond func() bool) error {
	for {
		e.mu.Lock()
		ch := e.changed
		e.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func newResource(crd *apiextensionsv1.CustomResourceDefinition, ver string) (*resource, error) {
	r := &resource{
		crd:         crd,
		group:       crd.Spec.Group,
		version:     ver,
		plural:      crd.Spec.Names.Plural,
		kind:        crd.Spec.Names.Kind,
		listKind:    crd.Spec.Names.ListKind,
		namespaced:  crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		terminating: !crd.DeletionTimestamp.IsZero() || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating),
	}
	if r.listKind == "" {
		r.listKind = r.kind + "List"
	}
	sv, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewInternalError(fmt.Errorf("CRD %s: %w", crd.Name, err)))
	}
	r.storageVersion = sv
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == ver {
			v = &crd.Spec.Versions[i]
		}
	}
	if v == nil {
		return nil, httpx.ErrNotFound()
	}
	if sub, err := apihelpers.GetSubresourcesForVersion(crd, ver); err == nil && sub != nil {
		r.hasStatus = sub.Status != nil
		r.scale = sub.Scale
	}
	for _, f := range v.SelectableFields {
		r.selectableFields = append(r.selectableFields, strings.TrimPrefix(f.JSONPath, "."))
	}
	if v.Deprecated {
		if v.DeprecationWarning != nil {
			r.warnings = append(r.warnings, *v.DeprecationWarning)
		} else {
			r.warnings = append(r.warnings, deprecationWarning(ver, crd.Spec))
		}
	}
	return r, nil
}

// deprecationWarning is kube-apiserver's default warning for a deprecated
// CRD version: it names the newest served, non-deprecated version newer
// than it.
func deprecationWarning(deprecated string, spec apiextensionsv1.CustomResourceDefinitionSpec) string {
	msg := fmt.Sprintf("%s/%s %s is deprecated", spec.Group, deprecated, spec.Names.Kind)
	var newer []string
	for _, v := range spec.Versions {
		if v.Served && !v.Deprecated && version.CompareKubeAwareVersionStrings(deprecated, v.Name) < 0 {
			newer = append(newer, v.Name)
		}
	}
	if len(newer) == 0 {
		return msg
	}
	sort.Slice(newer, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(newer[i], newer[j]) > 0 })
	return msg + fmt.Sprintf("; use %s/%s %s", spec.Group, newer[0], spec.Names.Kind)
}

// fieldAllowed reports whether a custom resource of r can be selected by f.
func (r *resource) fieldAllowed(f string) bool {
	switch f {
	case "metadata.name":
		return true
	case "metadata.namespace":
		return r.namespaced
	}
	for _, s := range r.selectableFields {
		if s == f {
			return true
		}
	}
	return false
}

// Kind resolves a request for one object of group/version/plural in
// namespace and returns the resource's kind (a path that serves nothing
// is its 404): what a protobuf body's 400 names.
func (a *Server) Kind(ctx context.Context, group, version, plural, namespace string) (string, error) {
	r, err := a.resolve(ctx, group, version, plural, namespace, scopeObject)
	if err != nil {
		return "", err
	}
	return r.kind, nil
}

// Refuse is the custom resource handler's answer to a request it refuses
// once the resource resolves (the root's router reads which): a
// subresource the version does not have is 404, an update or patch of a
// collection 400 "name must be provided", any other verb 405. warnings
// are the version's deprecation warnings, sent with the answer once the
// resource resolved.
func (a *Server) Refuse(ctx context.Context, group, version, plural, namespace, name, sub, verb string) (warnings []string, err error) {
	res, err := a.resolve(ctx, group, version, plural, namespace, scopeObject)
	if err != nil {
		return nil, err
	}
	if err := checkSubresource(res, sub, name); err != nil {
		return res.warnings, err
	}
	if name == "" && (verb == "update" || verb == "patch") {
		return res.warnings, apierrors.NewBadRequest("name must be provided")
	}
	return res.warnings, apierrors.NewMethodNotSupported(res.groupResource(), verb)
}

// Scope resolves group/version/plural in namespace and returns the
// resource's group and plural and whether it is namespaced (a path that
// serves nothing is its 404): what admission in front of the verbs reads.
func (a *Server) Scope(ctx context.Context, group, version, plural, namespace string) (gr schema.GroupResource, namespaced bool, err error) {
	r, err := a.resolve(ctx, group, version, plural, namespace, scopeObject)
	if err != nil {
		return schema.GroupResource{}, false, err
	}
	return r.groupResource(), r.namespaced, nil
}
