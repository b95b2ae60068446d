package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// kubeAPIServerBinary is upstream's kube-apiserver v1.33 built from the
// library (e2e/kubeapiserver, make's $(KUBE_APISERVER_BIN)):
// $KUBE_APISERVER_BIN, else ../bin/kube-apiserver; without it the test is
// skipped (make test-e2e always builds it).
func kubeAPIServerBinary(t *testing.T) string {
	t.Helper()
	b := os.Getenv("KUBE_APISERVER_BIN")
	if b == "" {
		b = filepath.Join("..", "bin", "kube-apiserver")
	}
	if _, err := os.Stat(b); err != nil {
		t.Skipf("no kube-apiserver at %s (make test-e2e builds it: make bin/kube-apiserver): %v", b, err)
	}
	return b
}

// extensionEnv is a front kube-apiserver (on its own embedded etcd) and
// crdplane behind it as an extension API server serving
// stable.example.com/v1, registered as an APIService.
type extensionEnv struct {
	dir string
	// front is kube-apiserver's URL and CA; frontAs are kubectl clients of
	// it (admin in system:masters, alice, bob).
	front   string
	frontCA []byte
	frontAs map[string]*server
	// crdplane is crdplane's URL and serving CA (the APIService's
	// caBundle); crdplaneAs are kubectl clients of crdplane directly with
	// the front's tokens.
	crdplane   *server
	crdplaneCA []byte
	crdplaneAs map[string]*server
	// metrics is crdplane's --ops-listen URL; auditLog its audit log
	// (every request at level Metadata).
	metrics  string
	auditLog string
	// clientCA signs the front's client certificates (--client-ca-file),
	// proxyCA the front proxy's (--requestheader-client-ca-file).
	clientCA, proxyCA  *localpki.PKI
	proxyCrt, proxyKey []byte
}

// The front's users (--token-auth-file): crdplane is the extension
// server's own identity at the front (system:auth-delegator and the
// extension-apiserver-authentication-reader Role, as the "Set up an
// Extension API Server" task binds them).
var extensionTokens = map[string]string{"admin": "admin-token", "alice": "alice-token", "bob": "bob-token", "crdplane": "crdplane-token"}

// startEmbeddedEtcd runs an etcd for the front on loopback.
func startEmbeddedEtcd(t *testing.T, dir string) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	client, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freeTCPPort(t)))
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", freeTCPPort(t)))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("etcd did not start")
	}
	return client.String()
}

