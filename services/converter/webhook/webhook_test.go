package webhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	beta = "example.com/v1beta1"
	v1   = "example.com/v1"
)

// fakeWebhook converts CronTabs by moving spec.hostPort to spec.host (any
// direction); hooks change its answers.
type fakeWebhook struct {
	reviews     atomic.Int64
	objects     atomic.Int64
	inflight    atomic.Int64
	maxInflight atomic.Int64
	maxObjects  atomic.Int64 // the most objects in one review
	delay       time.Duration
	// mutate edits each converted object (after the conversion).
	mutate func(obj map[string]any)
	// respond edits the whole response review.
	respond func(review map[string]any)
	// fail fails the review when an object's name starts with "bad".
	fail bool
}

func (f *fakeWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	storeMax(&f.maxInflight, f.inflight.Add(1))
	defer f.inflight.Add(-1)
	var in struct {
		APIVersion string `json:"apiVersion"`
		Request    struct {
			UID               string           `json:"uid"`
			DesiredAPIVersion string           `json:"desiredAPIVersion"`
			Objects           []map[string]any `json:"objects"`
		} `json:"request"`
	}
	if r.Header.Get("Content-Type") != "application/json" || !strings.Contains(r.URL.RawQuery, "timeout=") {
		http.Error(w, "bad request headers", http.StatusBadRequest)
		return
	}
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	if err := d.Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.reviews.Add(1)
	f.objects.Add(int64(len(in.Request.Objects)))
	storeMax(&f.maxObjects, int64(len(in.Request.Objects)))
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	result := map[string]any{"status": "Success"}
	for _, o := range in.Request.Objects {
		o["apiVersion"] = in.Request.DesiredAPIVersion
		if name, _ := o["metadata"].(map[string]any)["name"].(string); f.fail && strings.HasPrefix(name, "bad") {
			result = map[string]any{"status": "Failure", "message": "cannot convert " + name}
		}
		if f.mutate != nil {
			f.mutate(o)
		}
	}
	resp := map[string]any{"apiVersion": in.APIVersion, "kind": "ConversionReview",
		"response": map[string]any{"uid": in.Request.UID, "result": result, "convertedObjects": in.Request.Objects}}
	if f.respond != nil {
		f.respond(resp)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func storeMax(a *atomic.Int64, n int64) {
	for {
		m := a.Load()
		if n <= m || a.CompareAndSwap(m, n) {
			return
		}
	}
}

// servingCert is a CA and a serving certificate for names, 127.0.0.1 and
// 127.0.0.2 (egress_test.go).
func servingCert(t testing.TB, names ...string) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "webhook"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startWebhook serves h over TLS on 127.0.0.1 and returns its CA and address.
func startWebhook(t testing.TB, h http.Handler, names ...string) (caPEM []byte, srv *httptest.Server) {
	t.Helper()
	caPEM, cert := servingCert(t, names...)
	srv = httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return caPEM, srv
}

func crd(clientConfig apiextensionsv1.WebhookClientConfig, reviewVersions ...string) *apiextensionsv1.CustomResourceDefinition {
	if len(reviewVersions) == 0 {
		reviewVersions = []string{"v1", "v1beta1"}
	}
	c := &apiextensionsv1.CustomResourceDefinition{}
	c.Name, c.UID, c.Generation = "crontabs.example.com", "uid-1", 1
	c.Spec.Group = "example.com"
	c.Spec.Names.Kind = "CronTab"
	c.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true}, {Name: "v1", Served: true}}
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ClientConfig: &clientConfig, ConversionReviewVersions: reviewVersions,
	}}
	return c
}

func urlCRD(srv *httptest.Server, caPEM []byte, reviewVersions ...string) *apiextensionsv1.CustomResourceDefinition {
	u := srv.URL + "/convert"
	return crd(apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: caPEM}, reviewVersions...)
}

