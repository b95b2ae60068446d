package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// kubectlAt runs the pinned kubectl with args only (its own kubeconfig
// and server flags in args) and returns stdout, stderr and the error.
func kubectlAt(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBinary(), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func mustKubectlAt(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlAt(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// background is a long-running client process (a watch).
type background struct {
	cmd *exec.Cmd
	out syncBuffer
	err syncBuffer
}

func startBackground(t *testing.T, name string, args ...string) *background {
	t.Helper()
	b := &background{cmd: exec.Command(name, args...)}
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.err
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
	})
	return b
}

// waitFor waits until the process's output contains want.
func (b *background) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in its output:\n%s\nstderr: %s", strings.Join(b.cmd.Args, " "), want, b.out.String(), b.err.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var proxyServing = regexp.MustCompile(`Starting to serve on (\S+)`)

// startKubectlProxy runs `kubectl proxy` against s on a free port and
// returns its address.
func startKubectlProxy(t *testing.T, s *server) string {
	t.Helper()
	b := startBackground(t, kubectlBinary(), "--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir, "proxy", "--port=0")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := proxyServing.FindStringSubmatch(b.out.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl proxy did not start: %s %s", b.out.String(), b.err.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func curl(t *testing.T, args ...string) (code int, body string) {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	code, _ = strconv.Atoi(s[i+1:])
	return code, s[:i]
}

const cronTabsPath = "/apis/stable.example.com/v1/namespaces/default/crontabs"

func cronTabJSON(name string) string {
	return fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":%q},"spec":{"cronSpec":"* * * * */5","image":"img","replicas":3}}`, name)
}

// TestKubectlProxy drives crdplane through `kubectl proxy`: curl and
// kubectl -s get, create and watch custom resources through it.
func TestKubectlProxy(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	s := startServer(t, "")
	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/crontabs.stable.example.com")
	proxy := "http://" + startKubectlProxy(t, s)
	empty := filepath.Join(t.TempDir(), "empty-kubeconfig")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	k := func(args ...string) []string {
		return append([]string{"--kubeconfig", empty, "--cache-dir", filepath.Join(t.TempDir(), "cache"), "-s", proxy}, args...)
	}

	// curl: list, create, get, through the proxy's credentials.
	// (curl's answers are indented, as kube-apiserver indents them for
	// curl's User-Agent.)
	code, body := curl(t, proxy+cronTabsPath)
	var list struct {
		Kind     string                           `json:"kind"`
		Metadata struct{ ResourceVersion string } `json:"metadata"`
		Items    []map[string]any                 `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != 200 || list.Kind != "CronTabList" || len(list.Items) != 0 {
		t.Fatalf("list: %d %s %v", code, body, err)
	}
	var obj struct {
		Metadata struct{ Name string }  `json:"metadata"`
		Spec     struct{ Replicas int } `json:"spec"`
	}
	curlWatch := startBackground(t, "curl", "-sN", proxy+cronTabsPath+"?watch=1&resourceVersion="+list.Metadata.ResourceVersion)
	// kubectl's watch lists first (it prints the existing "a-first"), then
	// watches from the list's resourceVersion: nothing created after the
	// list is missed.
	mustKubectlAt(t, cronTabJSON("a-first"), k("create", "-f", "-")...)
	kubectlWatch := startBackground(t, kubectlBinary(), k("get", "crontabs", "--watch", "-o", "name")...)
	kubectlWatch.waitFor(t, "crontab.stable.example.com/a-first")

	code, body = curl(t, "-X", "POST", "-H", "Content-Type: application/json", "-d", cronTabJSON("by-curl"), proxy+cronTabsPath)
	if err := json.Unmarshal([]byte(body), &obj); err != nil || code != 201 || obj.Metadata.Name != "by-curl" {
		t.Fatalf("create: %d %s %v", code, body, err)
	}
	code, body = curl(t, proxy+cronTabsPath+"/by-curl")
	if err := json.Unmarshal([]byte(body), &obj); err != nil || code != 200 || obj.Spec.Replicas != 3 {
		t.Fatalf("get: %d %s %v", code, body, err)
	}

	// kubectl -s: create and get.
	mustKubectlAt(t, cronTabJSON("by-kubectl"), k("create", "-f", "-")...)
	if out := mustKubectlAt(t, "", k("get", "crontabs", "-o", "name")...); out != "crontab.stable.example.com/a-first\ncrontab.stable.example.com/by-curl\ncrontab.stable.example.com/by-kubectl\n" {
		t.Fatalf("kubectl get through the proxy: %q", out)
	}

	// Both watches see both creations.
	curlWatch.waitFor(t, `"by-kubectl"`)
	kubectlWatch.waitFor(t, "crontab.stable.example.com/by-curl")
	kubectlWatch.waitFor(t, "crontab.stable.example.com/by-kubectl")
	var events []string
	for d := json.NewDecoder(strings.NewReader(curlWatch.out.String())); ; {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Kind     string                `json:"kind"`
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"object"`
		}
		if err := d.Decode(&ev); err != nil {
			break
		}
		events = append(events, ev.Type+" "+ev.Object.Kind+" "+ev.Object.Metadata.Name)
	}
	if got := strings.Join(events, ", "); got != "ADDED CronTab a-first, ADDED CronTab by-curl, ADDED CronTab by-kubectl" {
		t.Fatalf("curl watch events: %s\n%s", got, curlWatch.out.String())
	}

	// Written once each: the server's own view.
	if out := s.must(t, "get", "crontabs", "-o", "jsonpath={.items[*].metadata.name}"); out != "a-first by-curl by-kubectl" {
		t.Fatalf("stored: %q", out)
	}
}

// socks5Server is a small SOCKS5 (RFC 1928) proxy with optional
// username/password authentication (RFC 1929): CONNECT only, names
// resolved through hosts first.
type socks5Server struct {
	addr           string
	user, password string // both empty: no authentication
	hosts          map[string]string
	ln             net.Listener

	conns      atomic.Int64 // tunnels opened
	authFailed atomic.Int64
	mu         sync.Mutex
	targets    []string
}

func startSOCKS5(t *testing.T, user, password string, hosts map[string]string) *socks5Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &socks5Server{addr: ln.Addr().String(), user: user, password: password, hosts: hosts, ln: ln}
	var wg sync.WaitGroup
	var open sync.Map
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer open.Delete(c)
				defer func() { _ = c.Close() }()
				_ = s.serve(c, &open)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		open.Range(func(c, _ any) bool { _ = c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return s
}

func (s *socks5Server) serve(c net.Conn, open *sync.Map) error {
	br := bufio.NewReader(c)
	// Greeting: VER NMETHODS METHODS.
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(br, hdr); err != nil || hdr[0] != 5 {
		return errors.New("not SOCKS5")
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return err
	}
	want := byte(0x00)
	if s.user != "" {
		want = 0x02
	}
	if bytes.IndexByte(methods, want) < 0 {
		_, _ = c.Write([]byte{5, 0xff})
		return errors.New("no acceptable method")
	}
	if _, err := c.Write([]byte{5, want}); err != nil {
		return err
	}
	if want == 0x02 {
		// VER ULEN UNAME PLEN PASSWD.
		v := make([]byte, 2)
		if _, err := io.ReadFull(br, v); err != nil {
			return err
		}
		uname := make([]byte, v[1])
		if _, err := io.ReadFull(br, uname); err != nil {
			return err
		}
		plen, err := br.ReadByte()
		if err != nil {
			return err
		}
		passwd := make([]byte, plen)
		if _, err := io.ReadFull(br, passwd); err != nil {
			return err
		}
		if string(uname) != s.user || string(passwd) != s.password {
			s.authFailed.Add(1)
			_, _ = c.Write([]byte{1, 1})
			return errors.New("authentication failed")
		}
		if _, err := c.Write([]byte{1, 0}); err != nil {
			return err
		}
	}
	// Request: VER CMD RSV ATYP DST.ADDR DST.PORT.
	req := make([]byte, 4)
	if _, err := io.ReadFull(br, req); err != nil {
		return err
	}
	var host string
	switch req[3] {
	case 1, 4:
		ip := make([]byte, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(br, ip); err != nil {
			return err
		}
		host = net.IP(ip).String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return err
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return err
		}
		host = string(name)
	default:
		return errors.New("bad address type")
	}
	port := make([]byte, 2)
	if _, err := io.ReadFull(br, port); err != nil {
		return err
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port))))
	reply := func(code byte) error {
		_, err := c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
		return err
	}
	if req[1] != 1 {
		_ = reply(7) // command not supported
		return errors.New("not CONNECT")
	}
	s.mu.Lock()
	s.targets = append(s.targets, target)
	s.mu.Unlock()
	addr := target
	if a, ok := s.hosts[target]; ok {
		addr = a
	}
	back, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		_ = reply(5) // connection refused
		return err
	}
	open.Store(back, true)
	defer open.Delete(back)
	defer func() { _ = back.Close() }()
	s.conns.Add(1)
	if err := reply(0); err != nil {
		return err
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(back, br); _ = back.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, back); _ = c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	<-done
	<-done
	return nil
}

