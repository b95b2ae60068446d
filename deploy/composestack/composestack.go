// Package composestack runs a docker compose project of the crdplane
// deployment (deploy/compose) for tests and benchmarks that drive it from Go:
// the compose test (deploy/compose/test) and the soak benchmark (bench/soak).
//
// A Stack is one compose project: New names it, picks the compose command
// and files and prepares its environment; Up starts it and Down (registered
// as a test cleanup) removes it. The docker calls (Docker, Containers,
// AllContainers, Inspect, HostAddr, EtcdLeader, the Wait* helpers) return
// errors, so that goroutines other than the test's may use them; the Must*
// wrappers end the test instead, for the test goroutine only.
//
// The process environment overrides the defaults as the run.sh scripts set
// it: COMPOSE (the compose command, "docker compose" or "docker-compose"),
// COMPOSE_PROJECT_NAME, COMPOSE_FILE and CRDPLANE_KUBECONFIG_DIR.
package composestack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Config describes the compose project a Stack runs.
type Config struct {
	// Root is the repository root, absolute or relative to the working
	// directory (a test runs in its package's directory).
	Root string
	// ProjectPrefix names the project when COMPOSE_PROJECT_NAME is unset:
	// the prefix followed by the process id.
	ProjectPrefix string
	// Files are the compose files, relative to Root, used when COMPOSE_FILE
	// is unset.
	Files []string
	// DirEnv names further environment variables that hold directories
	// (such as SOAK_WEBHOOK_PKI): each keeps its value from the process
	// environment, or gets a new temporary directory of the test.
	DirEnv []string
	// KeepUp leaves the project running after the test (Down only logs).
	KeepUp bool
	// UpTimeout bounds `compose up -d` (default 4 minutes).
	UpTimeout time.Duration
	// DownTimeout bounds `compose down` (default 2 minutes).
	DownTimeout time.Duration
	// FailureLogLines: when the test failed, Down logs `compose ps -a` and,
	// if this is positive, the last this many log lines of every service.
	FailureLogLines int
}

// Stack is a compose project under test.
type Stack struct {
	t   testing.TB
	cfg Config
	// Project is the compose project name.
	Project string
	// Kubeconfig is the path of the kubeconfig the deployment's pki step
	// writes (in CRDPLANE_KUBECONFIG_DIR).
	Kubeconfig string
	compose    []string
	env        []string
}

// New prepares the compose project of cfg: its name, compose command and
// files, and the environment of every command it runs (the process's, plus
// COMPOSE_PROJECT_NAME, COMPOSE_FILE, CRDPLANE_KUBECONFIG_DIR, cfg.DirEnv
// and a free CRDPLANE_PORT for the gateway). It registers Down as a cleanup
// of t. It starts nothing: call Up.
func New(t testing.TB, cfg Config) *Stack {
	t.Helper()
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UpTimeout == 0 {
		cfg.UpTimeout = 4 * time.Minute
	}
	if cfg.DownTimeout == 0 {
		cfg.DownTimeout = 2 * time.Minute
	}
	s := &Stack{t: t, cfg: cfg}
	s.Project = os.Getenv("COMPOSE_PROJECT_NAME")
	if s.Project == "" {
		s.Project = fmt.Sprintf("%s%d", cfg.ProjectPrefix, os.Getpid())
	}
	s.compose = strings.Fields(os.Getenv("COMPOSE"))
	if len(s.compose) == 0 {
		s.compose = []string{"docker", "compose"}
		if exec.Command("docker", "compose", "version").Run() != nil {
			s.compose = []string{"docker-compose"}
		}
	}
	files := os.Getenv("COMPOSE_FILE")
	if files == "" {
		paths := make([]string, len(cfg.Files))
		for i, f := range cfg.Files {
			paths[i] = filepath.Join(root, f)
		}
		files = strings.Join(paths, ":")
	}
	dir := func(key string) string {
		if d := os.Getenv(key); d != "" {
			return d
		}
		return t.TempDir()
	}
	kcDir := dir("CRDPLANE_KUBECONFIG_DIR")
	s.Kubeconfig = filepath.Join(kcDir, "kubeconfig")
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s.env = append(os.Environ(),
		"COMPOSE_PROJECT_NAME="+s.Project,
		"COMPOSE_FILE="+files,
		"COMPOSE_PATH_SEPARATOR=:",
		"CRDPLANE_KUBECONFIG_DIR="+kcDir,
	)
	for _, key := range cfg.DirEnv {
		s.env = append(s.env, key+"="+dir(key))
	}
	s.env = append(s.env, "CRDPLANE_PORT="+strconv.Itoa(port))
	t.Cleanup(s.Down)
	return s
}

