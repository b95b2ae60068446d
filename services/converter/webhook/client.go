package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "sigs.k8s.io/json"

	"github.com/crdplane/crdplane/pkg/egress"
)

// target is how one generation of a CRD's conversion webhook is called.
type target struct {
	uid        string
	generation int64
	crdName    string
	kind       string
	// versions holds the CRD's versions.
	versions map[string]bool
	// url is the endpoint, with upstream's ?timeout= parameter.
	url string
	// reviewVersion is the ConversionReview version sent ("v1" or
	// "v1beta1"), or "" when the CRD names none this server supports.
	reviewVersion string
	client        *http.Client
	clientKey     string // in targets.clients
	// err is set when the clientConfig cannot be used (bad URL or CA).
	err error
}

// gvk is how upstream's messages name the objects of a conversion.
func (t *target) gvk(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		gv = schema.GroupVersion{Version: apiVersion}
	}
	return gv.WithKind(t.kind).String()
}

// targets caches the targets of the CRDs seen (by uid, latest generation)
// and the HTTP clients they share (by TLS and dial settings, so a CRD
// update that does not touch the clientConfig keeps its connections).
type targets struct {
	cfg Config

	mu      sync.Mutex
	byUID   map[string]*target
	clients map[string]*webhookClient
}

// webhookClient is an HTTP client and its transport (to close its idle
// connections: the tracing wrapper does not pass that on).
type webhookClient struct {
	client    *http.Client
	transport *http.Transport
}

func newTargets(cfg Config) *targets {
	return &targets{cfg: cfg, byUID: map[string]*target{}, clients: map[string]*webhookClient{}}
}

// get returns the target of crd's current generation.
func (ts *targets) get(crd *apiextensionsv1.CustomResourceDefinition) *target {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.byUID[string(crd.UID)]; ok && t.generation == crd.Generation {
		return t
	}
	old := ts.byUID[string(crd.UID)]
	t := ts.build(crd)
	ts.byUID[string(crd.UID)] = t
	if old != nil {
		ts.dropUnusedLocked(old.clientKey)
	}
	return t
}

// forget drops the target of a deleted CRD.
func (ts *targets) forget(uid string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if old, ok := ts.byUID[uid]; ok {
		delete(ts.byUID, uid)
		ts.dropUnusedLocked(old.clientKey)
	}
}

// dropUnusedLocked closes and forgets the client of key when no target
// uses it any more (its in-flight requests finish). ts.mu is held.
func (ts *targets) dropUnusedLocked(key string) {
	c, ok := ts.clients[key]
	if !ok {
		return
	}
	for _, t := range ts.byUID {
		if t.clientKey == key {
			return
		}
	}
	delete(ts.clients, key)
	c.transport.CloseIdleConnections()
}

// closeIdle closes the idle connections of every client.
func (ts *targets) closeIdle() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, c := range ts.clients {
		c.transport.CloseIdleConnections()
	}
}

func (ts *targets) build(crd *apiextensionsv1.CustomResourceDefinition) *target {
	t := &target{
		uid:        string(crd.UID),
		generation: crd.Generation,
		crdName:    crd.Name,
		kind:       crd.Spec.Names.Kind,
		versions:   map[string]bool{},
	}
	for _, v := range crd.Spec.Versions {
		t.versions[crd.Spec.Group+"/"+v.Name] = true
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		t.err = errors.New("the CRD has no conversion webhook client configuration")
		return t
	}
	for _, v := range conv.Webhook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			t.reviewVersion = v
			break
		}
	}
	cc := conv.Webhook.ClientConfig
	var (
		u        *url.URL
		dialFrom string // the service's host:port, dialled at dialTo instead
		dialTo   string
		// The egress selection, as upstream's webhook clients
		// (NewDefaultAuthenticationInfoResolverWrapper): controlplane for a
		// URL, cluster for a service.
		selection = egress.ControlPlane
	)
	switch {
	case cc.URL != nil:
		var err error
		if u, err = url.Parse(*cc.URL); err != nil {
			t.err = fmt.Errorf("invalid webhook URL: %w", err)
			return t
		}
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil && *cc.Service.Port != 0 {
			port = *cc.Service.Port
		}
		path := "/"
		if cc.Service.Path != nil && *cc.Service.Path != "" {
			path = *cc.Service.Path
		}
		dialFrom = net.JoinHostPort(cc.Service.Name+"."+cc.Service.Namespace+".svc", strconv.Itoa(int(port)))
		dialTo = ts.cfg.serviceAddr(cc.Service.Namespace, cc.Service.Name, port)
		u = &url.URL{Scheme: "https", Host: dialFrom, Path: path}
		selection = egress.Cluster
	default:
		t.err = errors.New("the conversion webhook client configuration has neither url nor service")
		return t
	}
	q := u.Query()
	q.Set("timeout", ts.cfg.Timeout.String())
	u.RawQuery = q.Encode()
	t.url = u.String()

	key, client, err := ts.client(cc.CABundle, dialFrom, dialTo, selection)
	if err != nil {
		t.err = err
		return t
	}
	t.client, t.clientKey = client, key
	return t
}

// client returns the shared HTTP client for a CA bundle (system roots when
// empty), a dial redirection (none when from is empty) and an egress
// selection (its proxy, when the egress configuration names one).
func (ts *targets) client(caBundle []byte, from, to string, selection egress.Name) (string, *http.Client, error) {
	sum := sha256.Sum256(caBundle)
	key := fmt.Sprintf("%x|%s|%s|%s", sum, from, to, selection)
	if c, ok := ts.clients[key]; ok {
		return key, c.client, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return "", nil, errors.New("unable to load root certificates: unable to parse bytes as PEM block")
		}
		tlsConfig.RootCAs = pool
	}
	dial := (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if d := ts.cfg.Egress.Dialer(selection); !d.Direct() {
		dial = d.DialContext
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if from != "" && addr == from {
				addr = to
			}
			return dial(ctx, network, addr)
		},
	}
	if from == "" {
		tr.Proxy = http.ProxyFromEnvironment
	}
	c := &http.Client{Transport: otelhttp.NewTransport(tr)}
	ts.clients[key] = &webhookClient{client: c, transport: tr}
	return key, c, nil
}

// post sends a ConversionReview and returns the response body. Errors read
// as upstream's REST client's do: the transport's (`Post "<url>": dial tcp
// ...`), a Status the webhook answered with, or a generic server response.
func (t *target) post(ctx context.Context, body []byte) (*answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", "crdplane-converter")
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %q: reading the response: %w", req.Method, t.url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 206 {
		var s metav1.Status
		if utiljson.UnmarshalCaseSensitivePreserveInts(data, &s) == nil && s.Kind == "Status" && s.Message != "" {
			return nil, errors.New(s.Message)
		}
		msg := "unknown"
		if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/") || strings.Contains(ct, "json") || ct == "" {
			msg = strings.TrimSpace(string(data))
		}
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, req.Method, schema.GroupResource{}, "", msg, 0, true)
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json" // what client-go assumes: the request's content type
	}
	return &answer{body: data, code: resp.StatusCode, contentType: ct}, nil
}

// answer is a webhook's successful (2xx) HTTP answer.
type answer struct {
	body        []byte
	code        int
	contentType string
}
