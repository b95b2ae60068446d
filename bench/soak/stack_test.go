package soak

// The compose project under test: bring-up, docker commands, containers,
// health. Adapted from deploy/compose/test/compose_test.go (package-private
// there).

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
	"sync"
	"testing"
	"time"

	"github.com/crdplane/crdplane/services/gateway/localpki"
)

type stack struct {
	t          *testing.T
	root       string
	compose    []string
	project    string
	env        []string
	kubeconfig string
	keepUp     bool
}

func newStack(t *testing.T) *stack {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, root: root, keepUp: os.Getenv("SOAK_KEEP") == "1"}
	s.project = os.Getenv("COMPOSE_PROJECT_NAME")
	if s.project == "" {
		s.project = fmt.Sprintf("crdplanesoak%d", os.Getpid())
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
		files = filepath.Join(root, "deploy/compose/docker-compose.yaml") + ":" + filepath.Join(root, "bench/soak/docker-compose.soak.yaml")
	}
	kcDir := os.Getenv("CRDPLANE_KUBECONFIG_DIR")
	if kcDir == "" {
		kcDir = t.TempDir()
	}
	pkiDir := os.Getenv("SOAK_WEBHOOK_PKI")
	if pkiDir == "" {
		pkiDir = t.TempDir()
	}
	s.kubeconfig = filepath.Join(kcDir, "kubeconfig")
	s.env = append(os.Environ(),
		"COMPOSE_PROJECT_NAME="+s.project,
		"COMPOSE_FILE="+files,
		"COMPOSE_PATH_SEPARATOR=:",
		"CRDPLANE_KUBECONFIG_DIR="+kcDir,
		"SOAK_WEBHOOK_PKI="+pkiDir,
		"CRDPLANE_PORT="+strconv.Itoa(freePort(t)),
	)
	t.Cleanup(s.down)
	return s
}

