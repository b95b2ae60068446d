package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crdplane/crdplane/services/gateway/internal/backendtest"
)

func clientv3WithPrefix() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }

func newTestGatewayB(tb *testing.B) *testGateway {
	b := backendtest.Start(tb)
	svc, err := New(context.Background(), Config{RegistryAddr: b.RegistryAddr, ValidatorAddr: b.ValidatorAddr, StorageAddr: b.StorageAddr, ConverterAddr: b.ConverterAddr, Tokens: []string{testToken}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = svc.Close() })
	srv := httptest.NewServer(svc.Handler())
	tb.Cleanup(srv.Close)
	g := &testGateway{svc: svc, srv: srv, backends: b}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc.crds.WaitSynced(ctx)
	body := mustJSON(cronTabCRD())
	req, _ := http.NewRequest("POST", srv.URL+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != 201 {
		tb.Fatalf("crd %v", err)
	}
	for {
		req, _ := http.NewRequest("GET", srv.URL+crontabs, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, _ := srv.Client().Do(req)
		if resp.StatusCode == 200 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return g
}
