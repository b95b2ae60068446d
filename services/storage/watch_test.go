package storage

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// watchStream collects a watch's events.
type watchStream struct {
	t      *testing.T
	cancel context.CancelFunc
	events chan *storagev1.WatchResponse
	done   chan error // the stream's end (nil: io.EOF)
}

func startWatch(t *testing.T, e *env, req *storagev1.WatchRequest) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := e.client.Watch(ctx, req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &watchStream{t: t, cancel: cancel, events: make(chan *storagev1.WatchResponse, 1000), done: make(chan error, 1)}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				w.done <- err
				close(w.events)
				return
			}
			w.events <- ev
		}
	}()
	t.Cleanup(cancel)
	return w
}

// next returns the next event that is not a periodic bookmark.
func (w *watchStream) next() *storagev1.WatchResponse {
	w.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				w.t.Fatalf("watch ended: %v", <-w.done)
			}
			return ev
		case <-timeout:
			w.t.Fatal("no watch event within 10s")
		}
	}
}

// expect checks the next events' types and object names.
func (w *watchStream) expect(want ...string) []*storagev1.WatchResponse {
	w.t.Helper()
	var got []*storagev1.WatchResponse
	for _, wnt := range want {
		ev := w.next()
		got = append(got, ev)
		desc := ev.Type.String()
		if ev.Type != commonv1.EventType_EVENT_TYPE_BOOKMARK {
			desc += " " + meta(w.t, ev.Object).Name
			if rvOf(w.t, ev.Object) != ev.ResourceVersion {
				w.t.Fatalf("event rv %d, object rv %s", ev.ResourceVersion, meta(w.t, ev.Object).ResourceVersion)
			}
		}
		if desc != wnt {
			w.t.Fatalf("event %q, want %q", desc, wnt)
		}
	}
	return got
}

// quiet checks that no event arrives for a while.
func (w *watchStream) quiet(d time.Duration) {
	w.t.Helper()
	select {
	case ev := <-w.events:
		w.t.Fatalf("unexpected event %v %s", ev.GetType(), ev.GetObject())
	case <-time.After(d):
	}
}

// end waits for the stream's end and returns its error.
func (w *watchStream) end() error {
	w.t.Helper()
	for {
		select {
		case _, ok := <-w.events:
			if !ok {
				return <-w.done
			}
		case <-time.After(10 * time.Second):
			w.t.Fatal("the watch did not end")
		}
	}
}

func currentRV(t *testing.T, e *env, prefix string) int64 {
	t.Helper()
	resp, err := e.client.List(ctxT(t), &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.ResourceVersion
}

func TestWatch(t *testing.T) { watchModes(t, testWatch) }

func testWatch(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	start := currentRV(t, e, prefix)
	w := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start})

	key := prefix + "ns/x"
	cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object("x", "ns", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ur, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: key, Object: object("x", "ns", map[string]string{"v": "2"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	dr, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	evs := w.expect("EVENT_TYPE_ADDED x", "EVENT_TYPE_MODIFIED x", "EVENT_TYPE_DELETED x")
	if evs[0].ResourceVersion != cr.ResourceVersion || evs[1].ResourceVersion != ur.ResourceVersion || evs[2].ResourceVersion != dr.ResourceVersion {
		t.Fatalf("event revisions %d %d %d", evs[0].ResourceVersion, evs[1].ResourceVersion, evs[2].ResourceVersion)
	}
	// DELETED carries the last state.
	if meta(t, evs[2].Object).Labels["v"] != "2" {
		t.Fatalf("deleted object %s", evs[2].Object)
	}
	// Another resource's changes stay out.
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: "/registry/" + testGroup() + "/crontabs/ns/y", Object: object("y", "ns", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	w.quiet(200 * time.Millisecond)

	// A watch from an earlier revision replays what happened since.
	replay := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start})
	replay.expect("EVENT_TYPE_ADDED x", "EVENT_TYPE_MODIFIED x", "EVENT_TYPE_DELETED x")
	replay.cancel()

	// A watch from now (0) sees only later changes.
	now := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix + "ns/"})
	time.Sleep(100 * time.Millisecond)
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object("x", "ns", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	now.expect("EVENT_TYPE_ADDED x")
}

func TestWatchSelectors(t *testing.T) { watchModes(t, testWatchSelectors) }

func testWatchSelectors(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	start := currentRV(t, e, prefix)
	byLabel := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start, LabelSelector: "app=web"})
	byField := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: start,
		FieldSelector: "spec.color=blue", SelectableFields: []string{"spec.color"}})

	put := func(name string, labels map[string]string, color string) {
		t.Helper()
		key := prefix + "ns/" + name
		obj := object(name, "ns", labels, map[string]any{"color": color})
		if _, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: key, Object: obj}); err != nil {
			if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: obj}); err != nil {
				t.Fatal(err)
			}
		}
	}
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}
	put("a", web, "red")                                                                            // label: ADDED
	put("b", db, "blue")                                                                            // field: ADDED
	put("a", web, "blue")                                                                           // label: MODIFIED, field: ADDED (starts matching)
	put("a", db, "blue")                                                                            // label: DELETED (stops matching), field: MODIFIED
	put("a", db, "red")                                                                             // label: -, field: DELETED
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "ns/b"}); err != nil { // field: DELETED
		t.Fatal(err)
	}
	put("c", web, "green")                                                                          // label: ADDED
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "ns/c"}); err != nil { // label: DELETED
		t.Fatal(err)
	}

	l := byLabel.expect("EVENT_TYPE_ADDED a", "EVENT_TYPE_MODIFIED a", "EVENT_TYPE_DELETED a", "EVENT_TYPE_ADDED c", "EVENT_TYPE_DELETED c")
	// Stopped matching: the previous content, at the event's revision.
	if m := meta(t, l[2].Object); m.Labels["app"] != "web" {
		t.Fatalf("DELETED on stop matching carries %s", l[2].Object)
	}
	if l[2].ResourceVersion <= l[1].ResourceVersion {
		t.Fatalf("DELETED rv %d after %d", l[2].ResourceVersion, l[1].ResourceVersion)
	}
	f := byField.expect("EVENT_TYPE_ADDED b", "EVENT_TYPE_ADDED a", "EVENT_TYPE_MODIFIED a", "EVENT_TYPE_DELETED a", "EVENT_TYPE_DELETED b")
	if v, _, _ := jsonscan.Lookup(f[3].Object, "spec", "color"); string(v) != `"blue"` {
		t.Fatalf("DELETED on stop matching carries %s", f[3].Object)
	}
	byLabel.quiet(100 * time.Millisecond)
	byField.quiet(100 * time.Millisecond)

	bad := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, FieldSelector: "spec.color=blue"})
	wantStatus(t, bad.end(), 400, metav1.StatusReasonBadRequest, "field label not supported: spec.color")
}

