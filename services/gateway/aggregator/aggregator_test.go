package aggregator

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

func TestParseOverride(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ref     ServiceRef
		addr    string
		wantErr string
	}{
		{in: "wardle/api:443=127.0.0.1:8443", ref: ServiceRef{"wardle", "api", 443}, addr: "127.0.0.1:8443"},
		{in: "ns/svc:8443=[::1]:9000", ref: ServiceRef{"ns", "svc", 8443}, addr: "[::1]:9000"},
		{in: "ns/svc:443", wantErr: "want <namespace>/<name>:<port>=<host>:<port>"},
		{in: "svc:443=h:1", wantErr: "the service must be <namespace>/<name>:<port>"},
		{in: "ns/svc=h:1", wantErr: "the service must be <namespace>/<name>:<port>"},
		{in: "ns/svc:0=h:1", wantErr: `invalid port "0"`},
		{in: "ns/svc:x=h:1", wantErr: `invalid port "x"`},
		{in: "ns/svc:443=h", wantErr: "the address must be <host>:<port>"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			ref, addr, err := ParseOverride(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ref != tc.ref || addr != tc.addr {
				t.Fatalf("= %v %q %v, want %v %q", ref, addr, err, tc.ref, tc.addr)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	o := Overrides{}
	if err := o.Set("wardle/api:443=127.0.0.1:8443"); err != nil {
		t.Fatal(err)
	}
	r := NewResolver(o)
	for _, tc := range []struct {
		ref  ServiceRef
		want string
	}{
		{ServiceRef{"wardle", "api", 443}, "127.0.0.1:8443"},
		{ServiceRef{"wardle", "api", 8443}, "api.wardle.svc:8443"},
		{ServiceRef{"kube-system", "metrics-server", 443}, "metrics-server.kube-system.svc:443"},
	} {
		if got := r.Resolve(tc.ref); got != tc.want {
			t.Errorf("Resolve(%v) = %q, want %q", tc.ref, got, tc.want)
		}
	}
	if got := o.String(); got != "wardle/api:443=127.0.0.1:8443" {
		t.Errorf("String() = %q", got)
	}
}

// backendServer is a TLS extension server recording the requests it gets,
// serving a certificate for api.wardle.svc signed by its own CA.
type backendServer struct {
	*httptest.Server
	pki       *localpki.PKI
	mu        sync.Mutex
	reqs      []*http.Request
	openAPIv2 string // its /openapi/v2 (404 when empty)
}

func newBackend(t *testing.T) *backendServer {
	t.Helper()
	pki, err := localpki.Generate([]string{"api.wardle.svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	b := &backendServer{pki: pki}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.reqs = append(b.reqs, r.Clone(context.Background()))
		b.mu.Unlock()
		switch {
		case r.Header.Get("Upgrade") == "echo":
			// an exec-style upgrade: 101, then the connection echoes
			conn, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer func() { _ = conn.Close() }()
			_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Remote-User-Seen: " + r.Header.Get("X-Remote-User") + "\r\n\r\n")
			_ = rw.Flush()
			_, _ = io.Copy(conn, rw)
		case r.URL.Path == "/openapi/v2":
			b.mu.Lock()
			doc := b.openAPIv2
			b.mu.Unlock()
			if doc == "" {
				http.NotFound(w, r)
				return
			}
			etag := fmt.Sprintf(`"%x"`, sha256.Sum256([]byte(doc)))
			w.Header().Set("Etag", etag)
			if r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, doc)
		case strings.HasSuffix(r.URL.Path, "/redirect"):
			http.Redirect(w, r, "https://elsewhere.example.com/", http.StatusFound)
		case r.URL.Query().Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"Flunder"}}`+"\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case r.URL.Path == "/apis/wardle.example.com/v1alpha1":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"wardle.example.com/v1alpha1","resources":[{"name":"flunders","singularName":"flunder","namespaced":true,"kind":"Flunder","verbs":["get","list"]}]}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
		}
	}))
	// client certificates asked for (not verified): the tests read which
	// one the proxy presented
	b.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	b.StartTLS()
	t.Cleanup(b.Close)
	return b
}

func (b *backendServer) last() *http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reqs[len(b.reqs)-1]
}

func (b *backendServer) caBundle() []byte { return b.pki.CACertPEM }

func wardle(caBundle []byte, available apiregistrationv1.ConditionStatus) *apiregistrationv1.APIService {
	port := int32(443)
	s := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com", ResourceVersion: "1"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "wardle.example.com", Version: "v1alpha1", GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service:  &apiregistrationv1.ServiceReference{Namespace: "wardle", Name: "api", Port: &port},
			CABundle: caBundle,
		},
	}
	if available != "" {
		s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: available}}
	}
	return s
}

// newTestAggregator is an aggregator whose wardle/api Service is b, with
// the APIServices as watched.
func newTestAggregator(t *testing.T, b *backendServer, client registryv1.APIRegistrationServiceClient, services ...*apiregistrationv1.APIService) *Aggregator {
	t.Helper()
	o := Overrides{}
	if err := o.Set("wardle/api:443=" + b.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
	a := New(Config{Client: client, Resolver: NewResolver(o)})
	m := map[string]*apiregistrationv1.APIService{}
	for _, s := range services {
		m[s.Name] = s
	}
	a.replace(m)
	return a
}

func serve(a *Aggregator, r *http.Request, u user.Info) *httptest.ResponseRecorder {
	if u != nil {
		r = r.WithContext(request.WithUser(r.Context(), u))
	}
	rec := httptest.NewRecorder()
	a.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "local", http.StatusTeapot)
	})).ServeHTTP(rec, r)
	return rec
}

// TestProxy: an available APIService's group version reaches its backend
// with the user in the front-proxy headers (those the client sent
// replaced), the query kept; anything else is the local handler's.
func TestProxy(t *testing.T) {
	b := newBackend(t)
	// the backend's certificate, for api.wardle.svc, is verified with
	// caBundle
	s := wardle(b.caBundle(), apiregistrationv1.ConditionTrue)
	a := newTestAggregator(t, b, nil, s)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a", "b"}}}

	for _, tc := range []struct {
		name, path string
		user       user.Info
		wantCode   int
		wantBody   string
	}{
		// kube-apiserver's --aggregator-reject-forwarding-redirect (default true)
		{"redirect", "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/redirect", alice, http.StatusBadGateway, "the backend attempted to redirect this request, which is not permitted"},
		{"proxied", "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders?limit=5", alice, http.StatusOK, `{"path":"/apis/wardle.example.com/v1alpha1/namespaces/default/flunders"}`},
		{"other group", "/apis/apps/v1/deployments", alice, http.StatusTeapot, "local\n"},
		{"other version", "/apis/wardle.example.com/v1beta1/flunders", alice, http.StatusTeapot, "local\n"},
		{"no user", "/apis/wardle.example.com/v1alpha1/flunders", nil, http.StatusInternalServerError, "missing user\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tc.path, nil)
			r.Header.Set("X-Remote-User", "mallory")
			r.Header.Set("X-Remote-Extra-Evil", "1")
			rec := serve(a, r, tc.user)
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Fatalf("= %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
		})
	}
	got := b.last()
	if got.Header.Get("X-Remote-User") != "alice" || strings.Join(got.Header.Values("X-Remote-Group"), ",") != "devs,system:authenticated" ||
		strings.Join(got.Header.Values("X-Remote-Extra-Scopes"), ",") != "a,b" || got.Header.Get("X-Remote-Extra-Evil") != "" {
		t.Errorf("backend headers = %v", got.Header)
	}
	if got.URL.RawQuery != "limit=5" {
		t.Errorf("backend query = %q", got.URL.RawQuery)
	}
}

// TestProxyRefusals: upstream's answers when the backend cannot be used.
func TestProxyRefusals(t *testing.T) {
	b := newBackend(t)
	// a backend whose certificate (httptest's) does not name api.wardle.svc
	misnamed := httptest.NewTLSServer(http.NotFoundHandler())
	defer misnamed.Close()
	misnamedCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: misnamed.Certificate().Raw})
	alice := &user.DefaultInfo{Name: "alice"}
	for _, tc := range []struct {
		name     string
		s        *apiregistrationv1.APIService
		backend  *backendServer
		wantCode int
		wantBody string
	}{
		{"not available", wardle(b.caBundle(), apiregistrationv1.ConditionFalse), b, http.StatusServiceUnavailable, "service unavailable\n"},
		{"no condition", wardle(b.caBundle(), ""), b, http.StatusServiceUnavailable, "service unavailable\n"},
		// the backend's certificate is signed by another CA than caBundle
		{"wrong caBundle", wardle(misnamedCA, apiregistrationv1.ConditionTrue), b, http.StatusServiceUnavailable, "error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown authority\n"},
		// right CA, but the certificate does not name api.wardle.svc
		{"wrong name", wardle(misnamedCA, apiregistrationv1.ConditionTrue), &backendServer{Server: misnamed}, http.StatusServiceUnavailable,
			"error trying to reach service: tls: failed to verify certificate: x509: certificate is valid for example.com, *.example.com, not api.wardle.svc\n"},
		{"bad caBundle", wardle([]byte("not PEM"), apiregistrationv1.ConditionTrue), b, http.StatusInternalServerError, "unable to load root certificates: unable to parse bytes as PEM block\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAggregator(t, tc.backend, nil, tc.s)
			rec := serve(a, httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/flunders", nil), alice)
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Fatalf("= %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

// TestProxyWatchStreams: a watch's first event reaches the client while
// the backend keeps the stream open.
func TestProxyWatchStreams(t *testing.T) {
	b := newBackend(t)
	s := wardle(nil, apiregistrationv1.ConditionTrue)
	s.Spec.InsecureSkipTLSVerify = true // honoured: no caBundle needed
	a := newTestAggregator(t, b, nil, s)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Handler(http.NotFoundHandler()).ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), &user.DefaultInfo{Name: "alice"})))
	}))
	defer front.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/apis/wardle.example.com/v1alpha1/flunders?watch=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, `"ADDED"`) {
		t.Fatalf("first event = %q, %v", line, err)
	}
}

// fakeClient records the status updates of the availability controller.
type fakeClient struct {
	registryv1.APIRegistrationServiceClient
	mu      sync.Mutex
	updates []*apiregistrationv1.APIService
}

func (f *fakeClient) Update(_ context.Context, r *registryv1.RBACServiceUpdateRequest, _ ...grpc.CallOption) (*registryv1.UpdateResponse, error) {
	if r.GetRequest().GetSubresource() != "status" {
		return nil, fmt.Errorf("subresource %q", r.GetRequest().GetSubresource())
	}
	s := &apiregistrationv1.APIService{}
	if err := json.Unmarshal(r.GetRequest().GetObject(), s); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.updates = append(f.updates, s)
	f.mu.Unlock()
	return &registryv1.UpdateResponse{Object: r.GetRequest().GetObject()}, nil
}

// TestAvailability: the controller's conditions, upstream's reasons and
// messages; an unchanged status is not written again.
func TestAvailability(t *testing.T) {
	b := newBackend(t)
	down := httptest.NewUnstartedServer(http.NotFoundHandler())
	downAddr := down.Listener.Addr().String()
	down.Listener.Close()
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer failing.Close()

	for _, tc := range []struct {
		name              string
		addr              string
		status            apiregistrationv1.ConditionStatus
		reason, message   string
		wantErr, wantSkip bool
	}{
		// the check does not verify the backend's certificate, as upstream's
		{"passed", b.Listener.Addr().String(), apiregistrationv1.ConditionTrue, "Passed", "all checks passed", false, false},
		{"refused", downAddr, apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck",
			fmt.Sprintf(`failing or missing response from https://%s/apis/wardle.example.com/v1alpha1: Get "https://%s/apis/wardle.example.com/v1alpha1": dial tcp %s: connect: connection refused`, downAddr, downAddr, downAddr), true, false},
		{"bad status", failing.Listener.Addr().String(), apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck",
			fmt.Sprintf("failing or missing response from https://%[1]s/apis/wardle.example.com/v1alpha1: bad status from https://%[1]s/apis/wardle.example.com/v1alpha1: 403", failing.Listener.Addr().String()), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeClient{}
			o := Overrides{}
			_ = o.Set("wardle/api:443=" + tc.addr)
			a := New(Config{Client: f, Resolver: NewResolver(o)})
			s := wardle(b.caBundle(), "")
			a.replace(map[string]*apiregistrationv1.APIService{s.Name: s})
			err := a.sync(context.Background(), s)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync: %v", err)
			}
			if len(f.updates) != 1 {
				t.Fatalf("%d updates", len(f.updates))
			}
			c := f.updates[0].Status.Conditions
			if len(c) != 1 || c[0].Type != apiregistrationv1.Available || c[0].Status != tc.status || c[0].Reason != tc.reason || c[0].Message != tc.message {
				t.Fatalf("conditions = %+v\nwant %s %s %q", c, tc.status, tc.reason, tc.message)
			}
			// the same result again: no write
			_ = a.sync(context.Background(), f.updates[0])
			if len(f.updates) != 1 {
				t.Fatalf("%d updates after an unchanged check", len(f.updates))
			}
		})
	}
}

