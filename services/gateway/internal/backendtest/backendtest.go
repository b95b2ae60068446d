// Package backendtest starts the gateway's real backend services — storage
// on an embedded etcd, registry, validator and converter — in this process
// over in-process gRPC, for the gateway's tests. Nothing is faked: the
// validator and converter servers only record the requests they receive so
// that tests can check what the gateway asked of them.
package backendtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/crdplane/crdplane/pkg/grpcx"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/converter"
	"github.com/crdplane/crdplane/services/registry"
	"github.com/crdplane/crdplane/services/storage"
	"github.com/crdplane/crdplane/services/validator"
)

// Backends are the running services and their in-process addresses.
type Backends struct {
	Storage *storage.Service
	// StorageClient talks to the storage service (tests read and write
	// objects behind the gateway's back with it).
	StorageClient storagev1.StorageServiceClient

	StorageAddr, RegistryAddr, ValidatorAddr, ConverterAddr string

	// Admits records ValidatorService.Admit requests, Converts
	// ConverterService.Convert requests.
	Admits   *Recorder[*validatorv1.AdmitRequest]
	Converts *Recorder[*converterv1.ConvertRequest]
}

// Options tune the backends.
type Options struct {
	// BookmarkInterval of storage watches (default 1s).
	BookmarkInterval time.Duration
	// DisableWatchCache gives every storage watch its own etcd watch.
	DisableWatchCache bool
}

var seq atomic.Int64

// Start starts the backends for t; they stop when t ends.
func Start(t testing.TB, opts ...Options) *Backends {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = time.Second
	}
	// The services live as long as the test: New's context is their lifetime.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := seq.Add(1)
	b := &Backends{Admits: &Recorder[*validatorv1.AdmitRequest]{}, Converts: &Recorder[*converterv1.ConvertRequest]{}}

	sto, err := storage.New(ctx, storage.Config{
		DataDir: t.TempDir(), EtcdLogLevel: "error", UnsafeNoFsync: true,
		BookmarkInterval: o.BookmarkInterval, DisableWatchCache: o.DisableWatchCache,
	})
	if err != nil {
		t.Fatalf("storage: %v", err)
	}
	t.Cleanup(func() { _ = sto.Close() })
	b.Storage = sto
	b.StorageAddr = serve(t, fmt.Sprintf("bt-storage-%d", n), sto.Register)
	conn, err := grpcx.Dial(b.StorageAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	b.StorageClient = storagev1.NewStorageServiceClient(conn)

	reg, err := registry.New(ctx, registry.Config{StorageAddr: b.StorageAddr})
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	b.RegistryAddr = serve(t, fmt.Sprintf("bt-registry-%d", n), reg.Register)
	// the registry's own writes at start (the system namespaces) are done
	// before a test counts revisions
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := reg.WaitSystemNamespaces(wctx); err != nil {
		t.Fatal(err)
	}

	// The validator calls the converter served below (connected on first use).
	converterName := fmt.Sprintf("bt-converter-%d", n)
	val, err := validator.New(ctx, validator.Config{RegistryAddr: b.RegistryAddr, ConverterAddr: "inproc://" + converterName})
	if err != nil {
		t.Fatalf("validator: %v", err)
	}
	t.Cleanup(func() { _ = val.Close() })
	b.ValidatorAddr = serve(t, fmt.Sprintf("bt-validator-%d", n), val.Register, grpc.ChainUnaryInterceptor(record(b.Admits)))

	conv, err := converter.New(ctx, converter.Config{RegistryAddr: b.RegistryAddr})
	if err != nil {
		t.Fatalf("converter: %v", err)
	}
	t.Cleanup(func() { _ = conv.Close() })
	b.ConverterAddr = serve(t, converterName, conv.Register, grpc.ChainUnaryInterceptor(record(b.Converts)))
	return b
}

// serve runs register on a fresh in-process gRPC server and returns its address.
func serve(t testing.TB, name string, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) string {
	srv := grpcx.NewServer(opts...)
	register(srv)
	lis := grpcx.ListenInProcess(name)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "inproc://" + name
}

// Recorder keeps the requests of type M a server received.
type Recorder[M proto.Message] struct {
	mu    sync.Mutex
	calls []M
}

// Requests returns the recorded requests, oldest first.
func (r *Recorder[M]) Requests() []M {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]M(nil), r.calls...)
}

// Len is the number of recorded requests.
func (r *Recorder[M]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func record[M proto.Message](r *Recorder[M]) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if m, ok := req.(M); ok {
			r.mu.Lock()
			r.calls = append(r.calls, proto.Clone(m).(M))
			r.mu.Unlock()
		}
		return handler(ctx, req)
	}
}
