package modules

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/app"
)

// TestTargetsWiredByFlags runs every module as --target=<module> does, each
// built alone from its binary's flags (no module shares another's process)
// and served on loopback TCP, the addresses wired as the table says. A CRD
// write reaches the validator through the registry's --validator-addr: a
// rule that does not compile is a 422.
func TestTargetsWiredByFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	grpcAddr := map[string]string{}
	for _, m := range Modules {
		if m.GRPCListen != "" {
			grpcAddr[m.Name] = freeAddr(t)
		}
	}
	httpsAddr := freeAddr(t)
	const token = "modules-test-token"

	order, err := Modules.Order(All)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, len(order))
	var gatewayReady func() error
	t.Cleanup(func() {
		cancel()
		for range order {
			<-done
		}
	})
	for _, m := range order {
		var args []string
		for _, d := range m.Deps {
			args = append(args, "--"+d.Flag+"="+grpcAddr[d.Module])
		}
		switch m.Name {
		case Storage:
			args = append(args, "--data-dir="+filepath.Join(dir, "etcd"))
		case Gateway:
			args = append(args, "--listen="+httpsAddr, "--token="+token)
		}
		var c Config
		b := m.Binary(&c)
		fs := b.FlagSet()
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		svc, err := m.Build(ctx, &Process{Cfg: c})
		if err != nil {
			done <- struct{}{}
			t.Fatalf("%s: %v", m.Name, err)
		}
		go func() {
			defer func() { done <- struct{}{} }()
			defer svc.Close()
			var err error
			switch s := svc.(type) {
			case app.GRPCService:
				err = app.Run(ctx, app.Config{Name: m.Name, GRPCAddr: grpcAddr[m.Name], Register: s.Register, Ready: s.Ready, ShutdownGrace: time.Second})
			case app.Runner:
				err = s.Run(ctx)
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", m.Name, err)
			}
		}()
		if m.Name == Gateway {
			gatewayReady = svc.Ready
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for gatewayReady() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready: %v", gatewayReady())
		}
		time.Sleep(50 * time.Millisecond)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	post := func(file string) (int, string) {
		t.Helper()
		y, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "https://"+httpsAddr+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bytes.NewReader(j))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return resp.StatusCode, body.String()
	}
	if code, body := post("crontab-crd.yaml"); code != http.StatusCreated {
		t.Fatalf("a valid CRD: %d %s", code, body)
	}
	code, body := post("registry-cel-crd.yaml")
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "compilation failed") {
		t.Fatalf("a CRD with a rule that does not compile: %d %s", code, body)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
