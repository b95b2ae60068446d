package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// TestRegistryKubectl drives what the registry publishes with kubectl 1.33
// against `crdplane run`: discovery (categories, version priority, unserved
// versions, ETags), deprecation warnings, OpenAPI v3 and v2 (explain,
// strict validation), names conflicts, storedVersions through the status
// subresource, and the validator's CRD checks.
func TestRegistryKubectl(t *testing.T) {
	s := startServer(t, "")
	s.must(t, "apply", "-f", testdata("registry-widgets-crd.yaml"))
	s.must(t, "apply", "-f", testdata("registry-priority-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.registry.example.com", "crd/orders.priority.registry.example.com")
	s.must(t, "apply", "-f", testdata("registry-widget.yaml"))

	t.Run("api-resources shows categories", func(t *testing.T) {
		out := s.must(t, "api-resources", "--api-group", "registry.example.com", "-o", "wide")
		if !regexp.MustCompile(`(?m)^widgets\s+wdg\s+registry\.example\.com/v1\s+true\s+Widget\s+delete,deletecollection,get,list,patch,create,update,watch\s+all\s*$`).MatchString(out) {
			t.Fatalf("api-resources -o wide:\n%s", out)
		}
		out = s.must(t, "api-resources", "--categories", "all", "-o", "name")
		if strings.TrimSpace(out) != "widgets.registry.example.com" {
			t.Fatalf("api-resources --categories all:\n%s", out)
		}
	})

	t.Run("get all lists the CRs of the all category", func(t *testing.T) {
		out := s.must(t, "get", "all")
		// (kubectl prefixes names with their resource only when it lists
		// several kinds)
		if !regexp.MustCompile(`(?m)^(widget\.registry\.example\.com/)?sprocket\s+\d+s\s*$`).MatchString(out) {
			t.Fatalf("get all:\n%s", out)
		}
	})

	t.Run("versions by priority, unserved ones left out", func(t *testing.T) {
		var g struct {
			Versions         []struct{ Version string }
			PreferredVersion struct{ Version string }
		}
		rawJSON(t, s, &g, "/apis/priority.registry.example.com")
		var got []string
		for _, v := range g.Versions {
			got = append(got, v.Version)
		}
		if want := "v10 v2 v1 v11beta2 v10beta3 v3beta1 v12alpha1 v11alpha2 foo1 foo10"; strings.Join(got, " ") != want || g.PreferredVersion.Version != "v10" {
			t.Fatalf("versions %v (preferred %s), want %s", got, g.PreferredVersion.Version, want)
		}
		rawJSON(t, s, &g, "/apis/registry.example.com")
		got = nil
		for _, v := range g.Versions {
			got = append(got, v.Version)
		}
		if strings.Join(got, " ") != "v1 v1beta1 v1alpha1" {
			t.Fatalf("widget versions %v", got)
		}
		for _, path := range []string{"/apis/registry.example.com/v2", "/apis/registry.example.com/v2/widgets", "/apis/registry.example.com/v2/namespaces/default/widgets/sprocket"} {
			errOut := s.fails(t, "get", "--raw", path)
			if !strings.Contains(errOut, "Error from server (NotFound)") {
				t.Errorf("%s: %s", path, errOut)
			}
		}
	})

	t.Run("deprecated versions warn", func(t *testing.T) {
		_, errOut, err := s.kubectl(t, "", "get", "widgets.v1beta1.registry.example.com", "sprocket")
		if err != nil || !strings.Contains(errOut, "Warning: registry.example.com/v1beta1 Widget is deprecated; use registry.example.com/v1 Widget") {
			t.Fatalf("v1beta1: %v %s", err, errOut)
		}
		_, errOut, err = s.kubectl(t, "", "get", "widgets.v1alpha1.registry.example.com", "sprocket")
		if err != nil || !strings.Contains(errOut, "Warning: registry.example.com/v1alpha1 Widget is going away, move to v1") {
			t.Fatalf("v1alpha1: %v %s", err, errOut)
		}
		if _, errOut, _ = s.kubectl(t, "", "get", "widgets", "sprocket"); strings.Contains(errOut, "Warning") {
			t.Fatalf("v1 warned: %s", errOut)
		}
	})

	t.Run("explain from OpenAPI v3 and v2", func(t *testing.T) {
		for _, args := range [][]string{{"explain", "widgets.spec"}, {"explain", "widgets.spec", "--output=plaintext-openapiv2"}} {
			out := s.must(t, args...)
			for _, want := range []string{"KIND:", "Widget", "VERSION:", "v1", "WidgetSpec is the desired state of a Widget.", "size", "Size of the widget in millimetres.", "color"} {
				if !strings.Contains(out, want) {
					t.Fatalf("kubectl %s lacks %q:\n%s", strings.Join(args, " "), want, out)
				}
			}
		}
		out := s.must(t, "explain", "widgets.spec.size", "--output=plaintext-openapiv2")
		if !strings.Contains(out, "<integer>") {
			t.Fatalf("explain size:\n%s", out)
		}
		var v2 struct {
			Swagger     string
			Definitions map[string]json.RawMessage
		}
		rawJSON(t, s, &v2, "/openapi/v2")
		if v2.Swagger != "2.0" || v2.Definitions["com.example.registry.v1.Widget"] == nil || v2.Definitions["com.example.registry.v1beta1.Widget"] == nil || v2.Definitions["com.example.registry.v2.Widget"] != nil {
			t.Fatalf("/openapi/v2: swagger %q, %d definitions", v2.Swagger, len(v2.Definitions))
		}
	})

	t.Run("explain namespaces from OpenAPI v3 and v2", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"explain", "ns"}, []string{"KIND:", "Namespace", "VERSION:", "v1", "Namespace provides a scope for Names.", "spec\t<NamespaceSpec>", "status\t<NamespaceStatus>"}},
			{[]string{"explain", "namespace.spec"}, []string{"KIND:", "Namespace", "FIELD: spec <NamespaceSpec>", "finalizers\t<[]string>", "Finalizers is an opaque list of values"}},
			{[]string{"explain", "namespaces.status.conditions", "--output=plaintext-openapiv2"}, []string{"KIND:", "Namespace", "RESOURCE: conditions", "NamespaceCondition contains details about state of namespace.", "lastTransitionTime", "type\t<string> -required-"}},
		} {
			out := s.must(t, c.args...)
			for _, want := range c.want {
				if !strings.Contains(out, want) {
					t.Fatalf("kubectl %s lacks %q:\n%s", strings.Join(c.args, " "), want, out)
				}
			}
		}
	})

	t.Run("create --validate=strict", func(t *testing.T) {
		errOut := s.fails(t, "create", "--validate=strict", "-f", testdata("registry-widget-unknown-field.yaml"))
		if !strings.Contains(errOut, `unknown field "spec.bogus"`) {
			t.Fatalf("strict create: %s", errOut)
		}
	})

	t.Run("names conflict", func(t *testing.T) {
		s.must(t, "apply", "-f", testdata("registry-gizmos-crd.yaml"))
		s.must(t, "wait", "--for", "condition=NamesAccepted=false", "--timeout=30s", "crd/gizmos.registry.example.com")
		out := s.must(t, "get", "crd", "gizmos.registry.example.com", "-o", `jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}: {.message}{"\n"}{end}`)
		for _, want := range []string{`NamesAccepted=False/SingularConflict: "widget" is already in use`, "Established=False/NotAccepted: not all names are accepted"} {
			if !strings.Contains(out, want) {
				t.Fatalf("conditions lack %q:\n%s", want, out)
			}
		}
		// fixing the names establishes it
		s.must(t, "patch", "crd", "gizmos.registry.example.com", "--type=merge", "-p", `{"spec":{"names":{"singular":"gizmo"}}}`)
		s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/gizmos.registry.example.com")
	})

	t.Run("storedVersions through the status subresource", func(t *testing.T) {
		// v1beta1 becomes the storage version: both are recorded
		s.must(t, "patch", "crd", "widgets.registry.example.com", "--type=json", "-p",
			`[{"op":"replace","path":"/spec/versions/1/storage","value":true},{"op":"replace","path":"/spec/versions/2/storage","value":false}]`)
		if out := s.must(t, "get", "crd", "widgets.registry.example.com", "-o", "jsonpath={.status.storedVersions}"); out != `["v1","v1beta1"]` {
			t.Fatalf("storedVersions after a storage change: %s", out)
		}
		// after a storage migration, v1 is dropped from the status
		s.must(t, "patch", "crd", "widgets.registry.example.com", "--subresource=status", "--type=merge", "-p", `{"status":{"storedVersions":["v1beta1"]}}`)
		if out := s.must(t, "get", "crd", "widgets.registry.example.com", "-o", "jsonpath={.status.storedVersions}"); out != `["v1beta1"]` {
			t.Fatalf("storedVersions after the status patch: %s", out)
		}
		// the main resource cannot do that
		s.must(t, "patch", "crd", "widgets.registry.example.com", "--type=merge", "-p", `{"status":{"storedVersions":["v1"]}}`)
		if out := s.must(t, "get", "crd", "widgets.registry.example.com", "-o", "jsonpath={.status.storedVersions}"); out != `["v1beta1"]` {
			t.Fatalf("the main resource changed storedVersions: %s", out)
		}
	})

	t.Run("discovery ETags", func(t *testing.T) {
		client, base := httpClient(t, s)
		for _, accept := range []string{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", "application/json"} {
			resp := get(t, client, base+"/apis", accept, "")
			etag := resp.Header.Get("ETag")
			if resp.StatusCode != http.StatusOK || !regexp.MustCompile(`^"[0-9A-F]{128}"$`).MatchString(etag) {
				t.Fatalf("/apis (%s): %d, ETag %q", accept, resp.StatusCode, etag)
			}
			if again := get(t, client, base+"/apis", accept, etag); again.StatusCode != http.StatusNotModified {
				t.Fatalf("/apis (%s) with If-None-Match: %d", accept, again.StatusCode)
			}
			if other := get(t, client, base+"/apis", accept, `"0"`); other.StatusCode != http.StatusOK {
				t.Fatalf("/apis (%s) with a stale If-None-Match: %d", accept, other.StatusCode)
			}
		}
	})

	t.Run("changes visible within a second", func(t *testing.T) {
		client, base := httpClient(t, s)
		start := time.Now()
		s.must(t, "patch", "crd", "widgets.registry.example.com", "--type=json", "-p",
			`[{"op":"add","path":"/spec/names/shortNames/-","value":"wdgt"},{"op":"add","path":"/spec/versions/2/schema/openAPIV3Schema/properties/spec/properties/weight","value":{"type":"integer","description":"Weight of the widget."}}]`)
		for what, check := range map[string]func() bool{
			"aggregated discovery": func() bool {
				return bytes.Contains(body(t, client, base+"/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"), []byte(`"wdgt"`))
			},
			"OpenAPI v3": func() bool {
				return bytes.Contains(body(t, client, base+"/openapi/v3/apis/registry.example.com/v1", "application/json"), []byte("Weight of the widget."))
			},
			"OpenAPI v2": func() bool {
				return bytes.Contains(body(t, client, base+"/openapi/v2", "application/json"), []byte("Weight of the widget."))
			},
		} {
			for !check() {
				if time.Since(start) > time.Second {
					t.Fatalf("%s does not show the change after %v", what, time.Since(start))
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("%s shows the change %v after the patch started", what, time.Since(start).Round(time.Millisecond))
		}
	})

	t.Run("CEL rules and defaults are checked", func(t *testing.T) {
		for file, want := range map[string][]string{
			"registry-cel-crd.yaml": {
				// the value is the whole rule (upstream's internal type, %#v)
				`The CustomResourceDefinition "rules.registry.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.replicas >",`,
				`compilation failed: ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>'`,
			},
			"registry-default-crd.yaml": {
				`The CustomResourceDefinition "defaults.registry.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].properties[replicas].default: Invalid value: "string":`,
				`must be of type integer`,
			},
		} {
			_, errOut, err := s.kubectl(t, "", "apply", "-f", testdata(file))
			if err == nil {
				t.Fatalf("%s was accepted", file)
			}
			for _, w := range want {
				if !strings.Contains(errOut, w) {
					t.Errorf("%s: error lacks %q:\n%s", file, w, errOut)
				}
			}
		}
	})
}

// rawJSON decodes `kubectl get --raw path` into v.
func rawJSON(t *testing.T, s *server, v any, path string) {
	t.Helper()
	out := s.must(t, "get", "--raw", path)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// httpClient is an HTTP client for s's kubeconfig, and its base URL.
func httpClient(t *testing.T, s *server) (*http.Client, string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, cfg.Host
}

func get(t *testing.T, client *http.Client, url, accept, ifNoneMatch string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func body(t *testing.T, client *http.Client, url, accept string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncBuffer is a process's output, safe to read while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startKillable runs a service binary that the test may kill.
func startKillable(t *testing.T, name string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd, logs, _ := runProcess(t, name, serviceBinary(t, name), 15*time.Second, args...)
	return cmd, logs
}

// runProcess runs binary with args until t ends: then SIGTERM, and
// SIGKILL if it has not exited within grace; a failed test logs the tail
// of its output. done is closed when it exits.
func runProcess(t *testing.T, name, binary string, grace time.Duration, args ...string) (cmd *exec.Cmd, logs *syncBuffer, done <-chan struct{}) {
	t.Helper()
	logs = &syncBuffer{}
	cmd = exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, tail(logs.String(), 6000))
		}
	})
	return cmd, logs, exited
}