// Getenv is the value of key in the environment of the stack's commands
// ("" if unset).
func (s *Stack) Getenv(key string) string {
	for i := len(s.env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// Run runs a command in the stack's environment, killed after timeout, and
// returns its output (stdout and stderr together).
func (s *Stack) Run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Compose runs a compose subcommand on the project.
func (s *Stack) Compose(timeout time.Duration, args ...string) (string, error) {
	return s.Run(timeout, s.compose[0], append(slices.Clone(s.compose[1:]), args...)...)
}

// Up starts the project (`compose up -d`). It does not wait for readiness
// beyond what compose waits for (depends_on conditions).
func (s *Stack) Up() error {
	if out, err := s.Compose(s.cfg.UpTimeout, "up", "-d"); err != nil {
		return fmt.Errorf("compose up: %w\n%s", err, out)
	}
	return nil
}

// MustUp is Up, ending the test on error.
func (s *Stack) MustUp() {
	s.t.Helper()
	if err := s.Up(); err != nil {
		s.t.Fatal(err)
	}
}

// Down removes the project (containers, network, volumes), unless
// Config.KeepUp; if the test failed, it first logs the project's containers
// (and their logs, see Config.FailureLogLines). New registers it as a
// cleanup.
func (s *Stack) Down() {
	if s.cfg.KeepUp {
		s.t.Logf("compose project %s left running (keep-up)", s.Project)
		return
	}
	if s.t.Failed() {
		out, _ := s.Compose(time.Minute, "ps", "-a")
		s.t.Logf("compose ps:\n%s", out)
		if n := s.cfg.FailureLogLines; n > 0 {
			out, _ = s.Compose(time.Minute, "logs", "--no-color", "--tail="+strconv.Itoa(n))
			s.t.Logf("compose logs:\n%s", out)
		}
	}
	if out, err := s.Compose(s.cfg.DownTimeout, "down", "--volumes", "--remove-orphans", "--timeout", "5"); err != nil {
		s.t.Errorf("compose down: %v\n%s", err, out)
	}
}

// Docker runs a docker command (one minute at most) and returns its output,
// trimmed; on failure, the error carries the output.
func (s *Stack) Docker(args ...string) (string, error) {
	out, err := s.Run(time.Minute, "docker", args...)
	if err != nil {
		return out, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out))
	}
	return strings.TrimSpace(out), nil
}