func cronTab(apiVersion, name string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":%q,"kind":"CronTab","metadata":{"name":%q,"namespace":"default","uid":"u-%s","resourceVersion":"7","labels":{"app":"x"}},"spec":{"replicas":9007199254740993}}`, apiVersion, name, name)
}

func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if err == nil {
		t.Fatal("want an error")
	}
	se, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("not a Status error: %T %v", err, err)
	}
	return se.Status()
}

func TestConvertURL(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, fw)
	for _, versions := range [][]string{{"v1"}, {"v1beta1"}, {"v2", "v1beta1", "v1"}} {
		t.Run(strings.Join(versions, ","), func(t *testing.T) {
			c := New(Config{})
			objs := [][]byte{cronTab(beta, "a"), cronTab(v1, "b"), cronTab(beta, "c")}
			before := fw.reviews.Load()
			out, err := c.Convert(context.Background(), urlCRD(srv, caPEM, versions...), v1, objs)
			if err != nil {
				t.Fatal(err)
			}
			if fw.reviews.Load()-before != 1 || c.Stats().Objects != 2 {
				t.Fatalf("%d reviews, %d objects sent; want 1 review of 2 (b is at v1 already)", fw.reviews.Load()-before, c.Stats().Objects)
			}
			for i, o := range out {
				var m map[string]any
				if err := json.Unmarshal(o, &m); err != nil || m["apiVersion"] != v1 || m["metadata"].(map[string]any)["name"] != []string{"a", "b", "c"}[i] {
					t.Fatalf("object %d: %s", i, o)
				}
				if !strings.Contains(string(o), "9007199254740993") {
					t.Fatalf("int64 lost: %s", o)
				}
			}
		})
	}
}

func TestReviewVersionAndHeaders(t *testing.T) {
	var got []string
	var mu sync.Mutex
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RequestURI())
		mu.Unlock()
		fw.ServeHTTP(w, r)
	}))
	c := New(Config{Timeout: 7 * time.Second})
	if _, err := c.Convert(context.Background(), urlCRD(srv, caPEM, "v1beta1", "v1"), v1, [][]byte{cronTab(beta, "a")}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "/convert?timeout=7s" {
		t.Fatalf("requests: %v", got)
	}
	_, err := New(Config{}).Convert(context.Background(), crd(apiextensionsv1.WebhookClientConfig{URL: &srv.URL, CABundle: caPEM}, "v2"), v1, [][]byte{cronTab(beta, "a")})
	if s := statusOf(t, err); s.Code != 500 || s.Message != "no supported conversion review versions" {
		t.Fatalf("%+v", s)
	}
}

func TestServiceEndpoint(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, fw, "crontab-conversion.default.svc")
	addr := srv.Listener.Addr().String()
	path := "/convert"
	port := int32(9443)
	svc := apiextensionsv1.WebhookClientConfig{CABundle: caPEM, Service: &apiextensionsv1.ServiceReference{Namespace: "default", Name: "crontab-conversion", Path: &path, Port: &port}}

	eps := EndpointMap{}
	if err := eps.Set("crontab-conversion.default=" + addr); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{ServiceEndpoints: eps}).Convert(context.Background(), crd(svc), v1, [][]byte{cronTab(beta, "a")}); err != nil {
		t.Fatal(err)
	}
	// A DNS pattern reaching the same server.
	_, p, _ := net.SplitHostPort(addr)
	if _, err := New(Config{ServiceDNSPattern: "127.0.0.1:" + p}).Convert(context.Background(), crd(svc), v1, [][]byte{cronTab(beta, "a")}); err != nil {
		t.Fatal(err)
	}
	// The certificate is checked against <name>.<namespace>.svc: a server
	// whose certificate does not name the service is refused.
	otherCA, other := startWebhook(t, fw, "other.default.svc")
	svc.CABundle = otherCA
	eps = EndpointMap{"crontab-conversion.default:9443": other.Listener.Addr().String()}
	_, err := New(Config{ServiceEndpoints: eps}).Convert(context.Background(), crd(svc), v1, [][]byte{cronTab(beta, "a")})
	if s := statusOf(t, err); !strings.Contains(s.Message, `Post "https://crontab-conversion.default.svc:9443/convert?timeout=30s": tls: failed to verify certificate`) {
		t.Fatalf("%+v", s)
	}
	// Without a CA bundle, system roots verify (and refuse the test CA).
	svc.CABundle = nil
	eps = EndpointMap{"crontab-conversion.default": addr}
	_, err = New(Config{ServiceEndpoints: eps}).Convert(context.Background(), crd(svc), v1, [][]byte{cronTab(beta, "a")})
	if s := statusOf(t, err); !strings.Contains(s.Message, "certificate signed by unknown authority") {
		t.Fatalf("%+v", s)
	}
}