func waitLog(t *testing.T, logs *syncBuffer, what string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(logs.String(), what) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the logs after %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRegistryLeaderFailover runs two registry replicas electing a leader
// through etcd. The leader is killed; the other replica takes over the
// controllers: new CRDs are established, and a deleted CRD's objects are
// cleaned up.
func TestRegistryLeaderFailover(t *testing.T) {
	dir := t.TempDir()
	etcdURL := "http://" + freeAddr(t)
	storageAddr, regA, regB, validatorAddr, converterAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	health := map[string]string{"storage": freeAddr(t), "registry-a": freeAddr(t), "registry-b": freeAddr(t), "validator": freeAddr(t), "converter": freeAddr(t)}
	gatewayAddr := freeAddr(t)

	startProcess(t, "storage", "--grpc-listen", storageAddr, "--http-listen", health["storage"], "--data-dir", filepath.Join(dir, "etcd"), "--etcd-listen-client-url", etcdURL)
	waitHTTP(t, "http://"+health["storage"]+"/readyz")
	election := []string{"--storage-addr", storageAddr, "--etcd-endpoints", etcdURL, "--leader-elect-lease-duration", "2s", "--validator-addr", validatorAddr}
	leaderCmd, leaderLogs := startKillable(t, "registry", append([]string{"--grpc-listen", regA, "--http-listen", health["registry-a"]}, election...)...)
	waitLog(t, leaderLogs, `"msg":"leading"`, 30*time.Second)
	_, followerLogs := startKillable(t, "registry", append([]string{"--grpc-listen", regB, "--http-listen", health["registry-b"]}, election...)...)
	// everything else talks to the follower
	startProcess(t, "validator", "--grpc-listen", validatorAddr, "--http-listen", health["validator"], "--registry-addr", regB, "--converter-addr", converterAddr)
	startProcess(t, "converter", "--grpc-listen", converterAddr, "--http-listen", health["converter"], "--registry-addr", regB)
	for name, addr := range health {
		waitHTTP(t, "http://"+addr+"/readyz")
		t.Logf("%s ready", name)
	}
	if strings.Contains(followerLogs.String(), `"msg":"leading"`) {
		t.Fatal("two leaders")
	}
	s := gatewayFor(t, dir, gatewayAddr, regB, validatorAddr, converterAddr, storageAddr)

	// the leader establishes a CRD
	s.must(t, "apply", "-f", testdata("registry-widgets-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.registry.example.com")
	s.must(t, "apply", "-f", testdata("registry-widget.yaml"))

	// the leader dies without giving up its lease
	if err := leaderCmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	s.must(t, "apply", "-f", testdata("registry-priority-crd.yaml"))
	// (kubectl wait gives up on an object without conditions: poll)
	waitEstablished(t, s, "orders.priority.registry.example.com", 30*time.Second)
	t.Logf("a new CRD was established %v after the leader was killed (lease 2s)", time.Since(killed).Round(time.Millisecond))
	waitLog(t, followerLogs, `"msg":"leading"`, 5*time.Second)

	// the new leader cleans up a deleted CRD's objects
	s.must(t, "delete", "crd", "widgets.registry.example.com", "--timeout=60s")
	out, errOut, err := s.kubectl(t, "", "get", "crd", "-o", "name")
	if err != nil || strings.Contains(out, "widgets") {
		t.Fatalf("CRD still there: %s %s %v", out, errOut, err)
	}
	s.must(t, "apply", "-f", testdata("registry-widgets-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.registry.example.com")
	if out := s.must(t, "get", "widgets", "-A", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("objects survived their CRD: %q", out)
	}
}

// waitEstablished polls until a CRD is Established.
func waitEstablished(t *testing.T, s *server, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out, _, _ := s.kubectl(t, "", "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if out == "True" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not Established after %v", name, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gatewayFor starts a gateway on addr and returns a kubectl client for it.
func gatewayFor(t *testing.T, dir, addr, registry, validator, converter, storage string) *server {
	t.Helper()
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, tokenFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "tokens.csv")
	const token = "registry-failover-token"
	for f, b := range map[string][]byte{certFile: pki.ServingCertPEM, keyFile: pki.ServingKeyPEM, tokenFile: []byte(token + ",admin,admin,system:masters\n")} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, "gateway", "--listen", addr, "--registry-addr", registry, "--validator-addr", validator,
		"--converter-addr", converter, "--storage-addr", storage, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--token-file", tokenFile)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: pki.CACertPEM}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "default"}
	kc.CurrentContext = "c"
	s := &server{Kubeconfig: filepath.Join(dir, "kubeconfig"), cacheDir: filepath.Join(dir, "cache")}
	if err := clientcmd.WriteToFile(*kc, s.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, _, err := s.kubectl(t, "", "get", "--raw", "/readyz"); err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway never became ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