// MustDocker is Docker, ending the test on error.
func (s *Stack) MustDocker(args ...string) string {
	s.t.Helper()
	out, err := s.Docker(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Containers lists the containers of a compose service, in replica order.
func (s *Stack) Containers(service string) ([]string, error) {
	out, err := s.Docker("ps", "-a",
		"--filter", "label=com.docker.compose.project="+s.Project,
		"--filter", "label=com.docker.compose.service="+service,
		"--format", `{{.Label "com.docker.compose.container-number"}} {{.Names}}`)
	if err != nil {
		return nil, err
	}
	return replicaOrder(out), nil
}

// MustContainers is Containers, ending the test on error.
func (s *Stack) MustContainers(service string) []string {
	s.t.Helper()
	cs, err := s.Containers(service)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// replicaOrder parses lines "<container number> <name>" into the names
// ordered by number.
func replicaOrder(out string) []string {
	type c struct {
		n    int
		name string
	}
	var cs []c
	for _, line := range strings.Split(out, "\n") {
		num, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(num)
		cs = append(cs, c{n, name})
	}
	slices.SortFunc(cs, func(a, b c) int { return a.n - b.n })
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return names
}

// AllContainers maps every container of the project to its service.
func (s *Stack) AllContainers() (map[string]string, error) {
	out, err := s.Docker("ps", "-a", "--filter", "label=com.docker.compose.project="+s.Project,
		"--format", `{{.Names}} {{.Label "com.docker.compose.service"}}`)
	m := map[string]string{}
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(out, "\n") {
		if name, svc, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			m[name] = svc
		}
	}
	return m, nil
}

// ContainerState is what docker inspect tells of a container's life.
type ContainerState struct {
	Name         string
	RestartCount int
	State        struct {
		Status     string
		Running    bool
		OOMKilled  bool
		ExitCode   int
		StartedAt  string
		FinishedAt string
		Health     *struct {
			Status string
		}
	}
}

// Healthy: running, and healthy if the container has a health check.
func (c ContainerState) Healthy() bool {
	return c.State.Running && (c.State.Health == nil || c.State.Health.Status == "healthy")
}

// Inspect inspects containers, by name (without docker's leading slash).
func (s *Stack) Inspect(names ...string) (map[string]ContainerState, error) {
	out, err := s.Docker(append([]string{"inspect"}, names...)...)
	if err != nil {
		return nil, err
	}
	var states []ContainerState
	if err := json.Unmarshal([]byte(out), &states); err != nil {
		return nil, fmt.Errorf("docker inspect: %w", err)
	}
	m := map[string]ContainerState{}
	for _, st := range states {
		m[strings.TrimPrefix(st.Name, "/")] = st
	}
	return m, nil
}

// InspectAll inspects every container of the project; services maps each
// container to its compose service.
func (s *Stack) InspectAll() (services map[string]string, states map[string]ContainerState, err error) {
	services, err = s.AllContainers()
	if err != nil {
		return services, nil, err
	}
	names := make([]string, 0, len(services))
	for n := range services {
		names = append(names, n)
	}
	states, err = s.Inspect(names...)
	return services, states, err
}

// HostAddr is the loopback address a container's port is published on.
func (s *Stack) HostAddr(container, port string) (string, error) {
	out, err := s.Docker("port", container, port+"/tcp")
	if err != nil {
		return "", err
	}
	addr, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(addr), nil
}

// MustHostAddr is HostAddr, ending the test on error.
func (s *Stack) MustHostAddr(container, port string) string {
	s.t.Helper()
	addr, err := s.HostAddr(container, port)
	if err != nil {
		s.t.Fatal(err)
	}
	return addr
}

// EtcdServices are the compose services of the etcd members.
var EtcdServices = []string{"etcd-0", "etcd-1", "etcd-2"}

// EtcdLeader is the container of the etcd leader (etcd_server_is_leader on
// its /metrics), polled until timeout. Members that are down or unreachable
// are passed over.
func (s *Stack) EtcdLeader(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, svc := range EtcdServices {
			cs, _ := s.Containers(svc)
			for _, c := range cs {
				addr, err := s.HostAddr(c, "2379")
				if err != nil {
					continue
				}
				_, body, err := HTTPGet("http://" + addr + "/metrics")
				if err == nil && strings.Contains(body, "\netcd_server_is_leader 1\n") {
					return c, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no etcd leader within %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitHealthy waits until a container runs and its health check (the
// compose file's, for the crdplane services) reports healthy.
func (s *Stack) WaitHealthy(container string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := s.Inspect(container)
		if err == nil {
			c := st[container]
			if c.State.Running && c.State.Health != nil && c.State.Health.Status == "healthy" {
				return nil
			}
			err = fmt.Errorf("%s", c.State.Status)
			if c.State.Health != nil {
				err = fmt.Errorf("%s, %s", c.State.Status, c.State.Health.Status)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy within %s: %w", container, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitEtcdHealthy waits until an etcd member's /health reports true.
func (s *Stack) WaitEtcdHealthy(container string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var code int
		var body string
		addr, err := s.HostAddr(container, "2379")
		if err == nil {
			code, body, err = HTTPGet("http://" + addr + "/health")
			if err == nil && code == http.StatusOK && strings.Contains(body, `"health":"true"`) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd member %s not healthy within %s: %d %s %v", container, timeout, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// HTTPGet GETs a URL (3 seconds at most) and returns the status code and
// body.
func HTTPGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// FreePort is a TCP port free on the loopback interface just now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