func TestEndpointFlags(t *testing.T) {
	m := EndpointMap{}
	if err := m.Set("a.ns=127.0.0.1:1, b.ns:8443=host:2"); err != nil {
		t.Fatal(err)
	}
	cfg := Config{ServiceEndpoints: m}.withDefaults()
	for _, tt := range []struct {
		ns, name string
		port     int32
		want     string
	}{{"ns", "a", 443, "127.0.0.1:1"}, {"ns", "b", 8443, "host:2"}, {"ns", "b", 443, "b.ns.svc:443"}} {
		if got := cfg.serviceAddr(tt.ns, tt.name, tt.port); got != tt.want {
			t.Errorf("%s.%s:%d → %s, want %s", tt.name, tt.ns, tt.port, got, tt.want)
		}
	}
	cfg.ServiceDNSPattern = "{namespace}-{name}"
	if got := cfg.serviceAddr("ns", "c", 443); got != "ns-c:443" {
		t.Errorf("pattern → %s", got)
	}
	for _, bad := range []string{"a.ns", "a=1.2.3.4:5", "a.ns=nohost", "a.ns:x=h:1", "a.b.c=h:1"} {
		if err := (EndpointMap{}).Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if s := m.String(); s != "a.ns=127.0.0.1:1,b.ns:8443=host:2" {
		t.Errorf("String() = %s", s)
	}
}

func TestResponseChecks(t *testing.T) {
	const prefix = "conversion webhook for example.com/v1beta1, Kind=CronTab "
	tests := []struct {
		name    string
		review  []string
		fw      *fakeWebhook
		objs    [][]byte
		want    string // message; "" for success
		check   func(t *testing.T, out [][]byte)
		reviews string
	}{
		{name: "failed with message", fw: &fakeWebhook{fail: true}, objs: [][]byte{cronTab(beta, "bad1")}, want: prefix + "failed: cannot convert bad1"},
		{name: "failed without message", fw: &fakeWebhook{respond: func(r map[string]any) {
			r["response"].(map[string]any)["result"] = map[string]any{"status": "Failure"}
		}}, objs: [][]byte{cronTab(beta, "a")}, want: prefix + "failed: response.result.status was 'Failure', not 'Success'"},
		{name: "uid mismatch", fw: &fakeWebhook{respond: func(r map[string]any) { r["response"].(map[string]any)["uid"] = "other" }},
			objs: [][]byte{cronTab(beta, "a")}, want: prefix + `failed: expected response.uid="`},
		{name: "v1beta1 uid not checked", review: []string{"v1beta1"}, fw: &fakeWebhook{respond: func(r map[string]any) { r["response"].(map[string]any)["uid"] = "other" }},
			objs: [][]byte{cronTab(beta, "a")}},
		{name: "wrong review kind", fw: &fakeWebhook{respond: func(r map[string]any) { r["apiVersion"] = "apiextensions.k8s.io/v1beta1" }},
			objs: [][]byte{cronTab(beta, "a")}, want: prefix + "failed: converting (v1beta1.ConversionReview) to (v1.ConversionReview): unknown conversion"},
		{name: "unknown review kind", fw: &fakeWebhook{respond: func(r map[string]any) { r["kind"] = "ConversionRequest" }},
			objs: [][]byte{cronTab(beta, "a")}, want: prefix + `failed: no kind "ConversionRequest" is registered for version "apiextensions.k8s.io/v1" in scheme "pkg/runtime/scheme.go:110"`},
		{name: "no review type", fw: &fakeWebhook{respond: func(r map[string]any) { delete(r, "kind"); delete(r, "apiVersion") }},
			objs: [][]byte{cronTab(beta, "a")}, want: prefix + "failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got /, Kind="},
		{name: "no response", fw: &fakeWebhook{respond: func(r map[string]any) { delete(r, "response") }}, objs: [][]byte{cronTab(beta, "a")}, want: prefix + "failed: no response provided"},
		{name: "count", fw: &fakeWebhook{respond: func(r map[string]any) {
			resp := r["response"].(map[string]any)
			resp["convertedObjects"] = resp["convertedObjects"].([]map[string]any)[:1]
		}}, objs: [][]byte{cronTab(beta, "a"), cronTab(beta, "b")}, want: prefix + "returned 1 objects, expected 2"},
		{name: "apiVersion", fw: &fakeWebhook{mutate: func(o map[string]any) { o["apiVersion"] = beta }}, objs: [][]byte{cronTab(beta, "a")},
			want: prefix + "returned invalid object at index 0: invalid groupVersion (expected example.com/v1, received example.com/v1beta1)"},
		{name: "kind", fw: &fakeWebhook{mutate: func(o map[string]any) { o["kind"] = "Other" }}, objs: [][]byte{cronTab(beta, "a"), cronTab(beta, "b")},
			want: prefix + "returned invalid converted object at index 0: invalid kind (expected CronTab, received Other)"},
		{name: "name", fw: &fakeWebhook{mutate: func(o map[string]any) { o["metadata"].(map[string]any)["name"] = "renamed" }}, objs: [][]byte{cronTab(beta, "a")},
			want: prefix + "returned invalid object: must have the same name: a != renamed"},
		{name: "namespace", fw: &fakeWebhook{mutate: func(o map[string]any) { delete(o["metadata"].(map[string]any), "namespace") }}, objs: [][]byte{cronTab(v1, "x"), cronTab(beta, "a")},
			want: prefix + "returned invalid converted object at index 1: must have the same namespace: default != "},
		{name: "uid", fw: &fakeWebhook{mutate: func(o map[string]any) { o["metadata"].(map[string]any)["uid"] = "x" }}, objs: [][]byte{cronTab(beta, "a")},
			want: prefix + "returned invalid object: must have the same UID: u-a != x"},
		{name: "metadata missing", fw: &fakeWebhook{mutate: func(o map[string]any) {
			o["metadata"] = nil
		}}, objs: [][]byte{[]byte(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{}}`)}, want: prefix + "returned invalid metadata: missing metadata in converted object"},
		{name: "label value", fw: &fakeWebhook{mutate: func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = map[string]any{"n": 1} }}, objs: [][]byte{cronTab(beta, "a")},
			want: prefix + "returned invalid metadata: metadata.labels[n] must be a string, but is int64 in converted object"},
		{name: "invalid label", fw: &fakeWebhook{mutate: func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = map[string]any{"a b": "c"} }}, objs: [][]byte{cronTab(beta, "a")},
			want: prefix + `returned invalid metadata: metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters`},
		{name: "labels and annotations kept, other metadata restored", fw: &fakeWebhook{mutate: func(o map[string]any) {
			m := o["metadata"].(map[string]any)
			m["labels"] = map[string]any{"app": "y", "new": "z"}
			m["annotations"] = map[string]any{"converted": "true"}
			m["resourceVersion"] = "999"
			m["generation"] = 5
			o["spec"] = map[string]any{"host": "h"}
		}}, objs: [][]byte{cronTab(beta, "a")}, check: func(t *testing.T, out [][]byte) {
			var m map[string]any
			_ = json.Unmarshal(out[0], &m)
			md := m["metadata"].(map[string]any)
			if md["resourceVersion"] != "7" || md["generation"] != nil || md["labels"].(map[string]any)["new"] != "z" || md["annotations"].(map[string]any)["converted"] != "true" || m["spec"].(map[string]any)["host"] != "h" {
				t.Fatalf("got %s", out[0])
			}
		}},
		{name: "labels dropped", fw: &fakeWebhook{mutate: func(o map[string]any) { delete(o["metadata"].(map[string]any), "labels") }}, objs: [][]byte{cronTab(beta, "a")},
			check: func(t *testing.T, out [][]byte) {
				if strings.Contains(string(out[0]), "labels") {
					t.Fatalf("got %s", out[0])
				}
			}},
		{name: "http error", fw: &fakeWebhook{respond: func(r map[string]any) { panic(http.ErrAbortHandler) }}, objs: [][]byte{cronTab(beta, "a")}, want: prefix + `failed: Post "https://127.0.0.1:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caPEM, srv := startWebhook(t, tt.fw)
			out, err := New(Config{}).Convert(context.Background(), urlCRD(srv, caPEM, tt.review...), v1, tt.objs)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tt.check != nil {
					tt.check(t, out)
				}
				return
			}
			s := statusOf(t, err)
			if s.Code != 500 || s.Reason != "" || !strings.HasPrefix(s.Message, tt.want) {
				t.Fatalf("got %d %s %q\nwant prefix %q", s.Code, s.Reason, s.Message, tt.want)
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	caPEM, srv := startWebhook(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "webhook broke", http.StatusInternalServerError)
	}))
	_, err := New(Config{}).Convert(context.Background(), urlCRD(srv, caPEM), v1, [][]byte{cronTab(beta, "a")})
	want := `conversion webhook for example.com/v1beta1, Kind=CronTab failed: an error on the server ("webhook broke") has prevented the request from succeeding`
	if s := statusOf(t, err); s.Message != want {
		t.Fatalf("got  %q\nwant %q", s.Message, want)
	}
}

func TestWebhookDownAndBack(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, cert := servingCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u := "https://" + addr + "/convert"
	c := New(Config{})
	crd := crd(apiextensionsv1.WebhookClientConfig{URL: &u, CABundle: caPEM})
	_, err = c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, "a")})
	s := statusOf(t, err)
	want := fmt.Sprintf(`conversion webhook for example.com/v1beta1, Kind=CronTab failed: Post "https://%s/convert?timeout=30s": dial tcp %s: connect: connection refused`, addr, addr)
	if s.Code != 500 || s.Message != want {
		t.Fatalf("got  %d %q\nwant %q", s.Code, s.Message, want)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: fw, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()
	if _, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, "a")}); err != nil {
		t.Fatalf("after the webhook came back: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	caPEM, srv := startWebhook(t, &fakeWebhook{delay: 300 * time.Millisecond})
	_, err := New(Config{Timeout: 50 * time.Millisecond}).Convert(context.Background(), urlCRD(srv, caPEM), v1, [][]byte{cronTab(beta, "a")})
	if s := statusOf(t, err); s.Code != 500 || !strings.Contains(s.Message, "timeout=50ms") || !strings.Contains(s.Message, "context deadline exceeded") {
		t.Fatalf("%+v", s)
	}
}

func TestInvalidVersions(t *testing.T) {
	c := New(Config{})
	u := "https://127.0.0.1:1/convert"
	crd := crd(apiextensionsv1.WebhookClientConfig{URL: &u})
	_, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab("example.com/v9", "a")})
	if s := statusOf(t, err); s.Message != "request to convert CR from an invalid group/version: example.com/v9" {
		t.Fatal(s.Message)
	}
	_, err = c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, "a"), cronTab("example.com/v9", "b")})
	if s := statusOf(t, err); s.Message != "request to convert CR list failed, list index 1 has invalid group/version: example.com/v9" {
		t.Fatal(s.Message)
	}
	// Nothing to convert: no call at all.
	out, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(v1, "a")})
	if err != nil || len(out) != 1 || c.Stats().Calls != 0 {
		t.Fatalf("%v, %d calls", err, c.Stats().Calls)
	}
}

