// Package aggregator is the gateway's aggregation layer, kube-aggregator's
// part of kube-apiserver: it follows the registry's APIServices
// (apiregistration.k8s.io/v1), proxies the group versions of those backed
// by a Service to that Service with the front-proxy client certificate
// and the user in X-Remote-User/X-Remote-Group/X-Remote-Extra-* headers
// (the request authenticated and authorized by the gateway's edge
// first), checks each backend's availability and writes the APIService's
// Available condition (controller.go), and merges the backends'
// discovery into /apis (discovery.go) and their OpenAPI v3 documents into
// /openapi/v3 (openapi.go).
package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	apiserverproxyutil "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/streaming/pkg/httpstream"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Config is what an Aggregator needs.
type Config struct {
	// Client serves the APIServices (the registry).
	Client registryv1.APIRegistrationServiceClient
	// Resolver gives a Service's address.
	Resolver *Resolver
	// ProxyClientCert and ProxyClientKey are the PEM client certificate
	// and key presented to backends; none when empty. ProxyClientCertKey,
	// when set, gives them instead and is followed: the files of
	// --proxy-client-cert-file and --proxy-client-key-file, reloaded when
	// they change, as kube-apiserver's (the transports are rebuilt).
	ProxyClientCert, ProxyClientKey []byte
	ProxyClientCertKey              *dynamiccertificates.DynamicCertKeyPairContent
	// ProbeInterval is how often an APIService's backend is checked
	// (default 30s; a failed check is retried sooner, with backoff).
	ProbeInterval time.Duration
	// Dial connects to backends, for the proxy and the availability
	// checks: kube-apiserver's egress selector's cluster selection (nil:
	// directly).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Log is the logger (slog.Default when nil).
	Log *slog.Logger
}

// Aggregator serves the APIServices' group versions.
type Aggregator struct {
	cfg   Config
	log   *slog.Logger
	dial  *transport.DialHolder // cfg.Dial, one holder so that transports are cached by it; nil: direct
	state atomic.Pointer[state]

	mu       sync.Mutex
	services map[string]*apiregistrationv1.APIService // by name, as watched
	certGen  uint64                                   // bumped when the proxy client certificate changes
	synced   chan struct{}
	kick     chan string // an APIService to check now

	discMu    sync.Mutex
	discovery map[string]*versionDiscovery // by APIService name: the last fetched
	openAPIv3 map[string]string            // by APIService name: the backend's serverRelativeURL
	openAPIv2 map[string]*openAPIv2Spec    // by APIService name: the backend's document, filtered

	v2Mu     sync.Mutex
	v2Merged *mergedV2 // the last merged /openapi/v2
}

// state is what the proxy reads per request, rebuilt on every change.
type state struct {
	// byGroupVersion are the remote APIServices, by "<group>/<version>".
	byGroupVersion map[string]*backend
	// groups are the remote APIServices' groups.
	groups map[string]bool
	// sorted are every APIService, sorted as upstream's discovery.
	sorted []*apiregistrationv1.APIService
}

// backend is one remote APIService, as the proxy uses it.
type backend struct {
	apiService   *apiregistrationv1.APIService
	ref          ServiceRef
	available    bool
	roundTripper http.RoundTripper
	transportErr error
	certGen      uint64 // the proxy client certificate it was built with
}

// New returns an Aggregator for cfg; Run follows the APIServices.
func New(cfg Config) *Aggregator {
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 30 * time.Second
	}
	if cfg.Resolver == nil {
		cfg.Resolver = NewResolver(nil)
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	a := &Aggregator{cfg: cfg, log: log.With("component", "aggregator"), services: map[string]*apiregistrationv1.APIService{},
		synced: make(chan struct{}), kick: make(chan string, 64), discovery: map[string]*versionDiscovery{}, openAPIv3: map[string]string{}, openAPIv2: map[string]*openAPIv2Spec{}}
	if cfg.Dial != nil {
		a.dial = &transport.DialHolder{Dial: cfg.Dial}
	}
	a.state.Store(&state{byGroupVersion: map[string]*backend{}, groups: map[string]bool{}})
	if cfg.ProxyClientCertKey != nil {
		cfg.ProxyClientCertKey.AddListener(a)
	}
	return a
}

// Synced reports whether the APIServices have been listed.
func (a *Aggregator) Synced() bool {
	select {
	case <-a.synced:
		return true
	default:
		return false
	}
}

// Run follows the APIServices and runs the availability checks (and
// follows the proxy client certificate's files) until ctx ends.
func (a *Aggregator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if c := a.cfg.ProxyClientCertKey; c != nil {
		wg.Go(func() { c.Run(ctx, 1) })
	}
	wg.Go(func() { a.follow(ctx) })
	wg.Go(func() { a.runController(ctx) })
	wg.Wait()
}

