package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/pkg/egress/egresstest"
)

// TestRunEgressSelector runs `crdplane run --egress-selector-config-file`
// with the cluster selection through an HTTP CONNECT proxy: a conversion
// webhook named by clientConfig.service, whose in-cluster name only the
// proxy resolves, converts through it, and conversions fail with
// upstream's wording once the proxy is down.
func TestRunEgressSelector(t *testing.T) {
	wh := startConversionWebhook(t, "crontab-conversion.webhooks.svc")
	const svcAddr = "crontab-conversion.webhooks.svc:443"
	proxy := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{svcAddr: wh.addr}})
	config := egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+proxy.URL+`
- name: controlplane
  connection:
    proxyProtocol: Direct
`)
	s := startServer(t, "", "--egress-selector-config-file", config)
	b, err := os.ReadFile(testdata("conversion-crontab-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := strings.NewReplacer(
		"url: WEBHOOK_URL", "service: {namespace: webhooks, name: crontab-conversion, path: /convert}",
		"CA_BUNDLE", base64.StdEncoding.EncodeToString(wh.caPEM)).Replace(string(b))
	s.mustIn(t, crd, "apply", "-f", "-")
	s.must(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/crontabs.example.com")
	s.mustIn(t, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"egress","namespace":"default"},"hostPort":"db.example.com:5432","spec":{"cronSpec":"* * * * */5"}}`, "create", "-f", "-")
	out := s.must(t, "get", "crontabs.v1.example.com", "egress", "-o", "jsonpath={.apiVersion} {.host} {.port}")
	if out != "example.com/v1 db.example.com 5432" {
		t.Fatalf("read at v1: %q", out)
	}
	if wh.handler.Reviews() == 0 || proxy.Connects() == 0 {
		t.Fatalf("%d reviews, %d CONNECTs", wh.handler.Reviews(), proxy.Connects())
	}
	for _, target := range proxy.Targets() {
		if target != svcAddr {
			t.Fatalf("CONNECT %s, want %s", target, svcAddr)
		}
	}

	// The proxy down: a write at v1 needs the webhook (v1beta1 is stored).
	proxy.Close()
	_, errOut, err := s.kubectl(t, `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"down","namespace":"default"},"host":"db","port":"1","spec":{"cronSpec":"* * * * */5"}}`, "create", "-f", "-")
	want := fmt.Sprintf(`conversion webhook for example.com/v1, Kind=CronTab failed: Post "https://%s/convert?timeout=30s": dial tcp %s: connect: connection refused`, svcAddr, proxy.Addr)
	if err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("proxy down: %v\n%s\nwant %s", err, errOut, want)
	}
	if _, errOut, err := s.kubectl(t, "", "get", "crontabs.v1beta1.example.com", "down"); err == nil || !strings.Contains(errOut, `"down" not found`) {
		t.Fatalf("written while the proxy was down: %v %s", err, errOut)
	}
}
