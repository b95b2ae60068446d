package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/crdplane/crdplane/pkg/grpcx"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// proc is a service process whose exit the test observes.
type proc struct {
	name string
	cmd  *exec.Cmd
	logs *bytes.Buffer
	done chan struct{}
	err  error // the exit, once done is closed
}

func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, logs: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(serviceBinary(t, name), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, tail(p.logs.String(), 3000))
		}
	})
	return p
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// exited waits for the process to exit and checks it exited 0.
func (p *proc) exited(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("%s exited with %v", p.name, p.err)
		}
	case <-time.After(within):
		t.Fatalf("%s still running %s after SIGTERM", p.name, within)
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

var getInFlightLine = regexp.MustCompile(`(?m)^crdplane_grpc_client_in_flight\{grpc_method="Get",grpc_service="crdplane\.storage\.v1\.StorageService",grpc_type="unary"\} ([1-9])`)

// getInFlight reports whether the gateway at its HTTP address is waiting
// for a StorageService.Get (from its /metrics).
func getInFlight(addr string) bool {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return getInFlightLine.Match(b)
}

// TestGracefulShutdown sends SIGTERM to each service process and checks the
// drain: readiness fails first (NOT_SERVING to gRPC health watchers; the
// gateway's /readyz answers 503 while requests are in flight), watches end
// at once instead of holding the stop, in-flight requests complete, and the
// process exits 0 well within its grace period.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	grpcAddr := map[string]string{}
	httpAddr := map[string]string{}
	for _, s := range []string{"storage", "registry", "validator", "converter", "gateway"} {
		grpcAddr[s], httpAddr[s] = freeAddr(t), freeAddr(t)
	}
	procs := map[string]*proc{
		"storage": startProc(t, "storage", "--grpc-listen", grpcAddr["storage"], "--http-listen", httpAddr["storage"], "--data-dir", filepath.Join(dir, "etcd")),
		"registry": startProc(t, "registry", "--grpc-listen", grpcAddr["registry"], "--http-listen", httpAddr["registry"],
			"--storage-addr", grpcAddr["storage"], "--validator-addr", grpcAddr["validator"]),
		"validator": startProc(t, "validator", "--grpc-listen", grpcAddr["validator"], "--http-listen", httpAddr["validator"],
			"--registry-addr", grpcAddr["registry"], "--converter-addr", grpcAddr["converter"]),
		"converter": startProc(t, "converter", "--grpc-listen", grpcAddr["converter"], "--http-listen", httpAddr["converter"],
			"--registry-addr", grpcAddr["registry"]),
	}
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	const token = "shutdown-test-token"
	certFile, keyFile, tokenFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "tokens.csv")
	for f, b := range map[string][]byte{certFile: pki.ServingCertPEM, keyFile: pki.ServingKeyPEM, tokenFile: []byte(token + ",admin,admin,system:masters\n")} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gwAddr := grpcAddr["gateway"]
	procs["gateway"] = startProc(t, "gateway", "--listen", gwAddr, "--http-listen", httpAddr["gateway"],
		"--registry-addr", grpcAddr["registry"], "--validator-addr", grpcAddr["validator"],
		"--converter-addr", grpcAddr["converter"], "--storage-addr", grpcAddr["storage"],
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--token-file", tokenFile, "--shutdown-grace", "20s")
	for _, s := range []string{"storage", "registry", "validator", "converter", "gateway"} {
		waitHTTP(t, "http://"+httpAddr[s]+"/readyz")
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pki.CACertPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	do := func(ctx context.Context, method, path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, "https://"+gwAddr+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/yaml")
		return client.Do(req)
	}
	mustDo := func(method, path, body string, want int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := do(ctx, method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
		}
	}
	crd, err := os.ReadFile(testdata("crontab-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := os.ReadFile(testdata("crontab-valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mustDo(http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", string(crd), http.StatusCreated)
	const crs = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := do(ctx, http.MethodPost, crs, string(obj))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating a CronTab: %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Run("gateway", func(t *testing.T) {
		gw := procs["gateway"]
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// A watch is open.
		resp, err := do(ctx, http.MethodGet, crs+"?watch=true", "")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := bufio.NewReader(resp.Body)
		if line, err := events.ReadString('\n'); err != nil || !strings.Contains(line, `"ADDED"`) {
			t.Fatalf("watch: %q %v", line, err)
		}
		watchEnded := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, events)
			watchEnded <- err
		}()
		// A request is in flight: its storage is frozen.
		procs["storage"].signal(t, syscall.SIGSTOP)
		defer func() { _ = procs["storage"].cmd.Process.Signal(syscall.SIGCONT) }()
		inflight := make(chan string, 1)
		go func() {
			resp, err := do(ctx, http.MethodGet, crs+"/my-new-cron-object?timeout=40s", "")
			if err != nil {
				inflight <- err.Error()
				return
			}
			resp.Body.Close()
			inflight <- resp.Status
		}()
		// Wait until the gateway has it (its call to storage is in flight).
		for deadline := time.Now().Add(30 * time.Second); !getInFlight(httpAddr["gateway"]); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the GET never reached the gateway")
			}
		}

		gw.signal(t, syscall.SIGTERM)
		select {
		case err := <-watchEnded:
			if err != nil {
				t.Errorf("the watch did not end cleanly: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("the watch was not ended by the shutdown")
		}
		code := 0
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if resp, err := http.Get("http://" + httpAddr["gateway"] + "/readyz"); err == nil {
				resp.Body.Close()
				if code = resp.StatusCode; code == http.StatusServiceUnavailable {
					break
				}
			}
		}
		if code != http.StatusServiceUnavailable {
			t.Errorf("gateway /readyz while draining: %d, want 503", code)
		}
		select {
		case got := <-inflight:
			t.Fatalf("the GET finished (%s) while its storage was stopped: nothing was in flight", got)
		default:
		}
		if !gw.running() {
			t.Fatal("the gateway exited with a request in flight")
		}
		procs["storage"].signal(t, syscall.SIGCONT)
		if got := <-inflight; got != "200 OK" {
			t.Errorf("the in-flight GET ended with %s, want 200 OK", got)
		}
		gw.exited(t, 5*time.Second)
	})

	// The gRPC services, dependents first.
	for _, name := range []string{"converter", "validator", "registry", "storage"} {
		t.Run(name, func(t *testing.T) {
			p := procs[name]
			cc, err := grpcx.Dial(grpcAddr[name])
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			health, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			// Serving (again: the gateway test froze storage for a while).
			for {
				st, err := health.Recv()
				if err != nil {
					t.Fatalf("health: %v", err)
				}
				if st.Status == healthpb.HealthCheckResponse_SERVING {
					break
				}
			}
			// A watch of the service's own, where it has one.
			var recv func() error
			switch name {
			case "storage":
				w, err := storagev1.NewStorageServiceClient(cc).Watch(ctx, &storagev1.WatchRequest{Prefix: "/registry/stable.example.com/crontabs/", SendInitialEvents: true})
				if err != nil {
					t.Fatal(err)
				}
				recv = func() error { _, err := w.Recv(); return err }
			case "registry":
				w, err := registryv1.NewRegistryServiceClient(cc).Watch(ctx, &registryv1.WatchRequest{SendInitialEvents: true})
				if err != nil {
					t.Fatal(err)
				}
				recv = func() error { _, err := w.Recv(); return err }
			}
			if recv != nil {
				if err := recv(); err != nil {
					t.Fatal(err)
				}
			}

			began := time.Now()
			p.signal(t, syscall.SIGTERM)
			if st, err := health.Recv(); err != nil || st.Status != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("health after SIGTERM: %v %v, want NOT_SERVING first", st, err)
			}
			if _, err := health.Recv(); err == nil {
				t.Error("the health watch did not end")
			}
			if recv != nil {
				for {
					if err := recv(); err != nil {
						if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "Canceled") {
							t.Errorf("the %s watch ended with %v", name, err)
						}
						break
					}
				}
			}
			// The default grace is 10s: a drain that waited for the streams
			// would take that long.
			p.exited(t, 5*time.Second)
			t.Logf("%s stopped %s after SIGTERM", name, time.Since(began).Round(10*time.Millisecond))
		})
	}
}
