package soak

// HTTP clients of the gateway (its published port on loopback, TLS with
// the kubeconfig's CA and bearer token) and the soak CRD.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

const (
	group     = "soak.crdplane.io"
	plural    = "soakobjects"
	kind      = "SoakObject"
	namespace = "default"
	// storageVersion is stored as is; servedVersion goes through the
	// conversion webhook, that is through a converter replica.
	storageVersion = "v1beta1"
	servedVersion  = "v1"
)

// soakCRD: the reference's webhook-conversion CronTab (v1beta1 hostPort ⇄
// v1 host + port, converted by examples/crontab-conversion-webhook) with
// a schema that rejects something (replicas 1..10, a cron pattern).
const soakCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: soakobjects.soak.crdplane.io
spec:
  group: soak.crdplane.io
  scope: Namespaced
  names: {plural: soakobjects, singular: soakobject, kind: SoakObject}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          hostPort: {type: string}
          spec: &spec
            type: object
            required: [image]
            properties:
              cronSpec: {type: string, pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
              image: {type: string}
              replicas: {type: integer, minimum: 1, maximum: 10}
              data: {type: string}
  - name: v1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          host: {type: string}
          port: {type: string, pattern: '^[0-9]+$'}
          spec: *spec
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig:
        url: https://soak-webhook:9443/convert
        caBundle: CA_BUNDLE
`

// api is one HTTP client of the gateway (its own connections).
type api struct {
	hc   *http.Client
	host string
}

type bearer struct {
	rt    http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func loadConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.BearerToken == "" && cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		cfg.BearerToken = strings.TrimSpace(string(b))
	}
	return cfg, nil
}

// newAPI makes a client with a transport of its own: the load, the
// malformed requests and each watch do not share connections.
func newAPI(cfg *rest.Config) (*api, error) {
	tlsConf, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsConf,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
		// A connection to a killed gateway is noticed within ~15s even
		// when no RST arrives.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 10 * time.Second, PingTimeout: 5 * time.Second},
	}
	return &api{hc: &http.Client{Transport: bearer{tr, cfg.BearerToken}}, host: strings.TrimSuffix(cfg.Host, "/")}, nil
}

func collectionPath(version string) string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s", group, version, namespace, plural)
}

func objectPath(version, name string) string { return collectionPath(version) + "/" + name }

// response of one request: status 0 is a transport error (err set).
type response struct {
	status int
	body   []byte
	err    error
	dur    time.Duration
}

func (a *api) do(ctx context.Context, timeout time.Duration, method, path, contentType string, body []byte) response {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, method, a.host+path, rd)
	if err != nil {
		return response{err: err}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return response{err: err, dur: time.Since(start)}
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := response{status: resp.StatusCode, body: b, dur: time.Since(start)}
	if err != nil {
		// The status line came, the body did not: count it as a
		// transport error (the outcome of a write is unknown).
		r.status, r.err = 0, err
	}
	return r
}

// errKind names a transport error for the tables.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout") || strings.Contains(err.Error(), "deadline exceeded"):
		return "timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "conn refused"
	case strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "broken pipe") ||
		strings.Contains(err.Error(), "closed") || strings.Contains(err.Error(), "GOAWAY"):
		return "conn reset/closed"
	default:
		return "conn error"
	}
}

// objMeta is what the soak reads of an object.
type objMeta struct {
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name            string            `json:"name"`
		UID             string            `json:"uid"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Image string `json:"image"`
	} `json:"spec"`
}

func (o *objMeta) rv() int64 { return parseRV(o.Metadata.ResourceVersion) }

func parseRV(s string) int64 {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

type objList struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		Continue        string `json:"continue"`
	} `json:"metadata"`
	Items []objMeta `json:"items"`
}

// installCRD creates the soak CRD, waits until it is Established and until
// a create at the converted version goes through (validators and
// converters have it, the webhook answers).
func installCRD(ctx context.Context, a *api, caPEM []byte) error {
	y := strings.Replace(soakCRD, "CA_BUNDLE", base64.StdEncoding.EncodeToString(caPEM), 1)
	body, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		return err
	}
	r := a.do(ctx, 30*time.Second, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", body)
	if r.err != nil || r.status != http.StatusCreated {
		return fmt.Errorf("create CRD: %d %v %s", r.status, r.err, r.body)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := a.do(ctx, 10*time.Second, http.MethodGet, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/soakobjects.soak.crdplane.io", "", nil)
		var crd struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		established := false
		if r.status == http.StatusOK && json.Unmarshal(r.body, &crd) == nil {
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == "Established" && c.Status == "True")
			}
		}
		if established {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD not established: %d %s", r.status, r.body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var last response
	for i := 0; time.Now().Before(deadline); i++ {
		name := fmt.Sprintf("soak-probe-%d", i)
		last = a.do(ctx, 10*time.Second, http.MethodPost, collectionPath(servedVersion), "application/json",
			objectBody(servedVersion, name, "a", "probe", "probe:1", 1, ""))
		if last.status == http.StatusCreated {
			if r := a.do(ctx, 10*time.Second, http.MethodDelete, objectPath(storageVersion, name), "", nil); r.status != http.StatusOK {
				return fmt.Errorf("delete %s: %d %v %s", name, r.status, r.err, r.body)
			}
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("no create at %s went through: %d %v %s", servedVersion, last.status, last.err, last.body)
}

// objectBody is a SoakObject at version (hostPort at v1beta1, host and
// port at v1); rv, when set, is the update precondition.
func objectBody(version, name, shard, image, hostPort string, replicas int, rv string) []byte {
	obj := map[string]any{
		"apiVersion": group + "/" + version,
		"kind":       kind,
		"spec": map[string]any{
			"cronSpec": "*/5 * * * *",
			"image":    image,
			"replicas": replicas,
			"data":     padding,
		},
	}
	md := map[string]any{"name": name, "labels": map[string]string{"soak": "1", "shard": shard}}
	if rv != "" {
		md["resourceVersion"] = rv
	}
	obj["metadata"] = md
	if version == storageVersion {
		obj["hostPort"] = hostPort
	} else {
		h, p, _ := strings.Cut(hostPort, ":")
		obj["host"], obj["port"] = h, p
	}
	b, _ := json.Marshal(obj)
	return b
}

// padding makes an object about 1 KiB.
var padding = strings.Repeat("soak-data-", 80)