// webhookPKI writes the conversion webhook's serving certificate (for the
// name soak-webhook) into SOAK_WEBHOOK_PKI and returns its CA.
func (s *stack) webhookPKI() []byte {
	s.t.Helper()
	dir := s.envValue("SOAK_WEBHOOK_PKI")
	p, err := localpki.Generate([]string{"soak-webhook"}, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	// The webhook runs as 65532 without capabilities: readable by all
	// (a throw-away key of a test).
	if err := os.Chmod(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": p.ServingCertPEM, "tls.key": p.ServingKeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	return p.CACertPEM
}

func (s *stack) envValue(key string) string {
	for i := len(s.env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func (s *stack) run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (s *stack) composeCmd(timeout time.Duration, args ...string) (string, error) {
	return s.run(timeout, s.compose[0], append(slices.Clone(s.compose[1:]), args...)...)
}

// up starts the project and waits until the gateway's /readyz answers ok
// (through the published port, with the kubeconfig the pki step wrote).
func (s *stack) up() {
	s.t.Helper()
	if out, err := s.composeCmd(6*time.Minute, "up", "-d"); err != nil {
		s.t.Fatalf("compose up: %v\n%s", err, out)
	}
}

func (s *stack) down() {
	if s.keepUp {
		s.t.Logf("SOAK_KEEP=1: compose project %s left running", s.project)
		return
	}
	if s.t.Failed() {
		out, _ := s.composeCmd(time.Minute, "ps")
		s.t.Logf("compose ps:\n%s", out)
	}
	if out, err := s.composeCmd(3*time.Minute, "down", "--volumes", "--remove-orphans", "--timeout", "5"); err != nil {
		s.t.Errorf("compose down: %v\n%s", err, out)
	}
}

// docker runs a docker command; errors are returned, not fatal (the
// fault injector runs outside the test goroutine).
func (s *stack) docker(args ...string) (string, error) {
	out, err := s.run(time.Minute, "docker", args...)
	if err != nil {
		return out, fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out))
	}
	return strings.TrimSpace(out), nil
}

func (s *stack) mustDocker(args ...string) string {
	s.t.Helper()
	out, err := s.docker(args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// containers lists the containers of a compose service, in replica order.
func (s *stack) containers(service string) []string {
	out, err := s.docker("ps", "-a",
		"--filter", "label=com.docker.compose.project="+s.project,
		"--filter", "label=com.docker.compose.service="+service,
		"--format", `{{.Label "com.docker.compose.container-number"}} {{.Names}}`)
	if err != nil {
		return nil
	}
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

// allContainers maps every container of the project to its service.
func (s *stack) allContainers() map[string]string {
	out, err := s.docker("ps", "-a", "--filter", "label=com.docker.compose.project="+s.project,
		"--format", `{{.Names}} {{.Label "com.docker.compose.service"}}`)
	m := map[string]string{}
	if err != nil {
		return m
	}
	for _, line := range strings.Split(out, "\n") {
		if name, svc, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			m[name] = svc
		}
	}
	return m
}

// containerState is what docker inspect tells of a container's life.
type containerState struct {
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

func (s *stack) inspect(names ...string) (map[string]containerState, error) {
	out, err := s.docker(append([]string{"inspect"}, names...)...)
	if err != nil {
		return nil, err
	}
	var states []containerState
	if err := json.Unmarshal([]byte(out), &states); err != nil {
		return nil, fmt.Errorf("docker inspect: %v", err)
	}
	m := map[string]containerState{}
	for _, st := range states {
		m[strings.TrimPrefix(st.Name, "/")] = st
	}
	return m, nil
}

// hostAddr is the loopback address a container's port is published on.
func (s *stack) hostAddr(container, port string) (string, error) {
	out, err := s.docker("port", container, port+"/tcp")
	if err != nil {
		return "", err
	}
	addr, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(addr), nil
}

func httpGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// etcdLeader is the container of the etcd leader ("" if none is found
// within 30s).
func (s *stack) etcdLeader() string {
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, svc := range []string{"etcd-0", "etcd-1", "etcd-2"} {
			for _, c := range s.containers(svc) {
				addr, err := s.hostAddr(c, "2379")
				if err != nil {
					continue
				}
				_, body, err := httpGet("http://" + addr + "/metrics")
				if err == nil && strings.Contains(body, "\netcd_server_is_leader 1\n") {
					return c
				}
			}
		}
		if time.Now().After(deadline) {
			return ""
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitRecovered waits until a restarted container serves again: healthy
// for the crdplane services (their compose health check), /health true
// for an etcd member.
func (s *stack) waitRecovered(container, service string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if strings.HasPrefix(service, "etcd-") {
			if addr, err := s.hostAddr(container, "2379"); err == nil {
				code, body, err := httpGet("http://" + addr + "/health")
				ok = err == nil && code == http.StatusOK && strings.Contains(body, `"health":"true"`)
			}
		} else if st, err := s.inspect(container); err == nil {
			c := st[container]
			ok = c.State.Running && c.State.Health != nil && c.State.Health.Status == "healthy"
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not recovered within %s", container, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitAllHealthy waits until every long-running container of the project
// runs (and is healthy where it has a health check).
func (s *stack) waitAllHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		names := s.allContainers()
		var list []string
		for n, svc := range names {
			if svc != "pki" {
				list = append(list, n)
			}
		}
		st, err := s.inspect(list...)
		var bad []string
		if err != nil {
			bad = append(bad, err.Error())
		}
		for n, c := range st {
			if !c.State.Running || (c.State.Health != nil && c.State.Health.Status != "healthy") {
				h := ""
				if c.State.Health != nil {
					h = c.State.Health.Status
				}
				bad = append(bad, n+" "+c.State.Status+" "+h)
			}
		}
		if len(bad) == 0 && len(st) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(bad)
			return fmt.Errorf("not healthy after %s: %s", timeout, strings.Join(bad, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// crashWatch tells crashes from kills: after every start (the first up
// and each restart the fault injector does) it records the container's
// StartedAt; a container that started again, was restarted by its restart
// policy (RestartCount), or is not running when nobody killed it crashed.
type crashWatch struct {
	s  *stack
	mu sync.Mutex
	// started: StartedAt as of the last start this test knows of.
	started map[string]string
	// restarts: RestartCount at that point.
	restarts map[string]int
	// busy: containers the fault injector is killing or restarting now.
	busy map[string]bool
	// crashes found by polling, container → description (first seen).
	crashes  map[string][]string
	reported map[string]string
	// logs: the container's last log lines when its first crash was seen.
	logs map[string]string
}

func newCrashWatch(s *stack) *crashWatch {
	return &crashWatch{s: s, started: map[string]string{}, restarts: map[string]int{}, busy: map[string]bool{},
		crashes: map[string][]string{}, reported: map[string]string{}, logs: map[string]string{}}
}

// baseline records every container's current start.
func (w *crashWatch) baseline() error {
	names := w.s.allContainers()
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	st, err := w.s.inspect(list...)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, c := range st {
		w.started[n] = c.State.StartedAt
		w.restarts[n] = c.RestartCount
	}
	return nil
}

func (w *crashWatch) beginFault(c string) {
	w.mu.Lock()
	w.busy[c] = true
	w.mu.Unlock()
}

// endFault records the start the fault injector did.
func (w *crashWatch) endFault(c string) {
	st, err := w.s.inspect(c)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.started[c] = st[c].State.StartedAt
		w.restarts[c] = st[c].RestartCount
	}
	delete(w.busy, c)
}

// check polls every container once; it returns the crashes newly found.
func (w *crashWatch) check() []string {
	names := w.s.allContainers()
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	st, err := w.s.inspect(list...)
	if err != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var found []string
	for n, c := range st {
		if w.busy[n] {
			continue
		}
		svc := names[n]
		var why string
		switch {
		case svc == "pki":
			if c.State.Running || c.State.ExitCode == 0 {
				continue
			}
			why = fmt.Sprintf("pki exited %d", c.State.ExitCode)
		case c.State.OOMKilled:
			why = "OOM-killed"
		case c.RestartCount > w.restarts[n]:
			why = fmt.Sprintf("restarted by its restart policy (RestartCount %d → %d)", w.restarts[n], c.RestartCount)
		case w.started[n] != "" && c.State.StartedAt != w.started[n]:
			why = fmt.Sprintf("started again at %s (last known start %s)", c.State.StartedAt, w.started[n])
		case w.started[n] == "":
			why = "a container that did not exist at the start"
		case !c.State.Running:
			why = fmt.Sprintf("%s, exit code %d at %s", c.State.Status, c.State.ExitCode, c.State.FinishedAt)
		default:
			continue
		}
		key := why
		if w.reported[n] == key {
			continue
		}
		w.reported[n] = key
		w.crashes[n] = append(w.crashes[n], why)
		found = append(found, n+": "+why)
		if _, ok := w.logs[n]; !ok {
			out, _ := w.s.run(time.Minute, "docker", "logs", "--tail", "40", n)
			w.logs[n] = out
		}
		// Later polls compare with what is seen now.
		w.started[n] = c.State.StartedAt
		w.restarts[n] = c.RestartCount
	}
	return found
}

func (w *crashWatch) all() (map[string][]string, map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[string][]string{}
	for k, v := range w.crashes {
		m[k] = slices.Clone(v)
	}
	logs := map[string]string{}
	for k, v := range w.logs {
		logs[k] = v
	}
	return m, logs
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
