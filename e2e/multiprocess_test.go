package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	internalpki "github.com/crdplane/crdplane/pkg/grpcx/pki"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// serviceBinary returns the path of a per-service binary: from
// $CRDPLANE_BIN_DIR (make test-e2e builds them into ./bin), else built now.
func serviceBinary(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv("CRDPLANE_BIN_DIR"); dir != "" {
		return filepath.Join(dir, "crdplane-"+name)
	}
	out := filepath.Join(t.TempDir(), "crdplane-"+name)
	cmd := exec.Command("go", "build", "-o", out, "./services/"+name+"/cmd/crdplane-"+name)
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProcess runs one service binary until the test ends.
func startProcess(t *testing.T, name string, args ...string) *syncBuffer {
	t.Helper()
	_, logs := startKillable(t, name, args...)
	return logs
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never became ready", url)
}

// TestSeparateProcesses runs each service as its own process, wired by
// flags over loopback gRPC with internal mutual TLS (each with its own
// certificate, the default allow-lists), and drives the gateway with
// kubectl.
func TestSeparateProcesses(t *testing.T) {
	dir := t.TempDir()
	internal := filepath.Join(dir, "internal")
	if err := internalpki.Generate(internalpki.Config{Dir: internal}); err != nil {
		t.Fatal(err)
	}
	mtls := func(service string, args ...string) []string {
		d := filepath.Join(internal, service)
		return append(args, "--grpc-tls-cert-file", filepath.Join(d, "tls.crt"), "--grpc-tls-key-file", filepath.Join(d, "tls.key"), "--grpc-tls-ca-file", filepath.Join(d, "ca.crt"))
	}
	storageAddr, registryAddr, validatorAddr, converterAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	health := map[string]string{"storage": freeAddr(t), "registry": freeAddr(t), "validator": freeAddr(t), "converter": freeAddr(t)}
	gatewayAddr := freeAddr(t)

	startProcess(t, "storage", mtls("storage", "--grpc-listen", storageAddr, "--http-listen", health["storage"], "--data-dir", filepath.Join(dir, "etcd"))...)
	startProcess(t, "registry", mtls("registry", "--grpc-listen", registryAddr, "--http-listen", health["registry"], "--storage-addr", storageAddr, "--validator-addr", validatorAddr)...)
	startProcess(t, "validator", mtls("validator", "--grpc-listen", validatorAddr, "--http-listen", health["validator"], "--registry-addr", registryAddr, "--converter-addr", converterAddr)...)
	startProcess(t, "converter", mtls("converter", "--grpc-listen", converterAddr, "--http-listen", health["converter"], "--registry-addr", registryAddr)...)
	for name, addr := range health {
		waitHTTP(t, "http://"+addr+"/readyz")
		t.Logf("%s ready", name)
	}

	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, tokenFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "tokens.csv")
	const token = "multiprocess-test-token"
	for f, b := range map[string][]byte{certFile: pki.ServingCertPEM, keyFile: pki.ServingKeyPEM, tokenFile: []byte(token + ",admin,admin,system:masters\n")} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, "gateway", mtls("gateway", "--listen", gatewayAddr, "--registry-addr", registryAddr, "--validator-addr", validatorAddr,
		"--converter-addr", converterAddr, "--storage-addr", storageAddr, "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--token-file", tokenFile)...)

	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + gatewayAddr, CertificateAuthorityData: pki.CACertPEM}
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
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway never became ready")
		}
		time.Sleep(100 * time.Millisecond)
	}

	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
	s.must(t, "apply", "-f", testdata("crontab-valid.yaml"))
	errOut := s.fails(t, "apply", "-f", testdata("crontab-invalid.yaml"))
	if !strings.Contains(errOut, "spec.replicas: Invalid value: 15") {
		t.Fatalf("invalid object: %s", errOut)
	}
	out := s.must(t, "get", "ct", "-o", "name")
	if strings.TrimSpace(out) != "crontab.stable.example.com/my-new-cron-object" {
		t.Fatalf("get ct: %q", out)
	}
}