// TestCoalescing runs 64 concurrent single-object conversions against a
// webhook that takes 5ms per review: they share a few reviews, and every
// caller gets its own object back.
func TestCoalescing(t *testing.T) {
	fw := &fakeWebhook{delay: 5 * time.Millisecond}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{BatchWindow: 20 * time.Millisecond})
	crd := urlCRD(srv, caPEM)
	const n = 64
	reviews0, requests0 := histogram(t, reviewRequests)
	_, objects0 := histogram(t, reviewObjects)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("o%d", i)
			out, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, name), cronTab(beta, name+"-2")})
			if err != nil {
				errs <- err
				return
			}
			for j, suffix := range []string{"", "-2"} {
				var m map[string]any
				_ = json.Unmarshal(out[j], &m)
				if m["metadata"].(map[string]any)["name"] != name+suffix || m["apiVersion"] != v1 {
					errs <- fmt.Errorf("caller %d got %s", i, out[j])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r := fw.reviews.Load(); r > 8 {
		t.Errorf("%d reviews for %d concurrent requests", r, n)
	}
	t.Logf("%d requests, %d reviews", n, fw.reviews.Load())
	// The batching metrics saw every review, request and object.
	reviews, requests := histogram(t, reviewRequests)
	_, objects := histogram(t, reviewObjects)
	if reviews-reviews0 != uint64(fw.reviews.Load()) || requests-requests0 != n || objects-objects0 != 2*n {
		t.Errorf("metrics: %d reviews, %v requests, %v objects", reviews-reviews0, requests-requests0, objects-objects0)
	}
	// Nothing left behind.
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queues) != 0 {
		t.Errorf("%d queues left", len(c.queues))
	}
}

