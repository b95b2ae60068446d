package leader

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/crdplane/crdplane/services/storage"
)

// endpoints are those of the embedded etcd (started through the storage
// service) the tests share; each test campaigns under its own key.
var endpoints []string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leader-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	st, err := storage.New(context.Background(), storage.Config{DataDir: dir, EtcdLogLevel: "error", UnsafeNoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	endpoints = st.Client().Endpoints()
	return m.Run()
}

// dial returns a new client of the shared etcd.
func dial(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// replica runs one Elector and records when it leads.
type replica struct {
	e      *Elector
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leading bool
	terms   int
}

func startReplica(t *testing.T, c *clientv3.Client, id string) *replica {
	t.Helper()
	e, err := New(Config{Client: c, Key: "/test/" + t.Name(), Identity: id, LeaseTTL: 2 * time.Second, RetryInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{e: e, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		e.Run(ctx, func(ctx context.Context) {
			r.mu.Lock()
			r.leading, r.terms = true, r.terms+1
			r.mu.Unlock()
			<-ctx.Done()
			r.mu.Lock()
			r.leading = false
			r.mu.Unlock()
		})
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replica) isLeading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leading
}

func (r *replica) stop(t *testing.T) {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Error("elector did not stop")
	}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func TestOneLeaderAndHandOverOnResign(t *testing.T) {
	c := dial(t)
	a := startReplica(t, c, "a")
	waitFor(t, 5*time.Second, "a leads", a.isLeading)
	b := startReplica(t, c, "b")
	time.Sleep(300 * time.Millisecond)
	if b.isLeading() {
		t.Fatal("two leaders")
	}
	if !a.e.IsLeader() || b.e.IsLeader() {
		t.Fatalf("IsLeader: a %v, b %v", a.e.IsLeader(), b.e.IsLeader())
	}

	// a stops gracefully: it revokes its lease and b takes over at once
	a.stop(t)
	took := waitFor(t, 5*time.Second, "b leads", b.isLeading)
	if took > time.Second {
		t.Errorf("hand-over after a resignation took %v", took)
	}
	if a.isLeading() {
		t.Fatal("a still leads after stopping")
	}
}

func TestFailOverWhenTheLeaderDies(t *testing.T) {
	ca := dial(t)
	a := startReplica(t, ca, "a")
	waitFor(t, 5*time.Second, "a leads", a.isLeading)
	b := startReplica(t, dial(t), "b")
	time.Sleep(200 * time.Millisecond)

	// a loses etcd without giving its lease back, as if the process died:
	// it stops leading, and b leads once a's lease expired
	killed := time.Now()
	_ = ca.Close()
	waitFor(t, 5*time.Second, "a stops leading", func() bool { return !a.isLeading() })
	waitFor(t, 10*time.Second, "b leads", b.isLeading)
	t.Logf("fail-over after the leader died: %v (lease TTL 2s)", time.Since(killed))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.terms != 1 {
		t.Errorf("b led %d times", b.terms)
	}
}
