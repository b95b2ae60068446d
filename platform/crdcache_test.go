package platform_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/crdplane/crdplane/platform"
	"github.com/crdplane/crdplane/platform/platformtest"
)

// TestOneCRDWatch: in one process the validator, converter and gateway
// follow one CRD cache: the registry serves a single CRD watch (three when
// each service ran its own), and a new CRD reaches all three through it
// (the gateway routes its resource, the validator admits and the
// converter converts its objects).
func TestOneCRDWatch(t *testing.T) {
	p, c := platformtest.StartConfig(t, platform.Config{OpsAddr: "127.0.0.1:0"})
	const series = `crdplane_grpc_server_in_flight{grpc_method="Watch",grpc_service="crdplane.registry.v1.RegistryService",grpc_type="server_stream"}`
	var line string
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(p.OpsURL + "/metrics") //nolint:noctx // a test on loopback
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, series+" ") {
				line = l
			}
		}
		if line != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if line != series+" 1" {
		t.Fatalf("CRD watches served by the registry: %q, want %q", line, series+" 1")
	}
	// a new CRD through the one cache: the gateway routes it, the
	// validator admits (and refuses) its objects
	dc := dynamic.NewForConfigOrDie(c)
	platformtest.CreateCRD(t, dc, platformtest.Object(t, []byte(platformtest.CronTabCRD)))
	ctx := context.Background()
	ct := func(replicas int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab",
			"metadata": map[string]any{"generateName": "ct-"},
			"spec":     map[string]any{"cronSpec": "* * * * */5", "replicas": replicas},
		}}
	}
	if _, err := dc.Resource(platformtest.CronTabs).Namespace("default").Create(ctx, ct(2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := dc.Resource(platformtest.CronTabs).Namespace("default").Create(ctx, ct(20), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10") {
		t.Fatalf("replicas 20: %v", err)
	}
}