// TestCoalescedFailureIsolated checks that a review the webhook fails
// because of one caller's object fails only that caller.
func TestCoalescedFailureIsolated(t *testing.T) {
	fw := &fakeWebhook{delay: 5 * time.Millisecond, fail: true}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{BatchWindow: 20 * time.Millisecond})
	crd := urlCRD(srv, caPEM)
	// Keep a call in flight so the others coalesce behind it.
	go func() { _, _ = c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, "first")}) }()
	time.Sleep(time.Millisecond)
	var wg sync.WaitGroup
	results := make([]error, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("good%d", i)
			if i == 3 {
				name = "bad3"
			}
			_, results[i] = c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, name)})
		}()
	}
	wg.Wait()
	for i, err := range results {
		if i == 3 {
			if s := statusOf(t, err); !strings.HasSuffix(s.Message, "failed: cannot convert bad3") {
				t.Errorf("bad caller: %q", s.Message)
			}
			continue
		}
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
}

// TestChunking splits a large list into parallel reviews and keeps order.
func TestChunking(t *testing.T) {
	fw := &fakeWebhook{delay: 10 * time.Millisecond}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{MaxBatch: 100, MaxParallelChunks: 4})
	objs := make([][]byte, 1000)
	for i := range objs {
		objs[i] = cronTab(beta, fmt.Sprintf("o%04d", i))
	}
	out, err := c.Convert(context.Background(), urlCRD(srv, caPEM), v1, objs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if !strings.Contains(string(o), fmt.Sprintf(`"name":"o%04d"`, i)) {
			t.Fatalf("object %d out of place: %s", i, o)
		}
	}
	if fw.reviews.Load() != 10 || fw.maxInflight.Load() < 2 || fw.maxInflight.Load() > 4 {
		t.Fatalf("%d reviews, at most %d at once", fw.reviews.Load(), fw.maxInflight.Load())
	}
	// No limit: one review, as upstream.
	fw.reviews.Store(0)
	if _, err := New(Config{MaxBatch: -1}).Convert(context.Background(), urlCRD(srv, caPEM), v1, objs); err != nil || fw.reviews.Load() != 1 {
		t.Fatalf("%v, %d reviews", err, fw.reviews.Load())
	}
}

