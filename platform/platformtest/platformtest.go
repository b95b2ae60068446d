// Package platformtest starts an in-process crdplane for tests and
// benchmarks, with clients for it.
package platformtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/platform"
)

// GVRs of the resources the tests use.
var (
	CRDs     = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	CronTabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
)

// CronTabCRD is the CronTab CRD of the reference's "Validation" section.
const CronTabCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec:
                  type: string
                  pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'
                image:
                  type: string
                replicas:
                  type: integer
                  minimum: 1
                  maximum: 10
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
    - ct
`

// Start starts the platform in this process on a free loopback port, with
// embedded etcd in a temporary directory, and stops it when the test ends.
func Start(t testing.TB) (*platform.Platform, *rest.Config) {
	t.Helper()
	return StartConfig(t, platform.Config{})
}

// StartConfig is Start with cfg (its DataDir and ListenAddr are set here).
func StartConfig(t testing.TB, cfg platform.Config) (*platform.Platform, *rest.Config) {
	t.Helper()
	cfg.DataDir, cfg.ListenAddr = t.TempDir(), "127.0.0.1:0"
	p, err := platform.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, RESTConfig(p)
}

// RESTConfig is a client-go config for p (no client-side rate limit).
func RESTConfig(p *platform.Platform) *rest.Config {
	return &rest.Config{
		Host:            p.URL,
		BearerToken:     p.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.CAPEM},
		QPS:             -1,
	}
}

// HTTPClient trusts p's CA (HTTP/2 over TLS).
func HTTPClient(p *platform.Platform) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 256},
		Timeout:   30 * time.Second,
	}
}

// Object decodes YAML (or JSON) into an unstructured object.
func Object(t testing.TB, doc []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// CreateCRD creates crd and waits until it is Established and its first
// served version answers a list; it returns the time from the create request
// to that moment.
func CreateCRD(t testing.TB, dc dynamic.Interface, crd *unstructured.Unstructured) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := dc.Resource(CRDs).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version, _ := versions[0].(map[string]any)["name"].(string)
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: plural}
	var err error
	for {
		var u *unstructured.Unstructured
		u, err = dc.Resource(CRDs).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil && Established(u) {
			if _, err = dc.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				return time.Since(start)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not servable: %v", crd.GetName(), err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Established reports whether a CRD's Established condition is True.
func Established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == string(apiextensionsv1.Established) && m["status"] == "True" {
			return true
		}
	}
	return false
}
