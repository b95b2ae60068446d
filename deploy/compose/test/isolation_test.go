package composetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// groupIsolation checks storage by group across etcd clusters: the
// compose file stores isolated.example.com's custom resources in the
// etcd-isolated cluster. With that cluster stopped, another group
// (stable.example.com, on the main cluster) keeps serving reads, writes and
// watches, and the CRD of the stopped group stays readable; requests for
// the stopped group fail within their timeout. When the cluster returns,
// its objects are all there, writes succeed and the watch opened before
// the outage delivers the new events.
func (s *stack) groupIsolation() {
	t := s.t
	t.Helper()
	s.kubectl("apply", "-f", "testdata/widgets-crd.yaml")
	s.kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/widgets.isolated.example.com")
	s.kubectl("apply", "-f", "../../../e2e/testdata/crontab-crd.yaml")
	s.kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/crontabs.stable.example.com")
	s.createWidget("before")
	s.createCronTab("main-before")

	client, host := s.restClient()
	widgets := host + "/apis/isolated.example.com/v1/namespaces/default/widgets"
	crontabs := host + "/apis/stable.example.com/v1/namespaces/default/crontabs"
	widgetWatch := startWatch(t, client, widgets)
	cronWatch := startWatch(t, client, crontabs)

	etcd := s.MustContainers("etcd-isolated")
	if len(etcd) != 1 {
		t.Fatalf("etcd-isolated containers: %v", etcd)
	}
	tStop := time.Now()
	s.MustDocker("stop", etcd[0])
	t.Logf("stopped %s in %s", etcd[0], time.Since(tStop).Round(10*time.Millisecond))

	// The main cluster's groups serve on.
	s.createCronTab("main-during")
	cronWatch.expect("ADDED main-during")
	if out := s.kubectl("get", "crontabs", "-o", "name"); !strings.Contains(out, "crontab.stable.example.com/main-during") {
		t.Fatalf("kubectl get crontabs while etcd-isolated is down: %q", out)
	}
	s.kubectl("get", "crd", "widgets.isolated.example.com")
	// The isolated group fails, within the request's timeout.
	tFail := time.Now()
	out, err := s.kubectlRun("get", "widgets", "--request-timeout=3s")
	if err == nil {
		t.Fatalf("kubectl get widgets with etcd-isolated down succeeded: %s", out)
	}
	if d := time.Since(tFail); d > 15*time.Second {
		t.Errorf("kubectl get widgets with etcd-isolated down took %s", d)
	}
	t.Logf("with etcd-isolated down: crontabs served; kubectl get widgets failed in %s: %s", time.Since(tFail).Round(10*time.Millisecond), strings.TrimSpace(out))

	tStart := time.Now()
	s.MustDocker("start", etcd[0])
	if err := s.WaitEtcdHealthy(etcd[0], 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// Its group resumes: the first write may wait for the client's
	// reconnection.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.tryCreateWidget("after")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no widget write within 30s of etcd-isolated's return: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("isolated.example.com writes again %s after etcd-isolated started", time.Since(tStart).Round(100*time.Millisecond))
	widgetWatch.expect("ADDED after")
	out = s.kubectl("get", "widgets", "-o", "name")
	if strings.TrimSpace(out) != "widget.isolated.example.com/after\nwidget.isolated.example.com/before" {
		t.Fatalf("widgets after etcd-isolated returned: %q", out)
	}
	s.kubectl("delete", "widgets", "--all")
	s.kubectl("delete", "crontabs", "main-before", "main-during")
	t.Log("group isolation passed")
}

// restClient is an HTTP client with the stack's kubeconfig credentials,
// and the server's URL.
func (s *stack) restClient() (*http.Client, string) {
	s.t.Helper()
	return kubeClient(s.t, s.Kubeconfig)
}

func (s *stack) createCronTab(name string) {
	s.t.Helper()
	file := s.objectFile(fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":%q},"spec":{"cronSpec":"* * * * */5","image":"x","replicas":1}}`, name))
	s.kubectl("create", "-f", file)
}

func (s *stack) createWidget(name string) {
	s.t.Helper()
	if err := s.tryCreateWidget(name); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) tryCreateWidget(name string) error {
	file := s.objectFile(fmt.Sprintf(`{"apiVersion":"isolated.example.com/v1","kind":"Widget","metadata":{"name":%q},"spec":{"size":1}}`, name))
	out, err := s.kubectlRun("create", "-f", file, "--request-timeout=5s")
	if err != nil {
		return fmt.Errorf("create widget %s: %v: %s", name, err, out)
	}
	return nil
}

// objectFile writes a manifest to a file of its own.
func (s *stack) objectFile(manifest string) string {
	s.t.Helper()
	f, err := os.CreateTemp(s.t.TempDir(), "object-*.json")
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(manifest); err != nil {
		s.t.Fatal(err)
	}
	return f.Name()
}

// watchStream is a watch through the gateway, its events as "TYPE name".
type watchStream struct {
	t      interface{ Fatalf(string, ...any) }
	events chan string
}

func startWatch(t interface {
	Fatalf(string, ...any)
	Cleanup(func())
}, client *http.Client, url string) *watchStream {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"?watch=1&timeoutSeconds=600", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("watch %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %s", url, resp.Status)
	}
	w := &watchStream{t: t, events: make(chan string, 100)}
	go func() {
		defer resp.Body.Close()
		defer close(w.events)
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name string `json:"name"`
					} `json:"metadata"`
				} `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				return
			}
			if ev.Type != "BOOKMARK" {
				w.events <- ev.Type + " " + ev.Object.Metadata.Name
			}
		}
	}()
	return w
}

// expect waits (30s at most) for the next events, skipping the initial
// ADDED events of objects that existed when the watch began.
func (w *watchStream) expect(want string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got, ok := <-w.events:
			if !ok {
				w.t.Fatalf("the watch ended before %q", want)
			}
			if got == want {
				return
			}
			if !strings.HasPrefix(got, "ADDED ") {
				w.t.Fatalf("watch event %q, want %q", got, want)
			}
		case <-timeout:
			w.t.Fatalf("no watch event %q within 30s", want)
		}
	}
}