func TestCallerCancel(t *testing.T) {
	caPEM, srv := startWebhook(t, &fakeWebhook{delay: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := New(Config{}).Convert(ctx, urlCRD(srv, caPEM), v1, [][]byte{cronTab(beta, "a")})
	if err != context.DeadlineExceeded {
		t.Fatalf("got %v", err)
	}
}

// TestLoneCallerDoesNotWait: sequential conversions (a watch's events) are
// sent at once, whatever the window.
func TestLoneCallerDoesNotWait(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{BatchWindow: time.Second})
	crd := urlCRD(srv, caPEM)
	start := time.Now()
	for i := range 20 {
		if _, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, fmt.Sprint("o", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("20 sequential conversions took %v", d)
	}
	if fw.reviews.Load() != 20 {
		t.Fatalf("%d reviews", fw.reviews.Load())
	}
}

// TestBatchLimit: a batch never holds more than MaxBatch objects.
func TestBatchLimit(t *testing.T) {
	fw := &fakeWebhook{delay: 3 * time.Millisecond}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{MaxBatch: 8, BatchWindow: 10 * time.Millisecond})
	crd := urlCRD(srv, caPEM)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, fmt.Sprint("o", i)), cronTab(beta, fmt.Sprint("p", i))}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := fw.maxObjects.Load(); m > 8 || fw.objects.Load() != 128 {
		t.Fatalf("%d objects sent, up to %d in one review", fw.objects.Load(), m)
	}
}