func (s *socks5Server) targetsSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

// socksKubeconfig is s's kubeconfig with the server named by host (a name
// only the SOCKS server resolves) and reached through proxyURL.
func socksKubeconfig(t *testing.T, s *server, host, proxyURL string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = host
		c.Server = u.String()
		c.ProxyURL = proxyURL
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlSOCKS5 drives crdplane with kubectl through a kubeconfig's
// proxy-url: socks5://, with and without username/password: get, create
// and watch, every connection through the SOCKS server (the server's name
// resolves only there).
func TestKubectlSOCKS5(t *testing.T) {
	const name = "crdplane.socks.invalid"
	s := startServer(t, "", "--hosts", name)
	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/crontabs.stable.example.com")
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := net.JoinHostPort(name, u.Port())
	hosts := map[string]string{host: u.Host}

	// Without the proxy, the name does not resolve.
	direct := socksKubeconfig(t, s, host, "")
	if _, errOut, err := kubectlAt(t, "", "--kubeconfig", direct, "--cache-dir", filepath.Join(t.TempDir(), "c"), "get", "crontabs"); err == nil || !strings.Contains(errOut, "lookup "+name) {
		t.Fatalf("direct: %v %s", err, errOut)
	}

	for _, tc := range []struct {
		name, user, password, proxyUser string
	}{
		{name: "no auth"},
		{name: "username and password", user: "alice", password: "s3cr3t", proxyUser: "alice:s3cr3t@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socks := startSOCKS5(t, tc.user, tc.password, hosts)
			kc := socksKubeconfig(t, s, host, "socks5://"+tc.proxyUser+socks.addr)
			k := func(args ...string) []string {
				return append([]string{"--kubeconfig", kc, "--cache-dir", filepath.Join(t.TempDir(), "cache")}, args...)
			}
			obj := "socks-" + strings.ReplaceAll(tc.name, " ", "-")
			watch := startBackground(t, kubectlBinary(), k("get", "crontabs", "--watch", "-o", "name")...)
			mustKubectlAt(t, cronTabJSON(obj), k("create", "-f", "-")...)
			if out := mustKubectlAt(t, "", k("get", "crontab", obj, "-o", "jsonpath={.spec.replicas}")...); out != "3" {
				t.Fatalf("get through SOCKS5: %q", out)
			}
			watch.waitFor(t, "crontab.stable.example.com/"+obj)
			if socks.conns.Load() < 3 {
				t.Fatalf("%d SOCKS5 tunnels for 3 kubectl processes", socks.conns.Load())
			}
			for _, target := range socks.targetsSeen() {
				if target != host {
					t.Fatalf("SOCKS5 CONNECT to %s, want %s", target, host)
				}
			}
			if socks.authFailed.Load() != 0 {
				t.Fatalf("%d failed authentications", socks.authFailed.Load())
			}
			if tc.user == "" {
				return
			}
			// A wrong password is refused by the proxy: nothing reaches
			// crdplane, nothing is written.
			bad := socksKubeconfig(t, s, host, "socks5://alice:wrong@"+socks.addr)
			before := socks.conns.Load()
			_, errOut, err := kubectlAt(t, cronTabJSON("refused"), "--kubeconfig", bad, "--cache-dir", filepath.Join(t.TempDir(), "c"), "create", "-f", "-")
			if err == nil || !strings.Contains(errOut, "socks connect") || !strings.Contains(errOut, "username/password authentication failed") {
				t.Fatalf("wrong password: %v %s", err, errOut)
			}
			if socks.authFailed.Load() == 0 || socks.conns.Load() != before {
				t.Fatalf("auth failures %d, tunnels %d (before %d)", socks.authFailed.Load(), socks.conns.Load(), before)
			}
			if _, errOut, err := s.kubectl(t, "", "get", "crontab", "refused"); err == nil || !strings.Contains(errOut, `"refused" not found`) {
				t.Fatalf("refused object: %v %s", err, errOut)
			}
		})
	}
}