func TestWatchInitialEvents(t *testing.T) { watchModes(t, testWatchInitialEvents) }

func testWatchInitialEvents(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a", "b"}, 3, nil)
	listed := currentRV(t, e, prefix)

	w := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, SendInitialEvents: true, LabelSelector: "parity=even"})
	evs := w.expect("EVENT_TYPE_ADDED o00", "EVENT_TYPE_ADDED o02", "EVENT_TYPE_ADDED o00", "EVENT_TYPE_ADDED o02", "EVENT_TYPE_BOOKMARK")
	bm := evs[4]
	if bm.ResourceVersion < listed || len(bm.Object) != 0 {
		t.Fatalf("initial-events bookmark %d (listed at %d), object %q", bm.ResourceVersion, listed, bm.Object)
	}
	// Changes after the bookmark follow.
	dr, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "a/o00"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := w.expect("EVENT_TYPE_DELETED o00")[0]; ev.ResourceVersion != dr.ResourceVersion {
		t.Fatalf("rv %d want %d", ev.ResourceVersion, dr.ResourceVersion)
	}

	// Initial events as of an earlier revision: the deleted object is there,
	// then its deletion follows.
	old := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix + "a/", SendInitialEvents: true, ResourceVersion: listed})
	evs = old.expect("EVENT_TYPE_ADDED o00", "EVENT_TYPE_ADDED o01", "EVENT_TYPE_ADDED o02", "EVENT_TYPE_BOOKMARK", "EVENT_TYPE_DELETED o00")
	if evs[3].ResourceVersion != listed {
		t.Fatalf("bookmark %d want %d", evs[3].ResourceVersion, listed)
	}

	// An empty collection: just the bookmark.
	empty := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix + "zzz/", SendInitialEvents: true})
	empty.expect("EVENT_TYPE_BOOKMARK")
}

func TestWatchBookmarks(t *testing.T) { watchModes(t, testWatchBookmarks) }

func testWatchBookmarks(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	w := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, AllowBookmarks: true})
	first := w.expect("EVENT_TYPE_BOOKMARK")[0]
	if first.ResourceVersion == 0 {
		t.Fatal("bookmark without a revision")
	}
	// Writes elsewhere move the revision: the next bookmark carries it.
	cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: "/registry/" + testGroup() + "/crontabs/ns/x", Object: object("x", "ns", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev := w.expect("EVENT_TYPE_BOOKMARK")[0]
		if ev.ResourceVersion >= cr.ResourceVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bookmarks stay at %d, below %d", ev.ResourceVersion, cr.ResourceVersion)
		}
	}
	// Without allow_bookmarks: none.
	plain := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix})
	plain.quiet(3 * e.svc.cfg.BookmarkInterval)
}

func TestWatchCompacted(t *testing.T) {
	t.Run("cache", func(t *testing.T) { testWatchCompacted(t, newEnv(t)) })
	t.Run("direct", func(t *testing.T) { testWatchCompacted(t, newEnv(t, withoutWatchCache)) })
}

func testWatchCompacted(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a"}, 2, nil)
	old := currentRV(t, e, prefix)
	ur, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: prefix + "a/o00", Object: object("o00", "a", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Client().Compact(ctx, ur.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	msg := fmt.Sprintf("too old resource version: %d (%d)", old-1, ur.ResourceVersion)
	w := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: old - 1})
	wantStatus(t, w.end(), 410, metav1.StatusReasonExpired, msg)

	msg = fmt.Sprintf("too old resource version: %d (%d)", old, ur.ResourceVersion)
	w = startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: old, SendInitialEvents: true})
	wantStatus(t, w.end(), 410, metav1.StatusReasonExpired, msg)

	// From the compaction revision on, watching works.
	w = startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: ur.ResourceVersion - 1})
	w.expect("EVENT_TYPE_MODIFIED o00")
}

func TestWatchEndsWhenClientCancels(t *testing.T) { watchModes(t, testWatchEndsWhenClientCancels) }

func testWatchEndsWhenClientCancels(t *testing.T, e *env) {
	prefix := "/registry/" + testGroup() + "/crontabs/"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.svc.watch(ctx, &storagev1.WatchRequest{Prefix: prefix, AllowBookmarks: true}, func(*storagev1.WatchResponse) error { return nil })
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not end")
	}
}