// TestWindowBoundsTheWait: with a webhook slower than the window, 16
// clients converting in a loop for 300ms never wait much longer than the
// window for their review to leave (reviews overlap instead), and reviews
// leave at most about once per window.
func TestWindowBoundsTheWait(t *testing.T) {
	const window = 10 * time.Millisecond
	const roundTrip = 120 * time.Millisecond
	fw := &fakeWebhook{delay: roundTrip}
	caPEM, srv := startWebhook(t, fw)
	var mu sync.Mutex
	var maxWait time.Duration
	c := New(Config{BatchWindow: window, Observe: func(waits []time.Duration, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range waits {
			maxWait = max(maxWait, w)
		}
	}})
	crd := urlCRD(srv, caPEM)
	const run = 300 * time.Millisecond
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	var conversions atomic.Int64
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; time.Now().Before(deadline); j++ {
				if _, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, fmt.Sprintf("o%d-%d", i, j))}); err != nil {
					t.Error(err)
					return
				}
				conversions.Add(1)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	// Generous slack for a loaded machine (scheduling delays of tens of
	// milliseconds); without the bound a wait is a whole webhook round trip
	// (120ms) or more.
	if maxWait > window+50*time.Millisecond {
		t.Errorf("a conversion waited %v to be sent (window %v)", maxWait, window)
	}
	if fw.maxInflight.Load() < 2 {
		t.Errorf("reviews never overlapped (at most %d in flight)", fw.maxInflight.Load())
	}
	// One review per window (+1 for the first, sent at once), plus the
	// tail of the run.
	if r, most := fw.reviews.Load(), int64((run+roundTrip)/window)+3; r > most {
		t.Errorf("%d reviews in %v with a %v window, want at most %d", r, run, window, most)
	}
	t.Logf("%d conversions, %d reviews, %d in flight at most, longest wait %v", conversions.Load(), fw.reviews.Load(), fw.maxInflight.Load(), maxWait)
}

