package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// sampleAPIServerBinary is upstream's k8s.io/sample-apiserver v0.33
// (e2e/sampleapiserver, its own module): $SAMPLE_APISERVER_BIN (make
// test-e2e builds it), else one built now.
func sampleAPIServerBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("SAMPLE_APISERVER_BIN"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "sample-apiserver")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = "sampleapiserver"
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build sample-apiserver: %v", err)
	}
	return out
}

// startEtcd runs an embedded etcd for the sample-apiserver and returns
// its client URL.
func startEtcd(t *testing.T) string {
	t.Helper()
	ec := embed.NewConfig()
	ec.Name = "wardle"
	ec.Dir = t.TempDir()
	client, _ := url.Parse("http://127.0.0.1:0")
	peer, _ := url.Parse("http://127.0.0.1:0")
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.UnsafeNoFsync = true
	ec.Logger = "zap"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() {
		e.Close()
		<-e.Server.StopNotify()
	})
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready after 30s")
	}
	return "http://" + e.Clients[0].Addr().String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// wardle is a running sample-apiserver.
type wardle struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
	addr string
	done chan struct{}
}

func (w *wardle) stop() {
	if w.cmd.ProcessState != nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// aggregation is crdplane (RBAC, a token file of alice and bob, the
// front-proxy client certificate) with the real sample-apiserver behind
// it as Service wardle/api:443.
type aggregation struct {
	s        *server
	wardle   *wardle
	pki      *localpki.PKI // the sample-apiserver's serving CA (caBundle)
	proxyCrt tls.Certificate
	// proxyCrtPEM and proxyKeyPEM are proxyCrt's; port is the
	// sample-apiserver's
	proxyCrtPEM, proxyKeyPEM []byte
	port                     int
	dir                      string
	start                    func() *wardle
}

func startAggregation(t *testing.T) *aggregation {
	t.Helper()
	bin := sampleAPIServerBinary(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// the front proxy's client certificate, and the CA that signs it
	frontCA := newCA(t)
	crt, key := issue(t, frontCA, "front-proxy-client", nil, time.Now().Add(-time.Minute), time.Hour)
	proxyCrt, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	// the sample-apiserver's serving certificate, for api.wardle.svc
	pki, err := localpki.Generate([]string{"api.wardle.svc", "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	tokens := write("tokens.csv", []byte("alice-token,alice,1001\nbob-token,bob,1002\n"))
	s := startServer(t, "", "--token-file", tokens, "--authorization-mode", "RBAC",
		"--proxy-client-cert-file", write("proxy.crt", crt), "--proxy-client-key-file", write("proxy.key", key),
		"--aggregator-service-override", fmt.Sprintf("wardle/api:443=127.0.0.1:%d", port),
		"--aggregator-probe-interval", "1s")
	etcd := startEtcd(t)
	args := []string{
		"--etcd-servers", etcd,
		"--secure-port", fmt.Sprint(port), "--bind-address", "127.0.0.1",
		"--tls-cert-file", write("wardle.crt", pki.ServingCertPEM), "--tls-private-key-file", write("wardle.key", pki.ServingKeyPEM),
		"--kubeconfig", s.Kubeconfig, "--authentication-kubeconfig", s.Kubeconfig, "--authorization-kubeconfig", s.Kubeconfig,
		"--authentication-skip-lookup",
		"--requestheader-client-ca-file", write("front-ca.crt", frontCA.CACertPEM),
		"--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group", "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		// crdplane serves no admission webhook configurations or policies
		"--disable-admission-plugins", "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy",
		"--enable-priority-and-fairness=false",
	}
	a := &aggregation{s: s, pki: pki, proxyCrt: proxyCrt, proxyCrtPEM: crt, proxyKeyPEM: key, port: port, dir: dir}
	a.start = func() *wardle {
		w := &wardle{logs: &bytes.Buffer{}, addr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
		w.cmd = exec.Command(bin, args...)
		w.cmd.Stdout, w.cmd.Stderr = w.logs, w.logs
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = w.cmd.Wait(); close(w.done) }()
		t.Cleanup(func() {
			w.stop()
			if t.Failed() {
				t.Logf("sample-apiserver logs:\n%s", tail(w.logs.String(), 6000))
			}
		})
		// ready: /readyz answers 200 (its always-allowed path)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 2 * time.Second} //nolint:gosec // a readiness poll
		deadline := time.Now().Add(90 * time.Second)
		for {
			resp, err := client.Get("https://" + w.addr + "/readyz")
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("sample-apiserver not ready: %v\n%s", err, tail(w.logs.String(), 6000))
			}
			time.Sleep(200 * time.Millisecond)
		}
		return w
	}
	a.wardle = a.start()
	return a
}

func (a *aggregation) apiService(caBundle []byte) string {
	return fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.wardle.example.com
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: wardle, name: api, port: 443}
  caBundle: %s
`, base64.StdEncoding.EncodeToString(caBundle))
}

// waitAvailable waits until kubectl's AVAILABLE column of the APIService
// is want.
func (a *aggregation) waitAvailable(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _, err := a.s.kubectl(t, "", "get", "apiservices", "v1alpha1.wardle.example.com")
		if err == nil && strings.Contains(out, " "+want+" ") {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("APIService never %q: %s %v", want, out, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// rawAdmin GETs path from crdplane with the admin's token.
func rawAdmin(t *testing.T, s *server, path string) (int, string, string) {
	t.Helper()
	kc := loadKubeconfig(t, s)
	roots := x509.NewCertPool()
	var token string
	for _, c := range kc.Clusters {
		roots.AppendCertsFromPEM(c.CertificateAuthorityData)
	}
	for _, ai := range kc.AuthInfos {
		token = ai.Token
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestAggregatorSampleAPIServer: the real k8s.io/sample-apiserver v0.33
// behind crdplane, driven by kubectl 1.33: the APIService becomes
// Available; discovery lists flunders; create, get, watch and delete go
// through the proxy; RBAC is crdplane's (403 before proxying) and the
// sample-apiserver's delegated SubjectAccessReviews come back to crdplane;
// a wrong caBundle is 503 with upstream's message; a stopped backend
// turns the APIService Available=False (FailedDiscoveryCheck) and its
// requests 503 "service unavailable".
func TestAggregatorSampleAPIServer(t *testing.T) {
	a := startAggregation(t)
	s := a.s
	s.mustIn(t, a.apiService(a.pki.CACertPEM), "apply", "-f", "-")
	out := a.waitAvailable(t, "True")
	wantLines(t, out, `^NAME\s+SERVICE\s+AVAILABLE\s+AGE$`, `^v1alpha1\.wardle\.example\.com\s+wardle/api\s+True\s+\S+$`)
	cond := getJSON(t, s, "apiservice", "v1alpha1.wardle.example.com")["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	if cond["reason"] != "Passed" || cond["message"] != "all checks passed" {
		t.Errorf("condition %v", cond)
	}

	// discovery: legacy and aggregated
	wantLines(t, s.must(t, "api-resources", "--api-group", "wardle.example.com"),
		`^NAME\s+SHORTNAMES\s+APIVERSION\s+NAMESPACED\s+KIND$`, `^fischers\s+wardle\.example\.com/v1alpha1\s+false\s+Fischer$`, `^flunders\s+wardle\.example\.com/v1alpha1\s+true\s+Flunder$`)
	if out := s.must(t, "get", "--raw", "/apis"); !strings.Contains(out, `{"name":"wardle.example.com","versions":[{"groupVersion":"wardle.example.com/v1alpha1","version":"v1alpha1"}]`) {
		t.Errorf("legacy /apis: %s", out)
	}

	// OpenAPI v3: kubectl explain reads the backend's document through
	// crdplane's index
	wantLines(t, s.must(t, "explain", "flunders.spec"), `^GROUP:\s+wardle\.example\.com$`, `^KIND:\s+Flunder$`, `^VERSION:\s+v1alpha1$`, `^FIELD:\s+spec\s+<`)
	// OpenAPI v2: the backend's paths and definitions merged into crdplane's
	// document (as JSON; and in protobuf, kubectl's encoding, through
	// kubectl 1.27's explain --output=plaintext-openapiv2)
	v2 := s.must(t, "get", "--raw", "/openapi/v2")
	for _, want := range []string{`"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders/{name}"`, `wardle.v1alpha1.Flunder":{`, `"/apis/apiextensions.k8s.io/v1/customresourcedefinitions"`} {
		if !strings.Contains(v2, want) {
			t.Errorf("/openapi/v2 has no %s", want)
		}
	}
	wantLines(t, s.must(t, "explain", "flunders.spec", "--output=plaintext-openapiv2"), `^KIND:\s+Flunder$`, `^VERSION:\s+wardle\.example\.com/v1alpha1$`)

	// create, get, watch, delete through crdplane
	flunder := func(name string) string {
		return "apiVersion: wardle.example.com/v1alpha1\nkind: Flunder\nmetadata:\n  name: " + name + "\n  namespace: default\nspec:\n  reference: ref\n"
	}
	s.mustIn(t, flunder("my-first-flunder"), "create", "-f", "-")
	wantLines(t, s.must(t, "get", "flunders", "-n", "default"), `^NAME\s+CREATED AT$`, `^my-first-flunder\s+\d{4}-\d\d-\d\dT\S+$`)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	watch := exec.CommandContext(ctx, kubectlBinary(), "--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir, "get", "flunders", "-n", "default", "--watch", "--output-watch-events")
	var watchErr bytes.Buffer
	watch.Stderr = &watchErr
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	waitLine := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("watch ended before %q (lines %q); kubectl: %s", want, seen, watchErr.String())
				}
				seen = append(seen, l)
				// the table's EVENT and NAME columns
				if f := strings.Fields(l); len(f) >= 2 && f[0]+" "+f[1] == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no watch event %q (lines %q); kubectl: %s", want, seen, watchErr.String())
			}
		}
	}
	waitLine("ADDED my-first-flunder")
	s.mustIn(t, flunder("my-second-flunder"), "create", "-f", "-")
	waitLine("ADDED my-second-flunder")
	s.must(t, "delete", "flunder", "my-second-flunder", "-n", "default")
	waitLine("DELETED my-second-flunder")
	cancel()
	_ = watch.Wait()

	// RBAC: bob may not list flunders (crdplane's 403); alice, bound to a
	// Role, may, and the sample-apiserver's SubjectAccessReview to
	// crdplane agrees
	s.must(t, "create", "role", "flunder-reader", "-n", "default", "--verb=get,list,watch", "--resource=flunders.wardle.example.com")
	s.must(t, "create", "rolebinding", "alice-reads-flunders", "-n", "default", "--role=flunder-reader", "--user=alice")
	alice := s.as(t, "alice", &clientcmdapi.AuthInfo{Token: "alice-token"})
	bob := s.as(t, "bob", &clientcmdapi.AuthInfo{Token: "bob-token"})
	if errOut := bob.fails(t, "get", "flunders", "-n", "default"); !strings.Contains(errOut,
		`Error from server (Forbidden): flunders.wardle.example.com is forbidden: User "bob" cannot list resource "flunders" in API group "wardle.example.com" in the namespace "default"`) {
		t.Errorf("bob: %s", errOut)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, errOut, err := alice.kubectl(t, "", "get", "flunders", "-n", "default")
		if err == nil {
			wantLines(t, out, `^NAME\s+CREATED AT$`, `^my-first-flunder\s+\d{4}-\d\d-\d\dT\S+$`)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice never allowed: %s %s %v", out, errOut, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if errOut := alice.fails(t, "delete", "flunder", "my-first-flunder", "-n", "default"); !strings.Contains(errOut, `User "alice" cannot delete resource "flunders" in API group "wardle.example.com" in the namespace "default"`) {
		t.Errorf("alice delete: %s", errOut)
	}
	s.must(t, "delete", "flunder", "my-first-flunder", "-n", "default")

	// a caBundle that does not sign the backend's certificate: the proxy
	// refuses the backend (503, upstream's message); the availability check
	// does not verify certificates (upstream's), so the APIService stays
	// Available
	s.mustIn(t, a.apiService(otherCA(t, a.pki)), "apply", "-f", "-")
	deadline = time.Now().Add(15 * time.Second)
	for {
		code, ct, body := rawAdmin(t, s, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders")
		if code == http.StatusServiceUnavailable {
			if ct != "text/plain; charset=utf-8" || body != "error trying to reach service: tls: failed to verify certificate: x509: certificate signed by unknown authority\n" {
				t.Errorf("wrong caBundle: %s %q", ct, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("wrong caBundle still served: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	a.waitAvailable(t, "True")
	s.mustIn(t, a.apiService(a.pki.CACertPEM), "apply", "-f", "-")

	// the backend stops: Available=False, FailedDiscoveryCheck; 503
	a.wardle.stop()
	out = a.waitAvailable(t, "False (FailedDiscoveryCheck)")
	wantLines(t, out, `^NAME\s+SERVICE\s+AVAILABLE\s+AGE$`, `^v1alpha1\.wardle\.example\.com\s+wardle/api\s+False \(FailedDiscoveryCheck\)\s+\S+$`)
	cond = getJSON(t, s, "apiservice", "v1alpha1.wardle.example.com")["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	wantMsg := fmt.Sprintf(`failing or missing response from https://%[1]s/apis/wardle.example.com/v1alpha1: Get "https://%[1]s/apis/wardle.example.com/v1alpha1": dial tcp %[1]s: connect: connection refused`, a.wardle.addr)
	if cond["status"] != "False" || cond["message"] != wantMsg {
		t.Errorf("condition %v, want message %q", cond, wantMsg)
	}
	code, ct, body := rawAdmin(t, s, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders")
	if code != http.StatusServiceUnavailable || ct != "text/plain; charset=utf-8" || body != "service unavailable\n" {
		t.Errorf("stopped backend: %d %s %q", code, ct, body)
	}
	if errOut := s.fails(t, "get", "flunders", "-n", "default"); !strings.Contains(errOut, "the server is currently unable to handle the request") {
		t.Errorf("kubectl with the backend stopped: %s", errOut)
	}
	// back: Available again
	a.wardle = a.start()
	a.waitAvailable(t, "True")
	s.must(t, "delete", "apiservice", "v1alpha1.wardle.example.com")
}

// TestAggregatorLatency measures the proxy's overhead (CRDPLANE_BENCH=1):
// N GETs of one flunder through crdplane and directly, interleaved, and
// their medians.
func TestAggregatorLatency(t *testing.T) {
	if os.Getenv("CRDPLANE_BENCH") == "" {
		t.Skip("set CRDPLANE_BENCH=1 (make bench-aggregator)")
	}
	a := startAggregation(t)
	s := a.s
	s.mustIn(t, a.apiService(a.pki.CACertPEM), "apply", "-f", "-")
	a.waitAvailable(t, "True")
	s.mustIn(t, "apiVersion: wardle.example.com/v1alpha1\nkind: Flunder\nmetadata:\n  name: bench\n  namespace: default\n", "create", "-f", "-")

	kc := loadKubeconfig(t, s)
	roots := x509.NewCertPool()
	var token string
	for _, c := range kc.Clusters {
		roots.AppendCertsFromPEM(c.CertificateAuthorityData)
	}
	for _, ai := range kc.AuthInfos {
		token = ai.Token
	}
	via := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	wroots := x509.NewCertPool()
	wroots.AppendCertsFromPEM(a.pki.CACertPEM)
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: wroots, ServerName: "api.wardle.svc", Certificates: []tls.Certificate{a.proxyCrt}}}}
	path := "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/bench"
	get := func(c *http.Client, u string, hdr map[string]string) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Accept", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", u, resp.StatusCode)
		}
		return d
	}
	viaHdr := map[string]string{"Authorization": "Bearer " + token}
	// upstream's aggregator in the same run: kube-apiserver v1.33 in front
	// of the same sample-apiserver, with the same proxy client certificate
	var kas string
	var viaKAS *http.Client
	if os.Getenv("KUBE_APISERVER_BIN") != "" {
		var kasCA []byte
		kas, kasCA = a.kubeAPIServerFront(t)
		kroots := x509.NewCertPool()
		kroots.AppendCertsFromPEM(kasCA)
		viaKAS = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: kroots}}}
	}
	kasHdr := map[string]string{"Authorization": "Bearer admin-token"}
	directHdr := map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
	n := 2000
	if v := os.Getenv("CRDPLANE_BENCH_N"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	for range 100 { // warm up: connections, the SubjectAccessReview cache
		get(via, s.URL+path, viaHdr)
		get(direct, "https://"+a.wardle.addr+path, directHdr)
		if kas != "" {
			get(viaKAS, kas+path, kasHdr)
		}
	}
	// for scale: a GET crdplane serves itself (a Namespace, through its
	// edge, the registry and storage)
	if kas != "" {
		// the proxied answer's headers are kube-apiserver's: the backend's
		// with the front's Audit-Id and Cache-Control beside its own
		shape := func(c *http.Client, u string, hdr map[string]string) string {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("Accept", "application/json")
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			var out []string
			for k, v := range resp.Header {
				if k == "Date" || k == "Audit-Id" {
					out = append(out, fmt.Sprintf("%s×%d", k, len(v)))
					continue
				}
				out = append(out, k+"="+strings.Join(v, "|"))
			}
			sort.Strings(out)
			return strings.Join(out, "\n")
		}
		if ours, theirs := shape(via, s.URL+path, viaHdr), shape(viaKAS, kas+path, kasHdr); ours != theirs {
			t.Errorf("proxied headers:\n%s\nkube-apiserver's:\n%s", ours, theirs)
		}
	}
	nsPath := "/api/v1/namespaces/default"
	get(via, s.URL+nsPath, viaHdr)
	var dv, dd, dn, dk []time.Duration
	for range n {
		dv = append(dv, get(via, s.URL+path, viaHdr))
		dd = append(dd, get(direct, "https://"+a.wardle.addr+path, directHdr))
		dn = append(dn, get(via, s.URL+nsPath, viaHdr))
		if kas != "" {
			dk = append(dk, get(viaKAS, kas+path, kasHdr))
		}
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	p90 := func(d []time.Duration) time.Duration { return d[len(d)*9/10] }
	mv, md, mn := med(dv), med(dd), med(dn)
	t.Logf("GET flunder, %d each, interleaved: through crdplane p50 %v p90 %v; direct p50 %v p90 %v; overhead p50 %v; crdplane's own GET of a Namespace p50 %v p90 %v",
		n, mv, p90(dv), md, p90(dd), mv-md, mn, p90(dn))
	fmt.Printf("aggregator GET p50: via crdplane %v, direct %v, overhead %v (a Namespace GET served by crdplane itself: %v)\n", mv, md, mv-md, mn)
	if kas != "" {
		mk := med(dk)
		t.Logf("through kube-apiserver v1.33 p50 %v p90 %v; its overhead p50 %v", mk, p90(dk), mk-md)
		fmt.Printf("aggregator GET p50: via kube-apiserver %v, overhead %v; crdplane's overhead %v\n", mk, mk-md, mv-md)
	}
}

// kubeAPIServerFront runs kube-apiserver with the aggregation's proxy
// client certificate and registers the sample-apiserver there as
// v1alpha1.wardle.example.com, behind an ExternalName Service wardle/api
// (localhost, the sample-apiserver's port), and waits until it is
// Available; it returns kube-apiserver's URL and CA. Its admin is
// "admin-token".
func (a *aggregation) kubeAPIServerFront(t *testing.T) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	url := startKubeAPIServer(t, kubeAPIServer{dir: dir, servingCert: pki.ServingCertPEM, servingKey: pki.ServingKeyPEM,
		tokens: "admin-token,admin,1000,\"system:masters\"\n",
		extra:  []string{"--proxy-client-cert-file", write("proxy.crt", a.proxyCrtPEM), "--proxy-client-key-file", write("proxy.key", a.proxyKeyPEM)}})
	admin := &server{URL: url, Kubeconfig: writeKubeconfig(t, filepath.Join(dir, "admin.kubeconfig"), url, pki.CACertPEM, "admin-token"), cacheDir: filepath.Join(dir, "cache")}
	admin.mustIn(t, fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: wardle}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: wardle}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{port: %[1]d}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.wardle.example.com
spec:
  group: wardle.example.com
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: wardle, name: api, port: %[1]d}
  caBundle: %[2]s
`, a.port, base64.StdEncoding.EncodeToString(a.pki.CACertPEM)), "apply", "-f", "-")
	admin.must(t, "wait", "--for", "condition=Available", "--timeout", "90s", "apiservice/v1alpha1.wardle.example.com")
	return url, pki.CACertPEM
}

func loadKubeconfig(t *testing.T, s *server) *clientcmdapi.Config {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// otherCA is a CA certificate that did not sign pki's serving certificate,
// with another subject (localpki names a CA by the second it was made; a
// CA of the same name would make Go's verifier explain the failure with
// the candidate it tried).
func otherCA(t *testing.T, pki *localpki.PKI) []byte {
	t.Helper()
	subject := func(p []byte) string {
		blk, _ := pem.Decode(p)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c.Subject.String()
	}
	for {
		other, err := localpki.Generate([]string{"api.wardle.svc"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if subject(other.CACertPEM) != subject(pki.CACertPEM) {
			return other.CACertPEM
		}
		time.Sleep(time.Second)
	}
}
