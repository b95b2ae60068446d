package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/storage"
)

// The integration tests share one storage service (embedded etcd) and one
// registry, served over in-process gRPC; each test uses its own API group.
var (
	testRegistry registryv1.RegistryServiceClient
	testStorage  storagev1.StorageServiceClient
	testService  *Service
	groupSeq     atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "registry-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	st, err := storage.New(ctx, storage.Config{DataDir: dir, EtcdLogLevel: "error", UnsafeNoFsync: true, BookmarkInterval: 200 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "storage:", err)
		return 1
	}
	defer st.Close()
	storageSrv := serve("registry-test-storage", st.Register)
	defer storageSrv.Stop()

	logLevel := slog.LevelWarn
	if os.Getenv("REGISTRY_TEST_DEBUG") != "" {
		logLevel = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	svc, err := New(ctx, Config{StorageAddr: "inproc://registry-test-storage", Logger: log, CleanupTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		return 1
	}
	defer svc.Close()
	testService = svc
	registrySrv := serve("registry-test", svc.Register)
	defer registrySrv.Stop()

	rc, err := grpcx.Dial("inproc://registry-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer rc.Close()
	sc, err := grpcx.Dial("inproc://registry-test-storage")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sc.Close()
	testRegistry = registryv1.NewRegistryServiceClient(rc)
	testStorage = storagev1.NewStorageServiceClient(sc)

	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := svc.WaitReady(wctx); err != nil {
		fmt.Fprintln(os.Stderr, "registry not ready:", err)
		return 1
	}
	if err := svc.WaitSystemNamespaces(wctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func serve(name string, register func(grpc.ServiceRegistrar)) *grpc.Server {
	srv := grpcx.NewServer()
	register(srv)
	lis := grpcx.ListenInProcess(name)
	go func() { _ = srv.Serve(lis) }()
	return srv
}

// newGroup returns an API group no other test uses.
func newGroup(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("g%d.example.com", groupSeq.Add(1))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// crdJSON builds a CRD of group with the given plural and kind, one served
// storage version v1 with a status subresource.
func crdJSON(group, plural, kind string, extra ...func(map[string]any)) []byte {
	obj := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				"subresources": map[string]any{"status": map[string]any{}},
			}},
		},
	}
	for _, f := range extra {
		f(obj)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return b
}

func spec(obj map[string]any) map[string]any { return obj["spec"].(map[string]any) }

func decodeT(t *testing.T, data []byte) *CRD {
	t.Helper()
	crd, err := decodeStored(data)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

func createT(t *testing.T, body []byte) *CRD {
	t.Helper()
	resp, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: body})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return decodeT(t, resp.GetObject())
}

func getT(t *testing.T, name string) *CRD {
	t.Helper()
	resp, err := testRegistry.Get(testCtx(t), &registryv1.GetRequest{Name: name})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return decodeT(t, resp.GetObject())
}

// status returns the Kubernetes Status of a gRPC error (a 200 Success for
// no error).
func status(err error) *metav1.Status {
	if err == nil {
		return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusOK}
	}
	return kstatus.FromError(err)
}

// eventually polls cond every 10ms until it holds or d passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitEstablished waits for a CRD to be Established and returns it.
func waitEstablished(t *testing.T, name string) *CRD {
	t.Helper()
	var crd *CRD
	eventually(t, 5*time.Second, name+" Established", func() bool {
		crd = getT(t, name)
		return conditionTrue(crd, condEstablished)
	})
	return crd
}
