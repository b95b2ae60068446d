package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/metrics"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
)

var storageSeq atomic.Int64

// ownStorage serves the backends' storage service on a gRPC server of
// its own, which the test stops and starts again (same address); panicOn
// names a method whose calls panic while set.
type ownStorage struct {
	t       *testing.T
	b       *backendtest.Backends
	addr    string
	stop    func()
	panicOn atomic.Value // string
}

func newOwnStorage(t *testing.T, b *backendtest.Backends) *ownStorage {
	s := &ownStorage{t: t, b: b, addr: fmt.Sprintf("own-storage-%d", storageSeq.Add(1))}
	s.panicOn.Store("")
	s.start()
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *ownStorage) start() {
	srv := grpcx.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if m := s.panicOn.Load().(string); m != "" && strings.HasSuffix(info.FullMethod, "/"+m) {
			panic("storage bug in " + m)
		}
		return handler(ctx, req)
	}))
	s.b.Storage.Register(srv)
	lis := grpcx.ListenInProcess(s.addr)
	go func() { _ = srv.Serve(lis) }()
	s.stop = srv.Stop
}

// gatewayOver starts a gateway over b with storage at storageAddr.
func gatewayOver(t *testing.T, b *backendtest.Backends, storageAddr string) *testGateway {
	t.Helper()
	svc, err := New(context.Background(), Config{
		RegistryAddr: b.RegistryAddr, ValidatorAddr: b.ValidatorAddr, StorageAddr: storageAddr, ConverterAddr: b.ConverterAddr,
		Tokens: []string{testToken}, CRDWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	g := &testGateway{t: t, svc: svc, srv: srv, backends: b}
	g.waitReady()
	return g
}

// TestReadyzFollowsStorage: the gateway's /readyz fails (500, upstream's
// format) within seconds of storage going away, and passes again once it
// is back.
func TestReadyzFollowsStorage(t *testing.T) {
	b := backendtest.Start(t)
	st := newOwnStorage(t, b)
	g := gatewayOver(t, b, "inproc://"+st.addr)

	readyz := func(query string) (int, string) {
		resp, body := g.do("GET", "/readyz"+query, nil, "Authorization", "")
		return resp.StatusCode, string(body)
	}
	waitFor := func(what string, within time.Duration, ok func(int, string) bool) time.Duration {
		t.Helper()
		began := time.Now()
		for {
			code, body := readyz("")
			if ok(code, body) {
				return time.Since(began)
			}
			if time.Since(began) > within {
				t.Fatalf("%s: /readyz still %d %q after %s", what, code, body, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("ready at start", 10*time.Second, func(code int, body string) bool { return code == 200 && body == "ok" })
	if code, body := readyz("?verbose=true"); code != 200 || body != "[+]ping ok\n[+]crd-cache ok\n[+]storage ok\n[+]registry ok\n[+]shutdown ok\nreadyz check passed\n" {
		t.Fatalf("verbose: %d %q", code, body)
	}

	st.stop()
	took := waitFor("storage stopped", 5*time.Second, func(code int, _ string) bool { return code == http.StatusInternalServerError })
	t.Logf("not ready %s after storage stopped", took.Round(time.Millisecond))
	code, body := readyz("")
	if code != 500 || body != "[+]ping ok\n[+]crd-cache ok\n[-]storage failed: reason withheld\n[+]registry ok\n[+]shutdown ok\nreadyz check failed\n" {
		t.Fatalf("not ready: %d %q", code, body)
	}
	if err := g.svc.Ready(); err == nil || !strings.HasPrefix(err.Error(), "storage: ") {
		t.Fatalf("Ready: %v", err)
	}

	st.start()
	took = waitFor("storage back", 15*time.Second, func(code int, body string) bool { return code == 200 && body == "ok" })
	t.Logf("ready %s after storage came back", took.Round(time.Millisecond))
}

// TestPanicsBecome500: a panic in the gateway's handlers is a 500 Status
// with upstream's message (crdplane_panics_total{service="gateway"}); a
// backend's panic is its gRPC server's Internal error, a 500 too; the
// gateway serves on.
func TestPanicsBecome500(t *testing.T) {
	b := backendtest.Start(t)
	st := newOwnStorage(t, b)
	g := gatewayOver(t, b, "inproc://"+st.addr)
	g.createCronTabCRD()
	const objects = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	g.expect(http.StatusCreated, "POST", objects, cronTab("a", map[string]any{"color": "red"}))

	// A storage handler panics: Internal, a 500 InternalError.
	before := metrics.Panics("crdplane.storage.v1.StorageService")
	st.panicOn.Store("Get")
	out := g.expect(http.StatusInternalServerError, "GET", objects+"/a", nil)
	if out["reason"] != "InternalError" || !strings.Contains(fmt.Sprint(out["message"]), "/crdplane.storage.v1.StorageService/Get: the server panicked") {
		t.Fatalf("storage panic: %v", out)
	}
	if got := metrics.Panics("crdplane.storage.v1.StorageService") - before; got != 1 {
		t.Errorf("storage panics counted: %v", got)
	}
	st.panicOn.Store("")
	g.expect(http.StatusOK, "GET", objects+"/a", nil)

	// A gateway handler panics (a nil server, as a bug would leave it).
	before = metrics.Panics("gateway")
	crAPI := g.svc.api.crAPI
	g.svc.api.crAPI = nil
	resp, body := g.do("GET", objects, nil)
	g.svc.api.crAPI = crAPI
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"This request caused apiserver to panic. Look in the logs for details.","reason":"InternalError","code":500}` + "\n"
	if resp.StatusCode != 500 || string(body) != want || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("gateway panic: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if got := metrics.Panics("gateway") - before; got != 1 {
		t.Errorf("gateway panics counted: %v", got)
	}
	g.expect(http.StatusOK, "GET", objects, nil)
}

// TestRecoverPanicsMidResponse: a handler that panics once its response
// has started cannot answer 500: the response is cut; the server lives on.
func TestRecoverPanicsMidResponse(t *testing.T) {
	srv := httptest.NewServer(httpx.RecoverPanics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = io.WriteString(w, "fine")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"ADDED"`)
		w.(http.Flusher).Flush()
		panic("mid-stream")
	})))
	defer srv.Close()
	before := metrics.Panics("gateway")
	resp, err := srv.Client().Get(srv.URL + "/watch")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("the response of a handler that panicked mid-stream ended cleanly")
	}
	if got := metrics.Panics("gateway") - before; got != 1 {
		t.Errorf("panics counted: %v", got)
	}
	resp, err = srv.Client().Get(srv.URL + "/ok")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the panic: %v %v", resp, err)
	}
	resp.Body.Close()

}
