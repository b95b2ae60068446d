package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCredentialsSurviveRestart: `crdplane run` keeps its CA, serving
// certificate and token in the data directory, so a kubeconfig written by
// the first start works after a restart; --rotate-credentials replaces them.
func TestCredentialsSurviveRestart(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "etcd")
	listen := "127.0.0.1:" + strconv.Itoa(freeTCPPort(t))

	first := startServer(t, dataDir, "--listen", listen)
	first.must(t, "get", "crd")
	kept, err := os.ReadFile(first.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	first.stop(t)
	old := filepath.Join(t.TempDir(), "kubeconfig-from-first-start")
	if err := os.WriteFile(old, kept, 0o600); err != nil {
		t.Fatal(err)
	}

	second := startServer(t, dataDir, "--listen", listen)
	second.Kubeconfig = old
	second.must(t, "get", "crd")
	second.stop(t)

	third := startServer(t, dataDir, "--listen", listen, "--rotate-credentials")
	third.Kubeconfig = old
	errOut := third.fails(t, "get", "crd")
	if !strings.Contains(errOut, "certificate") && !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("the first kubeconfig after a rotation: %s", errOut)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