func (a *Aggregator) follow(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := a.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		a.log.Debug("APIService watch ended; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (a *Aggregator) watch(ctx context.Context) error {
	stream, err := a.cfg.Client.Watch(ctx, &registryv1.RBACServiceWatchRequest{
		Target:  &registryv1.RBACTarget{Resource: "apiservices"},
		Request: &registryv1.WatchRequest{SendInitialEvents: true, AllowBookmarks: true},
	})
	if err != nil {
		return fmt.Errorf("watch apiservices: %w", err)
	}
	initial := map[string]*apiregistrationv1.APIService{}
	inInitial := true
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch apiservices: %w", err)
		}
		if ev.GetType() == commonv1.EventType_EVENT_TYPE_BOOKMARK {
			if inInitial {
				inInitial = false
				a.replace(initial)
			}
			continue
		}
		obj := &apiregistrationv1.APIService{}
		if err := json.Unmarshal(ev.GetObject(), obj); err != nil {
			a.log.Warn("APIService watch: undecodable object", "err", err)
			continue
		}
		deleted := ev.GetType() == commonv1.EventType_EVENT_TYPE_DELETED
		if inInitial {
			if !deleted {
				initial[obj.Name] = obj
			}
			continue
		}
		a.change(obj, deleted)
	}
}

func (a *Aggregator) replace(objs map[string]*apiregistrationv1.APIService) {
	a.mu.Lock()
	a.services = objs
	a.publishLocked()
	a.mu.Unlock()
	select {
	case <-a.synced:
	default:
		close(a.synced)
	}
	for name := range objs {
		a.check(name)
	}
}

func (a *Aggregator) change(obj *apiregistrationv1.APIService, deleted bool) {
	a.mu.Lock()
	old := a.services[obj.Name]
	m := make(map[string]*apiregistrationv1.APIService, len(a.services)+1)
	for k, v := range a.services {
		m[k] = v
	}
	if deleted {
		delete(m, obj.Name)
	} else {
		m[obj.Name] = obj
	}
	a.services = m
	a.publishLocked()
	a.mu.Unlock()
	if deleted {
		a.discMu.Lock()
		delete(a.discovery, obj.Name)
		delete(a.openAPIv3, obj.Name)
		delete(a.openAPIv2, obj.Name)
		a.discMu.Unlock()
		return
	}
	// a spec change is checked at once (a status change is the
	// controller's own write, or another replica's)
	if old == nil || old.Generation != obj.Generation || !equalSpec(old, obj) {
		a.check(obj.Name)
	}
}

func equalSpec(a, b *apiregistrationv1.APIService) bool {
	x, _ := json.Marshal(a.Spec)
	y, _ := json.Marshal(b.Spec)
	return string(x) == string(y)
}

// check asks the controller to check an APIService now.
func (a *Aggregator) check(name string) {
	select {
	case a.kick <- name:
	default:
	}
}

// get returns the APIService as last watched.
func (a *Aggregator) get(name string) *apiregistrationv1.APIService {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.services[name]
}

// Enqueue is told that the proxy client certificate changed: every
// backend's transport is built again with it, as kube-apiserver's
// APIService registration controller does.
func (a *Aggregator) Enqueue() {
	a.mu.Lock()
	a.certGen++
	a.publishLocked()
	a.mu.Unlock()
	a.log.Info("proxy client certificate changed: the APIServices' transports are rebuilt")
}

// proxyCertKey is the client certificate and key presented to backends.
func (a *Aggregator) proxyCertKey() (cert, key []byte) {
	if c := a.cfg.ProxyClientCertKey; c != nil {
		return c.CurrentCertKeyContent()
	}
	return a.cfg.ProxyClientCert, a.cfg.ProxyClientKey
}

func (a *Aggregator) publishLocked() {
	list := make([]*apiregistrationv1.APIService, 0, len(a.services))
	for _, s := range a.services {
		list = append(list, s)
	}
	st := &state{byGroupVersion: map[string]*backend{}, groups: map[string]bool{}}
	for _, group := range apiregistrationv1helper.SortedByGroupAndVersion(list) {
		st.sorted = append(st.sorted, group...)
	}
	old := a.state.Load()
	for _, s := range list {
		if s.Spec.Service == nil {
			continue
		}
		gv := s.Spec.Group + "/" + s.Spec.Version
		b := &backend{
			certGen:    a.certGen,
			apiService: s,
			ref:        serviceRef(s),
			available:  apiregistrationv1helper.IsAPIServiceConditionTrue(s, apiregistrationv1.Available),
		}
		if prev, ok := old.byGroupVersion[gv]; ok && prev.apiService.ResourceVersion != "" && prev.certGen == a.certGen && equalSpec(prev.apiService, s) {
			b.roundTripper, b.transportErr = prev.roundTripper, prev.transportErr
		} else {
			b.roundTripper, b.transportErr = a.newTransport(s)
			if b.transportErr != nil {
				a.log.Warn("APIService transport", "apiservice", s.Name, "err", b.transportErr)
			}
		}
		st.byGroupVersion[gv] = b
		st.groups[s.Spec.Group] = true
	}
	a.state.Store(st)
}