// writeKubeconfig writes a kubeconfig for server (verified with ca) and a
// bearer token.
func writeKubeconfig(t *testing.T, path, server string, ca []byte, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "default"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceAccountKey is a signing key for the front's service account
// tokens (SEC1) and its public key (PKIX).
func serviceAccountKey(t *testing.T) (private, public []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
}

// startExtensionEnv starts the front, crdplane behind it (delegated
// authentication and authorization through --authentication-kubeconfig
// and --authorization-kubeconfig, nothing else), the RBAC of the task
// pages on the front, the CronTab CRD created on crdplane directly and
// the APIService v1.stable.example.com, and waits until it is Available.
// With endpointIP set, the front runs with --enable-aggregator-routing and
// reaches crdplane, listening on that (non-loopback) address, through a
// selector-less ClusterIP Service and its Endpoints; otherwise through an
// ExternalName Service naming localhost.
func startExtensionEnv(t *testing.T, endpointIP string) *extensionEnv {
	t.Helper()
	env := &extensionEnv{dir: t.TempDir(), frontAs: map[string]*server{}, crdplaneAs: map[string]*server{}}
	write := func(name string, data []byte) string {
		p := filepath.Join(env.dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now().Add(-time.Minute)
	frontPKI, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	env.frontCA = frontPKI.CACertPEM
	env.clientCA, env.proxyCA = newCA(t), newCA(t)
	env.proxyCrt, env.proxyKey = issue(t, env.proxyCA, "front-proxy-client", nil, now, time.Hour)
	var tokens strings.Builder
	for i, u := range []string{"admin", "alice", "bob", "crdplane"} {
		groups := ""
		if u == "admin" {
			groups = `,"system:masters"`
		}
		fmt.Fprintf(&tokens, "%s,%s,%d%s\n", extensionTokens[u], u, 1000+i, groups)
	}
	env.front = startKubeAPIServer(t, kubeAPIServer{dir: env.dir, servingCert: frontPKI.ServingCertPEM, servingKey: frontPKI.ServingKeyPEM, tokens: tokens.String(),
		extra: []string{
			"--client-ca-file", write("client-ca.crt", env.clientCA.CACertPEM),
			"--requestheader-client-ca-file", write("proxy-ca.crt", env.proxyCA.CACertPEM),
			"--requestheader-allowed-names", "front-proxy-client",
			"--requestheader-username-headers", "X-Remote-User",
			"--requestheader-group-headers", "X-Remote-Group",
			"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
			"--proxy-client-cert-file", write("proxy.crt", env.proxyCrt), "--proxy-client-key-file", write("proxy.key", env.proxyKey),
			"--enable-aggregator-routing=" + strconv.FormatBool(endpointIP != ""),
		}})
	for _, u := range []string{"admin", "alice", "bob"} {
		env.frontAs[u] = &server{URL: env.front, Kubeconfig: writeKubeconfig(t, filepath.Join(env.dir, "front-"+u+".kubeconfig"), env.front, env.frontCA, extensionTokens[u]),
			cacheDir: filepath.Join(env.dir, "cache-front-"+u)}
	}
	admin := env.frontAs["admin"]

	// The front's RBAC: crdplane may review tokens and access, and read
	// the ConfigMap (the task page's two bindings); alice edits CronTabs
	// in default; bob's binding names a ClusterRole that does not exist
	// (the front's RBAC then gives a reason with its denial).
	admin.mustIn(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: crdplane:system:auth-delegator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:auth-delegator}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: crdplane}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: crdplane-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: crdplane}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: crontab-editor}
rules: [{apiGroups: [stable.example.com], resources: [crontabs], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-crontabs, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: crontab-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-crontabs, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: crontab-admin-missing}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
`, "apply", "-f", "-")

	// crdplane as an extension API server: the front's kubeconfig for
	// crdplane's own identity, nothing else about the front.
	crdplaneKC := writeKubeconfig(t, filepath.Join(env.dir, "crdplane-to-front.kubeconfig"), env.front, env.frontCA, extensionTokens["crdplane"])
	env.metrics = "http://" + freeAddr(t)
	env.auditLog = filepath.Join(env.dir, "crdplane-audit.log")
	listen, hosts := "127.0.0.1:0", "crdplane.default.svc"
	if endpointIP != "" {
		listen, hosts = net.JoinHostPort(endpointIP, "0"), hosts+","+endpointIP
	}
	env.crdplane = startServer(t, "",
		"--listen", listen,
		"--hosts", hosts,
		"--authentication-kubeconfig", crdplaneKC,
		"--authorization-kubeconfig", crdplaneKC,
		"--authorization-mode", "Webhook",
		"--audit-policy-file", write("audit-policy.yaml", []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules: [{level: Metadata}]\n")),
		"--audit-log-path", env.auditLog,
		"--ops-listen", strings.TrimPrefix(env.metrics, "http://"))
	kc, err := clientcmd.LoadFromFile(env.crdplane.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		env.crdplaneCA = c.CertificateAuthorityData
	}
	for _, u := range []string{"admin", "alice", "bob"} {
		env.crdplaneAs[u] = &server{URL: env.crdplane.URL, Kubeconfig: writeKubeconfig(t, filepath.Join(env.dir, "crdplane-"+u+".kubeconfig"), env.crdplane.URL, env.crdplaneCA, extensionTokens[u]),
			cacheDir: filepath.Join(env.dir, "cache-crdplane-"+u)}
	}

	// The CRD goes to crdplane directly (the front serves
	// apiextensions.k8s.io itself), with the front's admin token: crdplane
	// reviews it at the front (TokenReview), system:masters is allowed.
	env.crdplaneAs["admin"].must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	waitEstablished(t, env.crdplaneAs["admin"], "crontabs.stable.example.com", 60*time.Second)

	// The APIService's Service: an ExternalName naming crdplane's host
	// (kube-apiserver dials <externalName>:<APIService port> and verifies
	// crdplane's certificate for crdplane.default.svc with the caBundle).
	crdplanePort := env.crdplane.URL[strings.LastIndex(env.crdplane.URL, ":")+1:]
	service := `apiVersion: v1
kind: Service
metadata: {name: crdplane, namespace: default}
spec: {type: ExternalName, externalName: localhost}
`
	if endpointIP != "" {
		service = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: crdplane, namespace: default}
spec:
  ports: [{name: https, port: 443, targetPort: %[2]s}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: crdplane, namespace: default}
subsets: [{addresses: [{ip: %[1]s}], ports: [{name: https, port: %[2]s}]}]
`, endpointIP, crdplanePort)
		crdplanePort = "443"
	}
	admin.mustIn(t, service+fmt.Sprintf(`---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.stable.example.com}
spec:
  group: stable.example.com
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {namespace: default, name: crdplane, port: %s}
  caBundle: %s
`, crdplanePort, base64.StdEncoding.EncodeToString(env.crdplaneCA)), "apply", "-f", "-")
	waitFor(t, "APIService v1.stable.example.com Available", 90*time.Second, func() bool {
		out, _, _ := admin.kubectl(t, "", "get", "apiservice", "v1.stable.example.com", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return out == "True"
	})
	return env
}

