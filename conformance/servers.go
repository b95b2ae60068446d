// Package conformance is the conformance oracle: it runs upstream
// apiextensions-apiserver and crdplane side by side, sends both the same
// requests (cases are YAML data files under cases/), normalises what
// legitimately differs and reports every other difference in status code,
// body, the headers clients read, and watch events.
package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is one API server under comparison.
type Server struct {
	Name  string // "upstream" or "crdplane"
	URL   string // https://127.0.0.1:NNNN
	Token string

	client *http.Client
	cmd    *exec.Cmd
	logs   *logBuffer
}

func newServer(name, rawURL, token string, cmd *exec.Cmd, logs *logBuffer) *Server {
	tr := &http.Transport{
		// Both servers serve self-signed loopback certificates; the oracle
		// compares answers, not certificates.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test servers only
		MaxIdleConnsPerHost: 8,
	}
	return &Server{Name: name, URL: rawURL, Token: token, cmd: cmd, logs: logs,
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// Pid is the server process's id (0 before it started): benchmarks read
// its CPU time from /proc.
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Host is the server's host:port, as it may appear in answers.
func (s *Server) Host() string {
	u, err := url.Parse(s.URL)
	if err != nil {
		return s.URL
	}
	return u.Host
}

// Logs returns the tail of the server's own output.
func (s *Server) Logs() string {
	if s.logs == nil {
		return ""
	}
	b := s.logs.String()
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return b
}

// Stop ends the server process.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
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
}

// Do sends one request with the server's credentials.
func (s *Server) Do(ctx context.Context, method, path string, header http.Header, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "crdplane-conformance")
	}
	return s.client.Do(req)
}

// StartUpstream runs the apiextensions-upstream helper binary and waits for
// the line that gives its URL and token, then for /readyz.
func StartUpstream(ctx context.Context, bin, dir string) (*Server, error) {
	cmd := exec.Command(bin, "--dir", dir)
	line, logs, err := startProcess("upstream", cmd, 120*time.Second, func(line string) (string, bool) {
		return line, strings.HasPrefix(line, "{")
	})
	if err != nil {
		return nil, err
	}
	var info struct{ URL, Token string }
	if err := json.Unmarshal([]byte(line), &info); err != nil {
		return nil, fmt.Errorf("upstream start line %q: %w", line, err)
	}
	s := newServer("upstream", info.URL, info.Token, cmd, logs)
	// Its /readyz never passes: the informer of core Services (for webhook
	// service references) has no kube-apiserver to list from. /healthz is
	// what upstream's own integration fixtures wait for.
	return s, s.waitReady(ctx, "/healthz")
}

var servingLine = regexp.MustCompile(`serving the Kubernetes API at (https://\S+)`)

// StartCrdplane runs `crdplane run` on a free loopback port with its own
// data directory and a fixed token; extra flags are appended (the scale
// benchmark's --ops-listen and --profiling).
func StartCrdplane(ctx context.Context, bin, dir string, extra ...string) (*Server, error) {
	const token = "conformance-token"
	args := append([]string{"run", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "etcd"),
		"--kubeconfig", filepath.Join(dir, "kubeconfig"), "--token", token, "--log-format", "text", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	u, logs, err := startProcess("crdplane", cmd, 60*time.Second, func(line string) (string, bool) {
		if m := servingLine.FindStringSubmatch(line); m != nil {
			return m[1], true
		}
		return "", false
	})
	if err != nil {
		return nil, err
	}
	s := newServer("crdplane", u, token, cmd, logs)
	return s, s.waitReady(ctx, "/readyz")
}

// startProcess starts cmd, its stderr kept in the log buffer it returns, and
// waits at most timeout for the first line of its stdout that match accepts;
// it returns what match made of that line. Stdout is read on to its end, so
// that the process never blocks writing it. If no line comes in time, the
// process is killed.
func startProcess(name string, cmd *exec.Cmd, timeout time.Duration, match func(line string) (string, bool)) (string, *logBuffer, error) {
	logs := &logBuffer{}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			if v, ok := match(sc.Text()); ok {
				select {
				case found <- v:
				default:
				}
			}
		}
	}()
	select {
	case v := <-found:
		return v, logs, nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		return "", nil, fmt.Errorf("%s did not start in %.0fs: %s", name, timeout.Seconds(), logs.String())
	}
}

func (s *Server) waitReady(ctx context.Context, path string) error {
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := s.Do(ctx, http.MethodGet, path, nil, nil)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.Stop()
	return errors.New(s.Name + " not ready after 90s: " + last + "\n" + s.Logs())
}

// logBuffer holds a process's output; it is read while it is written.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