// TestMaxInflightCaps: with MaxInflight 1, reviews never overlap.
func TestMaxInflightCaps(t *testing.T) {
	fw := &fakeWebhook{delay: 5 * time.Millisecond}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{BatchWindow: time.Millisecond, MaxInflight: 1})
	crd := urlCRD(srv, caPEM)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				if _, err := c.Convert(context.Background(), crd, v1, [][]byte{cronTab(beta, fmt.Sprintf("o%d-%d", i, j))}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if m := fw.maxInflight.Load(); m != 1 {
		t.Errorf("%d reviews in flight at once, want 1", m)
	}
	if fw.objects.Load() != 160 || fw.reviews.Load() >= 160 {
		t.Errorf("%d objects in %d reviews", fw.objects.Load(), fw.reviews.Load())
	}
}

// TestCoalescedDuplicatesSentOnce: concurrent conversions of the same
// object (watches of one resource converting one event) share one copy in
// the review, and every caller gets the converted object.
func TestCoalescedDuplicatesSentOnce(t *testing.T) {
	fw := &fakeWebhook{delay: 5 * time.Millisecond}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{BatchWindow: 20 * time.Millisecond})
	crd := urlCRD(srv, caPEM)
	same := cronTab(beta, "event")
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			objs := [][]byte{same}
			if i%2 == 0 {
				objs = append(objs, cronTab(beta, fmt.Sprint("own", i)))
			}
			out, err := c.Convert(context.Background(), crd, v1, objs)
			if err != nil {
				t.Error(err)
				return
			}
			for j, o := range out {
				var m map[string]any
				_ = json.Unmarshal(o, &m)
				want := "event"
				if j == 1 {
					want = fmt.Sprint("own", i)
				}
				if m["metadata"].(map[string]any)["name"] != want || m["apiVersion"] != v1 {
					t.Errorf("caller %d object %d: %s", i, j, o)
				}
			}
		}()
	}
	wg.Wait()
	// 40 copies of the shared object and 20 own objects: at most one copy of
	// the shared one per review.
	if o, r := fw.objects.Load(), fw.reviews.Load(); o > 20+r {
		t.Errorf("%d objects sent in %d reviews", o, r)
	}
	t.Logf("%d objects in %d reviews for 60 conversions", fw.objects.Load(), fw.reviews.Load())
}

// TestSharedInFlight: conversions of an object that is being converted
// wait for that conversion instead of sending it again; when it fails,
// each of them gets its own outcome (here: its own failure).
func TestSharedInFlight(t *testing.T) {
	fw := &fakeWebhook{delay: 50 * time.Millisecond, fail: true}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{BatchWindow: time.Millisecond})
	crd := urlCRD(srv, caPEM)
	for _, name := range []string{"event", "bad-event"} {
		fw.reviews.Store(0)
		fw.objects.Store(0)
		obj := cronTab(beta, name)
		first := make(chan error, 1)
		go func() {
			_, err := c.Convert(context.Background(), crd, v1, [][]byte{obj})
			first <- err
		}()
		time.Sleep(10 * time.Millisecond) // the first conversion is in flight
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := c.Convert(context.Background(), crd, v1, [][]byte{obj})
				if err == nil && !strings.Contains(string(out[0]), `"apiVersion":"`+v1+`"`) {
					err = fmt.Errorf("got %s", out[0])
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		firstErr := <-first
		for i, err := range append(errs, firstErr) {
			if name == "event" && err != nil {
				t.Errorf("%s: caller %d: %v", name, i, err)
			}
			if name == "bad-event" && (err == nil || !strings.Contains(err.Error(), "cannot convert bad-event")) {
				t.Errorf("%s: caller %d: %v", name, i, err)
			}
		}
		if name == "event" && (fw.reviews.Load() != 1 || fw.objects.Load() != 1) {
			t.Errorf("%s: %d reviews, %d objects for 21 conversions of one object", name, fw.reviews.Load(), fw.objects.Load())
		}
		if name == "bad-event" && fw.reviews.Load() < 2 {
			t.Errorf("%s: the failure was shared instead of retried (%d reviews)", name, fw.reviews.Load())
		}
	}
	c.flights.mu.Lock()
	defer c.flights.mu.Unlock()
	if len(c.flights.m) != 0 {
		t.Errorf("%d flight keys left", len(c.flights.m))
	}
}