// waitFor polls cond every 200ms for d.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// raw sends one request to base+path with a bearer token (empty: none), a
// client certificate (nil: none) and extra headers; the answer's code and
// body.
func (env *extensionEnv) raw(t *testing.T, base, method, path, token string, cert *tls.Certificate, hdr http.Header) (int, string) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(env.frontCA)
	roots.AppendCertsFromPEM(env.crdplaneCA)
	tc := &tls.Config{RootCAs: roots}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var body io.Reader
	if b := hdr.Get("X-Test-Body"); b != "" {
		body = strings.NewReader(b)
		hdr = hdr.Clone()
		hdr.Del("X-Test-Body")
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, hdr)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// statusMessage is the message of a Status body.
func statusMessage(t *testing.T, body string) string {
	t.Helper()
	var st struct{ Message string }
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Errorf("not a Status: %q", body)
	}
	return st.Message
}

func keyPair(t *testing.T, crt, key []byte) *tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestExtensionAPIServer runs crdplane as an extension API server behind
// upstream's kube-apiserver v1.33 (issue 16 item 6) and drives it with
// kubectl 1.33 through the front: the APIService is Available, alice
// (allowed by the front's RBAC) lists, creates, watches and deletes
// CronTabs through the front, bob is refused, and kubectl auth can-i
// answers; crdplane's own decisions are the front's (delegated
// TokenReview and SubjectAccessReview): bob's 403 from crdplane is the
// front's 403 byte for byte; front proxy headers from a client that is
// not the front proxy are ignored.
func TestExtensionAPIServer(t *testing.T) {
	env := startExtensionEnv(t, "")
	alice, bob := env.frontAs["alice"], env.frontAs["bob"]

	// Discovery through the front names crdplane's group.
	out := alice.must(t, "api-resources", "--api-group", "stable.example.com")
	wantLines(t, out, `^crontabs\s+ct\s+stable.example.com/v1\s+true\s+CronTab$`)

	// alice, through the front: list, create, get, watch, delete.
	if out, errOut, err := alice.kubectl(t, "", "get", "crontabs"); err != nil || !strings.Contains(errOut, "No resources found in default namespace.") {
		t.Fatalf("get crontabs: %v %q %q", err, out, errOut)
	}
	wantLines(t, alice.must(t, "create", "-f", testdata("crontab-valid.yaml")), `^crontab.stable.example.com/my-new-cron-object created$`)
	wantLines(t, alice.must(t, "get", "crontabs"), `^NAME\s+AGE$`, `^my-new-cron-object\s+\S+$`)
	got := alice.must(t, "get", "crontab", "my-new-cron-object", "-o", "jsonpath={.spec.image} {.metadata.uid}")
	image, uid, _ := strings.Cut(got, " ")
	if image != "my-awesome-cron-image" || uid == "" {
		t.Fatalf("get through the front: %q", got)
	}
	// The object is crdplane's: the same uid read on crdplane directly.
	if direct := env.crdplaneAs["alice"].must(t, "get", "crontab", "my-new-cron-object", "-o", "jsonpath={.metadata.uid}"); direct != uid {
		t.Fatalf("uid through the front %q, on crdplane %q", uid, direct)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	watch := exec.CommandContext(ctx, kubectlBinary(), "--kubeconfig", alice.Kubeconfig, "--cache-dir", alice.cacheDir,
		"get", "crontabs", "--watch", "--output-watch-events", "-o", "custom-columns=EVENT:.type,NAME:.object.metadata.name", "--no-headers")
	var watchOut syncBuffer
	watch.Stdout, watch.Stderr = &watchOut, &watchOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the watch's initial ADDED", 60*time.Second, func() bool { return strings.Contains(watchOut.String(), "my-new-cron-object") })
	alice.mustIn(t, `apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: watched}
spec: {cronSpec: "* * * * */1", image: watched-image, replicas: 1}
`, "create", "-f", "-")
	waitFor(t, "the watch's ADDED of the new CronTab", 60*time.Second, func() bool {
		return slices.ContainsFunc(strings.Split(watchOut.String(), "\n"), func(l string) bool { return strings.Join(strings.Fields(l), " ") == "ADDED watched" })
	})
	alice.must(t, "delete", "crontab", "watched")
	waitFor(t, "the watch's DELETED", 60*time.Second, func() bool {
		return slices.ContainsFunc(strings.Split(watchOut.String(), "\n"), func(l string) bool { return strings.Join(strings.Fields(l), " ") == "DELETED watched" })
	})
	cancel()
	_ = watch.Wait()

	// bob through the front: the front's RBAC refuses him.
	wantMsg := `crontabs.stable.example.com is forbidden: User "bob" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default": RBAC: clusterrole.rbac.authorization.k8s.io "crontab-admin-missing" not found`
	if errOut := bob.fails(t, "get", "crontabs"); !strings.Contains(errOut, "Error from server (Forbidden): "+wantMsg) {
		t.Errorf("bob through the front: %s", errOut)
	}
	// The front decided: bob's request never reached crdplane (its audit
	// log, written before each response completes, has alice's requests
	// through the front and none of bob's), as upstream's aggregator
	// authorizes before it proxies.
	bobEvents := func() (bob, alice int) {
		for _, e := range readAuditLog(t, env.auditLog) {
			if e.ObjectRef != nil && e.ObjectRef.Resource == "crontabs" {
				switch e.User.Username {
				case "bob":
					bob++
				case "alice":
					alice++
				}
			}
		}
		return bob, alice
	}
	if b, a := bobEvents(); b != 0 || a == 0 {
		t.Errorf("crdplane's audit log after bob's denial at the front: %d events of bob's (want none), %d of alice's", b, a)
	}
	// bob on crdplane directly: crdplane reviews his token at the front
	// and asks the front (SubjectAccessReview), whose denial and reason
	// it answers with, byte for byte the front's own 403.
	const list = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	frontCode, frontBody := env.raw(t, env.front, "GET", list, "bob-token", nil, nil)
	code, body := env.raw(t, env.crdplane.URL, "GET", list, "bob-token", nil, nil)
	if code != http.StatusForbidden || frontCode != http.StatusForbidden || body != frontBody || statusMessage(t, body) != wantMsg {
		t.Errorf("bob: crdplane %d %q\nfront %d %q", code, body, frontCode, frontBody)
	}
	if errOut := env.crdplaneAs["bob"].fails(t, "get", "crontabs"); !strings.Contains(errOut, "Error from server (Forbidden): "+wantMsg) {
		t.Errorf("bob on crdplane: %s", errOut)
	}
	// Sent to crdplane directly, bob's requests are crdplane's to refuse,
	// and its log has them.
	if b, _ := bobEvents(); b < 2 {
		t.Errorf("crdplane's audit log after bob's direct requests: %d events of bob's", b)
	}
	// A token the front does not know: 401 from crdplane as from the front.
	frontCode, frontBody = env.raw(t, env.front, "GET", list, "nobody-token", nil, nil)
	if code, body := env.raw(t, env.crdplane.URL, "GET", list, "nobody-token", nil, nil); code != http.StatusUnauthorized || code != frontCode || body != frontBody {
		t.Errorf("unknown token: crdplane %d %s, front %d %s", code, body, frontCode, frontBody)
	}

	// kubectl auth can-i, through the front.
	if out := strings.TrimSpace(alice.must(t, "auth", "can-i", "create", "crontabs.stable.example.com")); out != "yes" {
		t.Errorf("alice can-i create crontabs: %q", out)
	}
	// (kubectl prints the front's reason after "no").
	if out, _, err := bob.kubectl(t, "", "auth", "can-i", "list", "crontabs.stable.example.com"); err == nil || strings.TrimSpace(out) != `no - RBAC: clusterrole.rbac.authorization.k8s.io "crontab-admin-missing" not found` {
		t.Errorf("bob can-i list crontabs: %q %v", out, err)
	}

	// Front proxy headers sent to crdplane directly by a client that is
	// not the front proxy count for nothing.
	masters := http.Header{"X-Remote-User": {"admin"}, "X-Remote-Group": {"system:masters"}}
	carolCrt, carolKey := issue(t, env.clientCA, "carol", []string{"qa"}, time.Now().Add(-time.Minute), time.Hour)
	otherCrt, otherKey := issue(t, env.proxyCA, "not-the-front-proxy", nil, time.Now().Add(-time.Minute), time.Hour)
	carolMsg := `crontabs.stable.example.com is forbidden: User "carol" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default"`
	for _, tc := range []struct {
		name  string
		cert  *tls.Certificate
		code  int
		inMsg string
	}{
		// No credentials but the headers: Unauthorized.
		{"headers alone", nil, http.StatusUnauthorized, `"reason":"Unauthorized"`},
		// A client certificate of the front's client CA (read from the
		// front's ConfigMap): carol, not the headers' admin.
		{"client certificate and headers", keyPair(t, carolCrt, carolKey), http.StatusForbidden, carolMsg},
		// The front proxy's CA but not an allowed name: Unauthorized.
		{"front proxy CA, another name", keyPair(t, otherCrt, otherKey), http.StatusUnauthorized, `"reason":"Unauthorized"`},
		// The front proxy's own certificate: the headers count.
		{"the front proxy", keyPair(t, env.proxyCrt, env.proxyKey), http.StatusOK, `"kind":"CronTabList"`},
	} {
		code, body := env.raw(t, env.crdplane.URL, "GET", list, "", tc.cert, masters)
		if code != tc.code || !strings.Contains(body, tc.inMsg) && statusMessage(t, body) != tc.inMsg {
			t.Errorf("%s: %d %s", tc.name, code, body)
		}
	}

	// Delete through the front; gone on crdplane.
	wantLines(t, alice.must(t, "delete", "crontab", "my-new-cron-object"), `^crontab.stable.example.com "my-new-cron-object" deleted$`)
	if errOut := env.crdplaneAs["admin"].fails(t, "get", "crontab", "my-new-cron-object"); !strings.Contains(errOut, `crontabs.stable.example.com "my-new-cron-object" not found`) {
		t.Errorf("after the delete: %s", errOut)
	}

	env.selfSubjectReviews(t)
	env.latency(t)
}

// selfSubjectReviews: crdplane's SelfSubjectReview (kubectl auth whoami)
// answers as the front kube-apiserver's, byte for byte but the time: for
// bob, whose token the front reviews for crdplane too; for a GET (405);
// and for a body of another kind (400).
func (env *extensionEnv) selfSubjectReviews(t *testing.T) {
	t.Helper()
	const path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	stamp := regexp.MustCompile(`"creationTimestamp":"[^"]+"`)
	for _, tc := range []struct{ name, method, body string }{
		{"review", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview","status":{"userInfo":{"username":"mallory"}}}`},
		{"list", http.MethodGet, ""},
		{"another kind", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"x"}}`},
		{"no kind", http.MethodPost, `{"status":{}}`},
	} {
		var hdr http.Header
		if tc.body != "" {
			hdr = http.Header{"Content-Type": {"application/json"}, "X-Test-Body": {tc.body}}
		}
		frontCode, frontBody := env.raw(t, env.front, tc.method, path, "bob-token", nil, hdr)
		code, body := env.raw(t, env.crdplane.URL, tc.method, path, "bob-token", nil, hdr)
		frontBody, body = stamp.ReplaceAllString(frontBody, `"creationTimestamp":"T"`), stamp.ReplaceAllString(body, `"creationTimestamp":"T"`)
		if code != frontCode || body != frontBody {
			t.Errorf("SelfSubjectReview %s: crdplane %d %s\nfront %d %s", tc.name, code, body, frontCode, frontBody)
		}
	}
}

// kubeAPIServer configures startKubeAPIServer: a directory of its own,
// the serving certificate (for 127.0.0.1), a --token-auth-file's lines,
// and more flags.
type kubeAPIServer struct {
	dir                     string
	servingCert, servingKey []byte
	tokens                  string
	extra                   []string
}

// startKubeAPIServer runs upstream's kube-apiserver (RBAC, its own
// embedded etcd, priority and fairness off) on a free loopback port until
// t ends, and returns its URL once /readyz answers 200 to the token
// "admin-token", which cfg.tokens must hold.
func startKubeAPIServer(t *testing.T, cfg kubeAPIServer) string {
	t.Helper()
	kas := kubeAPIServerBinary(t)
	write := func(name string, data []byte) string {
		p := filepath.Join(cfg.dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saPriv, saPub := serviceAccountKey(t)
	saKey, saPubFile := write("sa.key", saPriv), write("sa.pub", saPub)
	etcdURL := startEmbeddedEtcd(t, filepath.Join(cfg.dir, "front-etcd"))
	port := freeTCPPort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	_, logs, done := runProcess(t, "kube-apiserver", kas, 30*time.Second, append([]string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--advertise-address", "127.0.0.1", "--endpoint-reconciler-type", "none",
		"--tls-cert-file", write("front.crt", cfg.servingCert), "--tls-private-key-file", write("front.key", cfg.servingKey),
		"--token-auth-file", write("tokens.csv", []byte(cfg.tokens)),
		"--authorization-mode", "RBAC",
		"--service-account-key-file", saPubFile, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}, cfg.extra...)...)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.servingCert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	waitFor(t, "kube-apiserver /readyz", 120*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("kube-apiserver exited: %s", tail(logs.String(), 4000))
		default:
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer admin-token")
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

// TestExtensionAPIServerEndpoints: the front with
// --enable-aggregator-routing reaches crdplane through a selector-less
// ClusterIP Service and its Endpoints (on the machine's first non-loopback
// IPv4 address: Endpoints may not be loopback); alice lists, creates and
// gets a CronTab through it.
func TestExtensionAPIServerEndpoints(t *testing.T) {
	ip := nonLoopbackIPv4(t)
	env := startExtensionEnv(t, ip)
	alice := env.frontAs["alice"]
	wantLines(t, alice.must(t, "create", "-f", testdata("crontab-valid.yaml")), `^crontab.stable.example.com/my-new-cron-object created$`)
	wantLines(t, alice.must(t, "get", "crontabs"), `^NAME\s+AGE$`, `^my-new-cron-object\s+\S+$`)
	if out := env.crdplaneAs["admin"].must(t, "get", "crontab", "my-new-cron-object", "-o", "jsonpath={.spec.image}"); out != "my-awesome-cron-image" {
		t.Errorf("on crdplane: %q", out)
	}
}

func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine (Endpoints may not be loopback)")
	return ""
}

// latency times CR GETs (BENCHMARKS.md, issue 16): alice's GET of one
// CronTab through the front and on crdplane directly, and on crdplane the
// delegated SubjectAccessReview's cache: GETs of names never asked before
// (each a review at the front, counted by crdplane's
// crdplane_gateway_authorization_webhook_requests_total) against GETs of
// one name (answered from the cache). Medians of CRDPLANE_EXT_BENCH_N
// requests (default 30) each, one keep-alive client per server.
func (env *extensionEnv) latency(t *testing.T) {
	n := 30
	if v, err := strconv.Atoi(os.Getenv("CRDPLANE_EXT_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	env.frontAs["alice"].mustIn(t, `apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: timed}
spec: {cronSpec: "* * * * */1", image: timed-image, replicas: 1}
`, "create", "-f", "-")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(env.frontCA)
	roots.AppendCertsFromPEM(env.crdplaneCA)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	const base = "/apis/stable.example.com/v1/namespaces/default/crontabs/"
	median := func(what, server string, wantCode int, path func(int) string) time.Duration {
		t.Helper()
		get := func(i int) time.Duration {
			req, err := http.NewRequestWithContext(t.Context(), "GET", server+path(i), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer alice-token")
			req.Header.Set("Accept", "application/json")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			d := time.Since(start)
			if resp.StatusCode != wantCode {
				t.Fatalf("%s: GET %s: %d, want %d", what, path(i), resp.StatusCode, wantCode)
			}
			return d
		}
		get(-1) // the connection, and the caches for the fixed paths
		ds := make([]time.Duration, n)
		for i := range ds {
			ds[i] = get(i)
		}
		slices.Sort(ds)
		m := ds[n/2]
		t.Logf("latency %-44s median %8.3f ms (min %.3f, max %.3f, n=%d)", what, ms(m), ms(ds[0]), ms(ds[n-1]), n)
		return m
	}
	same := func(name string) func(int) string { return func(int) string { return base + name } }
	front := median("GET CronTab through the front", env.front, http.StatusOK, same("timed"))
	direct := median("GET CronTab on crdplane directly", env.crdplane.URL, http.StatusOK, same("timed"))
	t.Logf("latency the front's cost: %.3f ms per GET", ms(front-direct))

	before := env.sarRequests(t)
	hit := median("GET (404) on crdplane, SAR cached", env.crdplane.URL, http.StatusNotFound, same("absent"))
	afterHits := env.sarRequests(t)
	miss := median("GET (404) on crdplane, SAR miss each time", env.crdplane.URL, http.StatusNotFound, func(i int) string { return base + "absent-" + strconv.Itoa(i) })
	afterMisses := env.sarRequests(t)
	t.Logf("latency a delegated SubjectAccessReview costs %.3f ms (SARs sent: %v for the cached GETs, %v for the misses)", ms(miss-hit), afterHits-before, afterMisses-afterHits)
	// The first "absent" GET is the only review of the cached loop; every
	// miss is one review at the front.
	if afterHits-before != 1 || afterMisses-afterHits != float64(n+1) {
		t.Errorf("SubjectAccessReviews sent: %v for the cached GETs (want 1), %v for the misses (want %d)", afterHits-before, afterMisses-afterHits, n+1)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sarRequests is crdplane's count of SubjectAccessReviews sent (its
// metric crdplane_gateway_authorization_webhook_requests_total).
func (env *extensionEnv) sarRequests(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get(env.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "crdplane_gateway_authorization_webhook_requests_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			sum += f
		}
	}
	return sum
}