// TestDiscoveryMerge: /apis lists the local groups, then the APIServices'
// (legacy and aggregated); /apis/<group> is the aggregator's.
func TestDiscoveryMerge(t *testing.T) {
	b := newBackend(t)
	s := wardle(nil, apiregistrationv1.ConditionTrue)
	s.Spec.InsecureSkipTLSVerify = true
	a := newTestAggregator(t, b, nil, s)
	a.refreshDiscovery(context.Background(), s)
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "as=APIGroupDiscoveryList") {
			w.Header().Set("Content-Type", acceptV2)
			_, _ = io.WriteString(w, `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apiextensions.k8s.io"},"versions":[{"version":"v1","freshness":"Current"}]}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apiextensions.k8s.io","versions":[{"groupVersion":"apiextensions.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apiextensions.k8s.io/v1","version":"v1"}}]}`)
	})
	get := func(path, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		a.Handler(local).ServeHTTP(rec, r)
		return rec
	}
	rec := get("/apis", "application/json")
	want := `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apiextensions.k8s.io","versions":[{"groupVersion":"apiextensions.k8s.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apiextensions.k8s.io/v1","version":"v1"}},{"name":"wardle.example.com","versions":[{"groupVersion":"wardle.example.com/v1alpha1","version":"v1alpha1"}],"preferredVersion":{"groupVersion":"wardle.example.com/v1alpha1","version":"v1alpha1"}}]}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("legacy /apis =\n%s\nwant\n%s", rec.Body.String(), want)
	}
	rec = get("/apis", acceptV2)
	want = `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apiextensions.k8s.io"},"versions":[{"version":"v1","freshness":"Current"}]},{"metadata":{"name":"wardle.example.com"},"versions":[{"version":"v1alpha1","resources":[{"resource":"flunders","responseKind":{"group":"","version":"","kind":"Flunder"},"scope":"Namespaced","singularResource":"flunder","verbs":["get","list"]}],"freshness":"Current"}]}]}` + "\n"
	if rec.Body.String() != want || rec.Header().Get("Etag") == "" {
		t.Errorf("aggregated /apis =\n%s\nwant\n%s (etag %q)", rec.Body.String(), want, rec.Header().Get("Etag"))
	}
	if rec2 := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/apis", nil)
		r.Header.Set("Accept", acceptV2)
		r.Header.Set("If-None-Match", rec.Header().Get("Etag"))
		rr := httptest.NewRecorder()
		a.Handler(local).ServeHTTP(rr, r)
		return rr
	}(); rec2.Code != http.StatusNotModified {
		t.Errorf("If-None-Match = %d, want 304", rec2.Code)
	}
	// protobuf, as a client-go client configured for it asks: the merged
	// lists, encoded
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := apidiscoveryv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pbCodec := protobuf.NewSerializer(scheme, scheme)
	rec = get("/apis", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"+acceptV2)
	var pbList apidiscoveryv2.APIGroupDiscoveryList
	if _, _, err := pbCodec.Decode(rec.Body.Bytes(), nil, &pbList); err != nil || rec.Header().Get("Content-Type") != "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" ||
		len(pbList.Items) != 2 || pbList.Items[1].Name != "wardle.example.com" || len(pbList.Items[1].Versions[0].Resources) != 1 {
		t.Errorf("aggregated /apis in protobuf: %v %q %+v", err, rec.Header().Get("Content-Type"), pbList.Items)
	}
	rec = get("/apis", "application/vnd.kubernetes.protobuf, */*")
	var pbGroups metav1.APIGroupList
	if _, _, err := pbCodec.Decode(rec.Body.Bytes(), nil, &pbGroups); err != nil || rec.Header().Get("Content-Type") != "application/vnd.kubernetes.protobuf" ||
		len(pbGroups.Groups) != 2 || pbGroups.Groups[1].Name != "wardle.example.com" {
		t.Errorf("legacy /apis in protobuf: %v %q %+v", err, rec.Header().Get("Content-Type"), pbGroups.Groups)
	}
	rec = get("/apis/wardle.example.com", "application/json")
	want = `{"kind":"APIGroup","apiVersion":"v1","name":"wardle.example.com","versions":[{"groupVersion":"wardle.example.com/v1alpha1","version":"v1alpha1"}],"preferredVersion":{"groupVersion":"wardle.example.com/v1alpha1","version":"v1alpha1"}}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("/apis/wardle.example.com = %s", rec.Body.String())
	}
	// unavailable: listed, its aggregated entry empty and Stale
	s2 := s.DeepCopy()
	s2.Status.Conditions[0].Status = apiregistrationv1.ConditionFalse
	a.change(s2, false)
	rec = get("/apis", acceptV2)
	if !strings.Contains(rec.Body.String(), `{"metadata":{"name":"wardle.example.com"},"versions":[{"version":"v1alpha1","freshness":"Stale"}]}`) {
		t.Errorf("aggregated /apis, unavailable = %s", rec.Body.String())
	}
}

// TestOpenAPIv3: the index lists the local documents and the available
// APIService's, as its backend names it; the document is the backend's.
func TestOpenAPIv3(t *testing.T) {
	b := newBackend(t)
	b.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/openapi/v3":
			_, _ = io.WriteString(w, `{"paths":{"apis/wardle.example.com/v1alpha1":{"serverRelativeURL":"/openapi/v3/apis/wardle.example.com/v1alpha1?hash=ABC"},"api":{"serverRelativeURL":"/openapi/v3/api?hash=X"}}}`)
		case "/openapi/v3/apis/wardle.example.com/v1alpha1":
			if r.Header.Get("X-Remote-User") != "system:kube-aggregator" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			w.Header().Set("Etag", `"ABC"`)
			_, _ = fmt.Fprintf(w, `{"openapi":"3.0.0","hash":%q}`, r.URL.Query().Get("hash"))
		default:
			http.NotFound(w, r)
		}
	})
	s := wardle(b.caBundle(), apiregistrationv1.ConditionTrue)
	a := newTestAggregator(t, b, nil, s)
	a.refreshOpenAPI(context.Background(), s)
	// the local index as the gateway serves it: with validators, and
	// answering the conditional headers
	modified := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", `"L"`)
		http.ServeContent(w, r, "", modified, strings.NewReader(`{"paths":{"apis/apiextensions.k8s.io/v1":{"serverRelativeURL":"/openapi/v3/apis/apiextensions.k8s.io/v1?hash=L"}}}`))
	})
	get := func(path string, header ...string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		a.Handler(local).ServeHTTP(rec, r)
		return rec
	}
	want := `{"paths":{"apis/apiextensions.k8s.io/v1":{"serverRelativeURL":"/openapi/v3/apis/apiextensions.k8s.io/v1?hash=L"},"apis/wardle.example.com/v1alpha1":{"serverRelativeURL":"/openapi/v3/apis/wardle.example.com/v1alpha1?hash=ABC"}}}`
	// the client's conditions (kubectl's HTTP cache sends the local
	// index's validators it saw before the APIService) are not the local
	// index's: the merged index is served in full, as kube-apiserver
	// v1.33's aggregator serves it (compared with bin/kube-apiserver):
	// modified now, no ETag, the type net/http sniffs
	for _, header := range [][]string{nil, {"If-None-Match", `"L"`}, {"If-Modified-Since", modified.Format(http.TimeFormat)}} {
		before := time.Now().Truncate(time.Second)
		rec := get("/openapi/v3", header...)
		lm, err := http.ParseTime(rec.Header().Get("Last-Modified"))
		if rec.Code != http.StatusOK || rec.Body.String() != want || rec.Header().Get("Etag") != "" || err != nil || lm.Before(before) ||
			rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || rec.Header().Get("Accept-Ranges") != "bytes" {
			t.Errorf("index %q = %d %s %v\nwant 200 %s", header, rec.Code, rec.Body.String(), rec.Header(), want)
		}
	}
	// If-Match (there is no ETag to match), If-Modified-Since later than
	// now, and ranges, as ServeContent answers them
	if rec := get("/openapi/v3", "If-Match", `"L"`); rec.Code != http.StatusPreconditionFailed || rec.Body.Len() != 0 {
		t.Errorf("index, If-Match = %d %s", rec.Code, rec.Body.String())
	}
	if rec := get("/openapi/v3", "If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("index, modified since an hour from now = %d %s", rec.Code, rec.Body.String())
	}
	if rec := get("/openapi/v3", "Range", "bytes=0-8"); rec.Code != http.StatusPartialContent || rec.Body.String() != want[:9] || rec.Header().Get("Content-Range") != fmt.Sprintf("bytes 0-8/%d", len(want)) {
		t.Errorf("index, range = %d %q %v", rec.Code, rec.Body.String(), rec.Header())
	}
	rec := get("/openapi/v3/apis/wardle.example.com/v1alpha1?hash=ABC")
	if rec.Code != http.StatusOK || rec.Body.String() != `{"openapi":"3.0.0","hash":"ABC"}` || rec.Header().Get("Etag") != `"ABC"` {
		t.Errorf("document = %d %s %v", rec.Code, rec.Body.String(), rec.Header())
	}
}
