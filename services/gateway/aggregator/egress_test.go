package aggregator

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/pkg/egress/egresstest"
)

// clusterEgress is a Selector whose cluster selection is an HTTPConnect
// proxy at proxyURL.
func clusterEgress(t *testing.T, proxyURL string) *egress.Selector {
	t.Helper()
	cfg, err := egress.ReadConfigFile(egresstest.WriteConfig(t, `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      tcp:
        url: `+proxyURL+`
`))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestProxyEgress: with an egress configuration, everything the
// aggregator sends to a backend (proxied requests, watches, upgrades and
// the availability check) goes through the cluster selection's proxy,
// which alone resolves the Service's name, as kube-aggregator's
// proxyTransportDial; without the proxy the backend cannot be reached.
func TestProxyEgress(t *testing.T) {
	b := newBackend(t)
	// api.wardle.svc:443 resolves only on the proxy's side (no override)
	p := egresstest.Start(t, egresstest.Options{Hosts: map[string]string{"api.wardle.svc:443": b.Listener.Addr().String()}})
	s := wardle(b.caBundle(), apiregistrationv1.ConditionTrue)
	f := &fakeClient{}
	a := New(Config{Client: f, Resolver: NewResolver(nil), Dial: clusterEgress(t, p.URL).Dialer(egress.Cluster).DialContext})
	a.replace(map[string]*apiregistrationv1.APIService{s.Name: s})
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}

	t.Run("get", func(t *testing.T) {
		rec := serve(a, httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one", nil), alice)
		if rec.Code != http.StatusOK || rec.Body.String() != `{"path":"/apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one"}` {
			t.Fatalf("= %d %q", rec.Code, rec.Body.String())
		}
		if got := b.last().Header.Get("X-Remote-User"); got != "alice" {
			t.Errorf("X-Remote-User = %q", got)
		}
	})

	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Handler(http.NotFoundHandler()).ServeHTTP(w, r.WithContext(request.WithUser(r.Context(), alice)))
	}))
	defer front.Close()

	t.Run("watch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/apis/wardle.example.com/v1alpha1/flunders?watch=true", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.Contains(line, `"ADDED"`) {
			t.Fatalf("first event = %q, %v", line, err)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", front.Listener.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = fmt.Fprintf(conn, "POST /apis/wardle.example.com/v1alpha1/namespaces/default/flunders/one/exec HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", front.Listener.Addr())
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Remote-User-Seen") != "alice" {
			t.Fatalf("= %d %v", resp.StatusCode, resp.Header)
		}
		_, _ = io.WriteString(conn, "ping\n")
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo = %q, %v", line, err)
		}
	})

	t.Run("availability", func(t *testing.T) {
		if err := a.sync(context.Background(), wardle(b.caBundle(), "")); err != nil {
			t.Fatal(err)
		}
		c := f.updates[len(f.updates)-1].Status.Conditions
		if len(c) != 1 || c[0].Status != apiregistrationv1.ConditionTrue || c[0].Reason != "Passed" {
			t.Fatalf("conditions = %+v", c)
		}
	})

	if p.Connects() < 4 {
		t.Errorf("%d tunnels through the proxy, want one at least per subtest", p.Connects())
	}
	for _, target := range p.Targets() {
		if target != "api.wardle.svc:443" {
			t.Errorf("tunnel to %q", target)
		}
	}

	// the proxy gone, the backend is out of reach: upstream's 503
	p.Close()
	a2 := New(Config{Client: &fakeClient{}, Resolver: NewResolver(nil), Dial: clusterEgress(t, p.URL).Dialer(egress.Cluster).DialContext})
	a2.replace(map[string]*apiregistrationv1.APIService{s.Name: s})
	rec := serve(a2, httptest.NewRequest(http.MethodGet, "/apis/wardle.example.com/v1alpha1/flunders", nil), alice)
	if want := "error trying to reach service: dial tcp " + p.Addr + ": connect: connection refused\n"; rec.Code != http.StatusServiceUnavailable || rec.Body.String() != want {
		t.Fatalf("= %d %q, want 503 %q", rec.Code, rec.Body.String(), want)
	}
}
