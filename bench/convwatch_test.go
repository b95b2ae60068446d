package bench

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"crypto/tls"

	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/examples/crontab-conversion-webhook/conversion"
	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

// gatedWebhook serves the example conversion at /convert/a and
// /convert/b; while hang is set, /convert/a answers nothing until released.
type gatedWebhook struct {
	base    string
	caPEM   []byte
	hang    atomic.Bool
	release chan struct{}
	hung    atomic.Int64 // reviews held
}

func startGatedWebhook(t testing.TB) *gatedWebhook {
	t.Helper()
	pki, err := localpki.Generate([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pki.ServingCertPEM, pki.ServingKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	w := &gatedWebhook{caPEM: pki.CACertPEM, release: make(chan struct{})}
	h := &conversion.Handler{}
	mux := http.NewServeMux()
	mux.Handle("/convert/b", h)
	mux.HandleFunc("/convert/a", func(rw http.ResponseWriter, r *http.Request) {
		if w.hang.Load() {
			w.hung.Add(1)
			select {
			case <-w.release:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(rw, r)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	w.base = srv.URL + "/convert/"
	return w
}

// arrivals watches url and records when each ADDED object (by name)
// arrived, until ctx ends.
type arrivals struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

func watchArrivals(t testing.TB, ctx context.Context, client *http.Client, token, url string) *arrivals {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: HTTP %d", url, resp.StatusCode)
	}
	a := &arrivals{at: map[string]time.Time{}}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name string `json:"name"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "ADDED" {
				a.mu.Lock()
				a.at[ev.Object.Metadata.Name] = time.Now()
				a.mu.Unlock()
			}
		}
	}()
	return a
}

// TestConvertedWatchIsolation: while the conversion webhook of one CRD
// hangs, the watches that need it wait, and nothing else does: the same
// CRD's watch at its storage version and another CRD's watches (converted
// and not) deliver every event promptly. Once the webhook answers again,
// the waiting watch delivers.
func TestConvertedWatchIsolation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts crdplane")
	}
	w := startGatedWebhook(t)
	p, cfg := platformtest.StartConfig(t, platform.Config{})
	dc := dynamic.NewForConfigOrDie(cfg)
	ca := base64.StdEncoding.EncodeToString(w.caPEM)
	docA := strings.NewReplacer("WEBHOOK_URL", w.base+"a", "CA_BUNDLE", ca).Replace(conversionCRD)
	docB := strings.NewReplacer("WEBHOOK_URL", w.base+"b", "CA_BUNDLE", ca, "example.com", "other.example.com").Replace(conversionCRD)
	platformtest.CreateCRD(t, dc, platformtest.Object(t, []byte(docA)))
	platformtest.CreateCRD(t, dc, platformtest.Object(t, []byte(docB)))
	client := platformtest.HTTPClient(p)
	client.Timeout = 0

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watchURL := func(group, version string) string {
		return fmt.Sprintf("%s/apis/%s/%s/namespaces/default/crontabs?watch=true&resourceVersion=0", p.URL, group, version)
	}
	hungWatch := watchArrivals(t, ctx, client, p.Token, watchURL("example.com", "v1"))
	others := map[string]*arrivals{
		"example.com/v1beta1 (storage version, same CRD)": watchArrivals(t, ctx, client, p.Token, watchURL("example.com", "v1beta1")),
		"other.example.com/v1 (another CRD, converted)":   watchArrivals(t, ctx, client, p.Token, watchURL("other.example.com", "v1")),
		"other.example.com/v1beta1 (another CRD, stored)": watchArrivals(t, ctx, client, p.Token, watchURL("other.example.com", "v1beta1")),
	}
	group := map[string]string{}
	for k := range others {
		group[k] = strings.SplitN(k, "/", 2)[0]
	}
	w.hang.Store(true)

	const n = 100 // objects per CRD, created 10 ms apart, both CRDs interleaved
	sent := map[string]time.Time{}
	for i := range n {
		for _, g := range []string{"example.com", "other.example.com"} {
			name := fmt.Sprintf("obj-%03d", i)
			body := strings.Replace(string(cronTabJSON(name)), `"example.com/v1beta1"`, `"`+g+`/v1beta1"`, 1)
			sent[g+"/"+name] = time.Now()
			if code := do(t, client, p, http.MethodPost, fmt.Sprintf("%s/apis/%s/v1beta1/namespaces/default/crontabs", p.URL, g), []byte(body)); code != http.StatusCreated {
				t.Fatalf("create %s in %s: HTTP %d", name, g, code)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for k, a := range others {
		for a.count() < n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if c := a.count(); c != n {
			t.Fatalf("%s: %d of %d events while the other webhook hangs", k, c, n)
		}
		var lags []time.Duration
		a.mu.Lock()
		for name, at := range a.at {
			lags = append(lags, at.Sub(sent[group[k]+"/"+name]))
		}
		a.mu.Unlock()
		p99 := percentile(lags, 0.99)
		t.Logf("%s: %d events, lag p50 %v p99 %v", k, n, percentile(lags, 0.5), p99)
		if p99 > 500*time.Millisecond {
			t.Errorf("%s: lag p99 %v while another CRD's webhook hangs", k, p99)
		}
	}
	if c := hungWatch.count(); c != 0 || w.hung.Load() == 0 {
		t.Fatalf("the watch whose webhook hangs delivered %d events (%d reviews held)", c, w.hung.Load())
	}
	// The webhook answers again: the waiting watch delivers.
	w.hang.Store(false)
	close(w.release)
	for hungWatch.count() == 0 && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(10 * time.Millisecond)
	}
	if hungWatch.count() == 0 {
		t.Fatal("the converted watch delivered nothing once its webhook answered")
	}
	t.Logf("converted watch of the hung webhook: %d events once released", hungWatch.count())
}
