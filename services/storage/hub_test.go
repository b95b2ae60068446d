package storage

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// hubOf returns the shared hub of a resource prefix and its watch count.
func hubOf(e *env, prefix string) (*hub, int) {
	e.svc.hubs.mu.Lock()
	defer e.svc.hubs.mu.Unlock()
	h := e.svc.hubs.m[prefix]
	if h == nil {
		return nil, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h, len(h.subs)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWatchCacheSharesOneEtcdWatch(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	start := currentRV(t, e, prefix)
	all := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start})
	nsA := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix + "a/", ResourceVersion: start})
	web := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start, LabelSelector: "app=web"})
	fromNow := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix + "b/", AllowBookmarks: true})
	waitFor(t, "four watches on one hub", func() bool { _, n := hubOf(e, prefix); return n == 4 })
	if n := e.svc.hubs.count(); n < 1 {
		t.Fatalf("%d hubs", n)
	}

	for _, k := range []struct{ ns, name, app string }{{"a", "x", "web"}, {"b", "y", "db"}, {"a", "z", "db"}} {
		if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + k.ns + "/" + k.name, Object: object(k.name, k.ns, map[string]string{"app": k.app}, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	all.expect("EVENT_TYPE_ADDED x", "EVENT_TYPE_ADDED y", "EVENT_TYPE_ADDED z")
	nsA.expect("EVENT_TYPE_ADDED x", "EVENT_TYPE_ADDED z")
	web.expect("EVENT_TYPE_ADDED x")
	for {
		if ev := fromNow.next(); ev.Type != commonv1.EventType_EVENT_TYPE_BOOKMARK {
			if got := meta(t, ev.Object).Name; got != "y" {
				t.Fatalf("from now: %s", got)
			}
			break
		}
	}
	h, _ := hubOf(e, prefix)
	h.mu.Lock()
	if len(h.ring) != 3 {
		t.Errorf("the hub kept %d events", len(h.ring))
	}
	h.mu.Unlock()

	for _, w := range []*watchStream{all, nsA, web, fromNow} {
		w.cancel()
	}
	waitFor(t, "the hub to stop", func() bool { h, _ := hubOf(e, prefix); return h == nil })
}

func TestWatchCacheHistory(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WatchCacheSize = 3 })
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	start := currentRV(t, e, prefix)
	keeper := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start})
	waitFor(t, "the hub", func() bool { _, n := hubOf(e, prefix); return n == 1 })
	var revs []int64
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "ns/" + name, Object: object(name, "ns", nil, nil)})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, cr.ResourceVersion)
	}
	keeper.expect("EVENT_TYPE_ADDED a", "EVENT_TYPE_ADDED b", "EVENT_TYPE_ADDED c", "EVENT_TYPE_ADDED d", "EVENT_TYPE_ADDED e")
	h, _ := hubOf(e, prefix)

	// Within the kept history: the shared hub replays.
	recent := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: revs[2]})
	recent.expect("EVENT_TYPE_ADDED d", "EVENT_TYPE_ADDED e")
	if _, n := hubOf(e, prefix); n != 2 {
		t.Fatalf("%d watches on the hub", n)
	}
	// Before it: a private hub, with the same events.
	old := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: revs[0]})
	old.expect("EVENT_TYPE_ADDED b", "EVENT_TYPE_ADDED c", "EVENT_TYPE_ADDED d", "EVENT_TYPE_ADDED e")
	if h2, n := hubOf(e, prefix); h2 != h || n != 2 {
		t.Fatalf("the old watch joined the shared hub (%d watches)", n)
	}
	// Everyone sees what follows.
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "ns/a"}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watchStream{keeper, recent, old} {
		w.expect("EVENT_TYPE_DELETED a")
	}
}

func TestWatchCacheEndsSlowWatcher(t *testing.T) {
	e := newEnv(t)
	e.svc.watchBuffer = 2
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	start := currentRV(t, e, prefix)

	release := make(chan struct{})
	var mu sync.Mutex
	slowGot := 0
	done := make(chan error, 1)
	go func() {
		done <- e.svc.watch(ctx, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start}, func(*storagev1.WatchResponse) error {
			<-release
			mu.Lock()
			slowGot++
			mu.Unlock()
			return nil
		})
	}()
	fast := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start})
	waitFor(t, "two watches", func() bool { _, n := hubOf(e, prefix); return n == 2 })
	// One event at a time, so that only the slow watch falls behind (a
	// burst could overrun the fast one's two-event buffer too).
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "ns/" + name, Object: object(name, "ns", nil, nil)}); err != nil {
			t.Fatal(err)
		}
		fast.expect("EVENT_TYPE_ADDED " + name)
	}
	waitFor(t, "the slow watch to be dropped", func() bool { _, n := hubOf(e, prefix); return n == 1 })
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("slow watch ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slow watch did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	if slowGot == 0 || slowGot >= 6 {
		t.Fatalf("the slow watch got %d events before it ended", slowGot)
	}
}

func TestWatchResubscribesAfterHubCompaction(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "ns/a", Object: object("a", "ns", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	compactRev := cr.ResourceVersion

	// A hub that started from before the compaction fails; a watch that
	// joined it from after the compaction goes on with a new hub.
	failed := e.svc.newHub(ctx, prefix, 1, true)
	sub := failed.add(compactRev)
	failed.fail(compactedError{compactRev: compactRev})

	events := make(chan *storagev1.WatchResponse, 10)
	w := &watcher{svc: e.svc, prefix: []byte(prefix), send: func(r *storagev1.WatchResponse) error { events <- r; return nil }, rev: compactRev}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.loop(wctx, sub) }()
	waitFor(t, "a new hub", func() bool { _, n := hubOf(e, prefix); return n == 1 })
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "ns/a"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Type != commonv1.EventType_EVENT_TYPE_DELETED {
			t.Fatalf("event %v", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after resubscribing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A watch from before the compaction gets the 410.
	failed = e.svc.newHub(ctx, prefix, 1, false)
	sub = failed.add(compactRev - 1)
	failed.fail(compactedError{compactRev: compactRev})
	w = &watcher{svc: e.svc, prefix: []byte(prefix), send: func(*storagev1.WatchResponse) error { return nil }, rev: compactRev - 1}
	err = w.loop(ctx, sub)
	var ce compactedError
	if errors.As(err, &ce) {
		t.Fatal("raw hub error leaked")
	}
	wantStatus(t, err, 410, "Expired", "")
}

func TestPrivateHubWaitsForSlowWatcher(t *testing.T) {
	e := newEnv(t, withoutWatchCache)
	e.svc.watchBuffer = 1
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	start := currentRV(t, e, prefix)
	got := make(chan string, 10)
	release := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- e.svc.watch(wctx, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start}, func(r *storagev1.WatchResponse) error {
			<-release
			got <- meta(t, r.Object).Name
			return nil
		})
	}()
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, name := range names {
		if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "ns/" + name, Object: object(name, "ns", nil, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	for _, want := range names {
		select {
		case name := <-got:
			if name != want {
				t.Fatalf("got %s, want %s", name, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %s", want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
