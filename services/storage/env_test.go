package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// env is a storage service on an embedded etcd, served over an in-process
// gRPC listener.
type env struct {
	svc    *Service
	client storagev1.StorageServiceClient
	stop   func()
}

var envSeq atomic.Int64

func testConfig(dataDir string) Config {
	return Config{
		DataDir:          dataDir,
		EtcdLogLevel:     "error",
		UnsafeNoFsync:    true,
		BookmarkInterval: 200 * time.Millisecond,
	}
}

// startEnv starts a service with cfg and serves it over gRPC.
func startEnv(tb testing.TB, cfg Config) *env {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc, err := New(ctx, cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	name := fmt.Sprintf("storage-test-%d", envSeq.Add(1))
	srv := grpcx.NewServer()
	svc.Register(srv)
	lis := grpcx.ListenInProcess(name)
	go func() { _ = srv.Serve(lis) }()
	cc, err := grpcx.Dial("inproc://" + name)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{svc: svc, client: storagev1.NewStorageServiceClient(cc)}
	e.stop = sync.OnceFunc(func() {
		cc.Close()
		srv.Stop()
		if err := svc.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return e
}

// newEnv starts a private service for one test; opts adjust its config.
func newEnv(t *testing.T, opts ...func(*Config)) *env {
	cfg := testConfig(t.TempDir())
	for _, o := range opts {
		o(&cfg)
	}
	e := startEnv(t, cfg)
	t.Cleanup(e.stop)
	return e
}

// withoutWatchCache gives every watch its own etcd watch.
func withoutWatchCache(c *Config) { c.DisableWatchCache = true }

// sharedEnvs are services that many tests use (each under its own group).
var (
	sharedMu   sync.Mutex
	sharedEnvs = map[string]*env{}
	sharedDirs []string
)

func sharedWith(t testing.TB, name string, opts ...func(*Config)) *env {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if e := sharedEnvs[name]; e != nil {
		return e
	}
	dir, err := os.MkdirTemp("", "storage-test-")
	if err != nil {
		t.Fatal(err)
	}
	sharedDirs = append(sharedDirs, dir)
	cfg := testConfig(dir)
	for _, o := range opts {
		o(&cfg)
	}
	e := startEnv(t, cfg)
	sharedEnvs[name] = e
	return e
}

// shared returns the service most tests use.
func shared(t *testing.T) *env { return sharedWith(t, "default") }

// watchModes runs a test with the watch cache and without it.
func watchModes(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Run("cache", func(t *testing.T) { fn(t, shared(t)) })
	t.Run("direct", func(t *testing.T) { fn(t, sharedWith(t, "direct", withoutWatchCache)) })
}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	code := m.Run()
	for _, e := range sharedEnvs {
		e.stop()
	}
	for _, d := range sharedDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

var groupSeq atomic.Int64

// testGroup returns a group no other test uses.
func testGroup() string { return fmt.Sprintf("g%d.example.com", groupSeq.Add(1)) }

// object returns a custom resource's JSON.
func object(name, namespace string, labels map[string]string, spec map[string]any) []byte {
	meta := map[string]any{"name": name, "uid": "uid-" + name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if labels != nil {
		meta["labels"] = labels
	}
	if spec == nil {
		spec = map[string]any{}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": meta, "spec": spec})
	if err != nil {
		panic(err)
	}
	return b
}

// meta decodes an object's metadata.
func meta(t *testing.T, obj []byte) metav1.ObjectMeta {
	t.Helper()
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		t.Fatalf("decode %s: %v", obj, err)
	}
	return o.Metadata
}

func rvOf(t *testing.T, obj []byte) int64 {
	t.Helper()
	rv, err := strconv.ParseInt(meta(t, obj).ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion of %s: %v", obj, err)
	}
	return rv
}

func names(t *testing.T, objs [][]byte) []string {
	t.Helper()
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = meta(t, o).Name
	}
	return out
}

// wantStatus checks that err carries the Kubernetes Status code, reason and
// message.
func wantStatus(t *testing.T, err error, code int32, reason metav1.StatusReason, msg string) *metav1.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %d %s %q", code, reason, msg)
	}
	st := kstatus.FromError(err)
	if st.Code != code || st.Reason != reason || (msg != "" && st.Message != msg) {
		t.Fatalf("got %d %s %q, want %d %s %q", st.Code, st.Reason, st.Message, code, reason, msg)
	}
	return st
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
