package gateway

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crdplane/crdplane/services/gateway/httpx"

	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
)

// blockingHandler holds the requests with an X-Hold header until
// release is closed; others it answers at once.
type blockingHandler struct {
	entered chan string
	release chan struct{}
}

func newBlocking() *blockingHandler {
	return &blockingHandler{entered: make(chan string, 100), release: make(chan struct{})}
}

func (b *blockingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Hold") != "" {
		b.entered <- r.Method + " " + r.URL.Path
		<-b.release
	}
	w.WriteHeader(http.StatusOK)
}

// TestMaxInFlight: GET requests and requests of other verbs have their own
// budgets, as kube-apiserver's --max-requests-inflight and
// --max-mutating-requests-inflight; beyond one, the request is answered as
// kube-apiserver answers it, byte for byte. Watches and health checks are
// not counted.
func TestMaxInFlight(t *testing.T) {
	next := newBlocking()
	e := &httpx.Edge{Tokens: httpx.NewTokenSet([]string{"tok"}), MaxBody: 1 << 20, RequestTimeout: time.Minute, Next: next,
		Inflight: httpx.NewInflightLimiter(2, 1), Watches: httpx.NewWatchLimiter(0, 0)}
	srv := httptest.NewServer(instrument(e))
	defer srv.Close()
	released := false
	defer func() {
		if !released {
			close(next.release)
		}
	}()

	send := func(method, path string, hdr ...string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	var wg sync.WaitGroup
	hold := func(method, path string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := send(method, path, "X-Hold", "1")
			resp.Body.Close()
		}()
		select {
		case <-next.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s never reached the handler", method, path)
		}
	}
	refused := func(method, path string) {
		t.Helper()
		resp := send(method, path)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		want := "Too many requests, please try again later.\n"
		if method == "HEAD" {
			want = ""
		}
		if resp.StatusCode != http.StatusTooManyRequests || string(body) != want ||
			resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s %s: %d %q %v, want kube-apiserver's 429", method, path, resp.StatusCode, body, resp.Header)
		}
	}
	const objects = "/apis/stable.example.com/v1/namespaces/default/crontabs"

	hold("GET", objects)
	hold("GET", "/apis")
	refused("GET", objects+"/a")
	refused("GET", "/version")
	refused("HEAD", objects+"/a") // a resource's HEAD is a get
	// Mutating requests have their own budget.
	hold("POST", objects)
	refused("PUT", objects+"/a")
	refused("DELETE", objects+"/a")
	// Watches are long-running: not counted (they reach the handler).
	hold("GET", objects+"?watch=true")
	hold("GET", "/apis/stable.example.com/v1/watch/crontabs")
	// Health checks are exempt.
	hold("GET", "/readyz")
	hold("GET", "/livez")

	refused("HEAD", "/apis") // a mutating verb ("head"), as upstream counts it

	// Slots come back as requests end.
	close(next.release)
	released = true
	wg.Wait()
	for _, method := range []string{"GET", "HEAD", "POST"} {
		resp := send(method, "/apis")
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s after the requests ended: %d", method, resp.StatusCode)
		}
	}
}

// TestLimitsFlags: the flags default to kube-apiserver's limits (and the
// watch limits'), 0 disables one and a negative one is refused as upstream
// refuses it.
func TestLimitsFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.MaxRequestsInFlight != 400 || c.MaxMutatingRequestsInFlight != 200 || c.MaxWatchesPerClient != 1000 || c.MaxWatches != 10000 {
		t.Fatalf("defaults: %+v", c.Limits)
	}
	if err := fs.Parse([]string{"--max-requests-inflight=-1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Limits.check(); err == nil || err.Error() != "--max-requests-inflight can not be negative value" {
		t.Fatalf("negative: %v", err)
	}
	if _, err := New(context.Background(), Config{RegistryAddr: "x", ValidatorAddr: "x", StorageAddr: "x", Limits: Limits{MaxWatches: -1}}); err == nil ||
		!strings.Contains(err.Error(), "--max-watches can not be negative value") {
		t.Fatalf("New with a negative limit: %v", err)
	}
}

// TestWatchLimits opens watches up to the per-client limit: the next one
// is a 429 TooManyRequests Status with Retry-After; another client still
// watches, up to the total limit; a closed watch frees its place. Clients
// are told apart by user (two tokens of one user share a budget) or, for a
// token without a user, by token.
func TestWatchLimits(t *testing.T) {
	b := backendtest.Start(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte("bob-1,bob,2\nbob-2,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const perClient, total = 3, 5
	svc, err := New(context.Background(), Config{
		RegistryAddr: b.RegistryAddr, ValidatorAddr: b.ValidatorAddr, StorageAddr: b.StorageAddr, ConverterAddr: b.ConverterAddr,
		Tokens: []string{"alice"}, Auth: Auth{TokenFile: tokenFile},
		Limits: Limits{MaxWatchesPerClient: perClient, MaxWatches: total},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)

	const watchPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true"
	watch := func(token string) (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+watchPath, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, cancel
	}
	open := func(token string) context.CancelFunc {
		t.Helper()
		resp, cancel := watch(token)
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("watch as %s: %d %s", token, resp.StatusCode, body)
		}
		return cancel
	}
	refused := func(token, message string) {
		t.Helper()
		resp, _ := watch(token)
		body, _ := io.ReadAll(resp.Body)
		var st struct {
			Kind, Status, Message, Reason string
			Code                          int
			Details                       struct{ RetryAfterSeconds int }
		}
		if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
			resp.Header.Get("Retry-After") != "1" || st.Kind != "Status" || st.Status != "Failure" ||
			st.Reason != "TooManyRequests" || st.Code != 429 || st.Details.RetryAfterSeconds != 1 || st.Message != message {
			t.Fatalf("watch as %s over the limit: %d %v %s", token, resp.StatusCode, resp.Header, body)
		}
	}

	var alice []context.CancelFunc
	for range perClient {
		alice = append(alice, open("alice"))
	}
	refused("alice", "Too many requests: this client has 3 watches open, the limit per client; please try again later.")
	// Bob is another client; his two tokens share his budget.
	open("bob-1")
	open("bob-2")
	refused("bob-1", "Too many requests: the server has 5 watches open, the limit; please try again later.")
	// A closed watch frees its place (once the gateway has seen it end).
	alice[0]()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, cancel := watch("bob-2")
		if resp.StatusCode == http.StatusOK {
			break
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("the closed watch's place never came back: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	refused("bob-1", "Too many requests: this client has 3 watches open, the limit per client; please try again later.")
	// Other requests are not watches.
	req, _ := http.NewRequest("GET", srv.URL+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", nil)
	req.Header.Set("Authorization", "Bearer alice")
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list while watches are at the limit: %v %v", resp, err)
	}
	resp.Body.Close()
}