func serviceRef(s *apiregistrationv1.APIService) ServiceRef {
	port := int32(443)
	if s.Spec.Service.Port != nil {
		port = *s.Spec.Service.Port
	}
	return ServiceRef{Namespace: s.Spec.Service.Namespace, Name: s.Spec.Service.Name, Port: port}
}

// newTransport is the proxy's transport to an APIService's backend, as
// kube-aggregator's: the backend's certificate verified with caBundle
// against <name>.<namespace>.svc (or not at all with
// insecureSkipTLSVerify), the proxy client certificate presented.
func (a *Aggregator) newTransport(s *apiregistrationv1.APIService) (http.RoundTripper, error) {
	ref := serviceRef(s)
	cert, key := a.proxyCertKey()
	return transport.New(&transport.Config{DialHolder: a.dial, TLS: transport.TLSConfig{
		Insecure:   s.Spec.InsecureSkipTLSVerify,
		ServerName: ServerName(ref),
		CertData:   cert,
		KeyData:    key,
		CAData:     s.Spec.CABundle,
	}})
}

// Handler serves the APIServices' group versions and the merged /apis,
// and passes everything else to next. It runs behind the edge, which has
// authenticated and authorized the request.
func (a *Aggregator) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := a.state.Load()
		if len(st.sorted) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		path := strings.TrimSuffix(httpx.RequestURL(r).Path, "/")
		switch {
		case path == "/apis":
			a.serveAPIs(w, r, next, st)
			return
		case path == "/openapi/v2" && r.Method == http.MethodGet:
			a.serveOpenAPIv2(w, r, next, st)
			return
		case path == "/openapi/v3":
			a.serveOpenAPIIndex(w, r, next, st)
			return
		case strings.HasPrefix(path, "/openapi/v3/apis/"):
			if b, ok := st.byGroupVersion[strings.TrimPrefix(path, "/openapi/v3/apis/")]; ok && r.Method == http.MethodGet {
				a.serveOpenAPIDocument(w, r, b)
				return
			}
		}
		rest, ok := strings.CutPrefix(path, "/apis/")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) == 1 {
			if st.groups[parts[0]] {
				a.serveGroup(w, r, parts[0], st)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		b, ok := st.byGroupVersion[parts[0]+"/"+parts[1]]
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		a.proxy(w, r, b)
	})
}

// proxy passes a request to an APIService's backend, as kube-aggregator's
// proxy handler: 503 "service unavailable" while the APIService is not
// Available, the user's identity in the front-proxy headers, upgrades
// and streams (watches) passed through.
func (a *Aggregator) proxy(w http.ResponseWriter, r *http.Request, b *backend) {
	if !b.available {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	a.forward(w, r, b)
}

// forward sends a request to the backend as the user of its context.
func (a *Aggregator) forward(w http.ResponseWriter, r *http.Request, b *backend) {
	if b.transportErr != nil {
		http.Error(w, b.transportErr.Error(), http.StatusInternalServerError)
		return
	}
	u, ok := request.UserFrom(r.Context())
	if !ok {
		http.Error(w, "missing user", http.StatusInternalServerError)
		return
	}
	in := httpx.RequestURL(r)
	location := &url.URL{Scheme: "https", Host: a.cfg.Resolver.Resolve(b.ref), Path: in.Path, RawQuery: in.Query().Encode()}
	newReq, cancel := apiserverproxyutil.NewRequestForProxy(location, r)
	defer cancel()
	httpx.StripInternalHeaders(newReq.Header)
	upgrade := httpstream.IsUpgradeRequest(r)
	// RemoteRequestHeaderUID is off in v1.33: no X-Remote-Uid
	rt := transport.NewAuthProxyRoundTripper(u.GetName(), "", u.GetGroups(), u.GetExtra(), b.roundTripper)
	if upgrade {
		// the upgrade dials directly, without rt
		transport.SetAuthProxyHeaders(newReq, u.GetName(), "", u.GetGroups(), u.GetExtra())
	}
	h := proxy.NewUpgradeAwareHandler(location, rt, true, upgrade, &responder{w: w})
	// kube-apiserver's --aggregator-reject-forwarding-redirect, on by
	// default: a backend's redirect is not passed on (502)
	h.RejectForwardingRedirects = true
	h.ServeHTTP(w, newReq)
}

// responder answers a proxy error as kube-aggregator's: 503 with the
// error's text.
type responder struct{ w http.ResponseWriter }

func (r *responder) Object(statusCode int, obj runtime.Object) {
	b, err := json.Marshal(obj)
	if err != nil {
		http.Error(r.w, err.Error(), http.StatusInternalServerError)
		return
	}
	r.w.Header().Set("Content-Type", "application/json")
	r.w.WriteHeader(statusCode)
	_, _ = r.w.Write(b)
}

func (r *responder) Error(_ http.ResponseWriter, _ *http.Request, err error) {
	http.Error(r.w, err.Error(), http.StatusServiceUnavailable)
}
