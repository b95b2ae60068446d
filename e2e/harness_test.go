package e2e

import (
	"bufio"
	"bytes"
	"context"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// kubectlBinary is the pinned client: upstream 1.33 behaviour is what we
// match, and the machine's `kubectl` would otherwise pick a client from the
// server's /version. KUBECTL overrides it.
func kubectlBinary() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	for _, p := range []string{"/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/local/bin/kubectl.1.33", "/usr/bin/kubectl.1.33"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}

// crdplaneBinary returns the crdplane binary: $CRDPLANE_BIN (make test-e2e
// builds it), else one built now.
func crdplaneBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CRDPLANE_BIN"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "crdplane")
	cmd := exec.Command("go", "build", "-o", out, "github.com/crdplane/crdplane/cmd/crdplane")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build crdplane: %v", err)
	}
	return out
}

// server is a `crdplane run` process.
type server struct {
	URL        string
	Kubeconfig string
	cacheDir   string
	cmd        *exec.Cmd
	logs       *bytes.Buffer
}

var servingLine = regexp.MustCompile(`serving the Kubernetes API at (https://\S+)`)

// startServer runs `crdplane run` (with extra flags) on a free loopback
// port with its own data directory and returns once it prints its URL.
func startServer(t *testing.T, dataDir string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "etcd")
	}
	s := &server{Kubeconfig: filepath.Join(dir, "kubeconfig"), cacheDir: filepath.Join(dir, "cache"), logs: &bytes.Buffer{}}
	args := append([]string{"run", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--kubeconfig", s.Kubeconfig, "--log-format", "text"}, extra...)
	s.cmd = exec.Command(crdplaneBinary(t), args...)
	s.cmd.Stderr = s.logs
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(t) })
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				urlc <- m[1]
			}
		}
	}()
	select {
	case s.URL = <-urlc:
	case <-time.After(60 * time.Second):
		t.Fatalf("crdplane did not start; logs:\n%s", s.logs.String())
	}
	return s
}

func (s *server) stop(t *testing.T) {
	if s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	if t.Failed() {
		t.Logf("crdplane logs:\n%s", tail(s.logs.String(), 8000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// kubectl runs the pinned kubectl against s and returns stdout, stderr and
// the error.
func (s *server) kubectl(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir}, args...)
	cmd := exec.CommandContext(ctx, kubectlBinary(), full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// must runs kubectl and fails the test on error.
func (s *server) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(t, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// fails runs kubectl, expects it to fail, and returns its stderr.
func (s *server) fails(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(t, "", args...)
	if err == nil {
		t.Fatalf("kubectl %s succeeded, want failure\nstdout: %s", strings.Join(args, " "), out)
	}
	return errOut
}

func testdata(name string) string { return filepath.Join("testdata", name) }
