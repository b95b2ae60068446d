package composestack

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestReplicaOrder(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
	}{
		{"empty", "", []string{}},
		{"ordered by number, not text", "10 p-validator-10\n2 p-validator-2\n1 p-validator-1\n", []string{"p-validator-1", "p-validator-2", "p-validator-10"}},
		{"blank and malformed lines skipped", "\n  2 b  \nnoname\n1 a\n", []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replicaOrder(tc.out); !slices.Equal(got, tc.want) {
				t.Fatalf("replicaOrder(%q) = %q, want %q", tc.out, got, tc.want)
			}
		})
	}
}

// TestNew checks the environment New prepares, with `true` as the compose
// command so that Up and the cleanup's Down run without docker.
func TestNew(t *testing.T) {
	t.Setenv("COMPOSE", "true")
	t.Setenv("COMPOSE_PROJECT_NAME", "")
	t.Setenv("COMPOSE_FILE", "")
	t.Setenv("CRDPLANE_KUBECONFIG_DIR", "")
	pki := t.TempDir()
	t.Setenv("SOAK_WEBHOOK_PKI", pki)
	s := New(t, Config{
		Root:          "/repo",
		ProjectPrefix: "unit",
		Files:         []string{"a.yaml", "sub/b.yaml"},
		DirEnv:        []string{"SOAK_WEBHOOK_PKI", "OTHER_DIR"},
	})
	if !strings.HasPrefix(s.Project, "unit") || s.Getenv("COMPOSE_PROJECT_NAME") != s.Project {
		t.Errorf("project %q, COMPOSE_PROJECT_NAME %q", s.Project, s.Getenv("COMPOSE_PROJECT_NAME"))
	}
	if got := s.Getenv("COMPOSE_FILE"); got != "/repo/a.yaml:/repo/sub/b.yaml" {
		t.Errorf("COMPOSE_FILE %q", got)
	}
	if kc := s.Getenv("CRDPLANE_KUBECONFIG_DIR"); kc == "" || s.Kubeconfig != filepath.Join(kc, "kubeconfig") {
		t.Errorf("CRDPLANE_KUBECONFIG_DIR %q, kubeconfig %q", kc, s.Kubeconfig)
	}
	if got := s.Getenv("SOAK_WEBHOOK_PKI"); got != pki {
		t.Errorf("SOAK_WEBHOOK_PKI %q, want the environment's %q", got, pki)
	}
	if got := s.Getenv("OTHER_DIR"); got == "" || got == pki {
		t.Errorf("OTHER_DIR %q, want a temporary directory of its own", got)
	}
	if p, err := strconv.Atoi(s.Getenv("CRDPLANE_PORT")); err != nil || p <= 0 {
		t.Errorf("CRDPLANE_PORT %q", s.Getenv("CRDPLANE_PORT"))
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Run(0, "true"); err == nil {
		t.Errorf("a command with no time left ran: %q", out)
	}
}

func TestHTTPGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("etcd_server_is_leader 1\n"))
	}))
	defer srv.Close()
	code, body, err := HTTPGet(srv.URL + "/metrics")
	if err != nil || code != http.StatusTeapot || body != "etcd_server_is_leader 1\n" {
		t.Fatalf("HTTPGet: %d %q %v", code, body, err)
	}
	srv.Close()
	if _, _, err := HTTPGet(srv.URL); err == nil {
		t.Fatal("HTTPGet of a closed server: no error")
	}
}

func TestHealthy(t *testing.T) {
	var c ContainerState
	if c.Healthy() {
		t.Error("a stopped container is healthy")
	}
	c.State.Running = true
	if !c.Healthy() {
		t.Error("a running container without a health check is not healthy")
	}
	c.State.Health = &struct{ Status string }{"starting"}
	if c.Healthy() {
		t.Error("a starting container is healthy")
	}
	c.State.Health.Status = "healthy"
	if !c.Healthy() {
		t.Error("a healthy container is not healthy")
	}
}
