package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The watch cache: watches of one resource share one etcd watch (a hub) on
// the resource's prefix, /registry/<group>/<plural>/. A hub keeps its recent
// events, so a watch from a recent revision joins the hub too; one from a
// revision older than the hub's history gets a private hub that only it
// uses (and that 410s when etcd has compacted the revision).
//
// Every hub has its own gRPC stream to etcd, so that etcd's progress
// notifications (bookmarks) for it are not held back by other watches.

// errSlowWatcher ends a watch that did not keep up with its hub.
var errSlowWatcher = errors.New("the watcher fell behind")

// compactedError ends a hub whose etcd watch hit compaction.
type compactedError struct{ compactRev int64 }

func (e compactedError) Error() string {
	return fmt.Sprintf("etcd compacted the watched revision (compaction at %d)", e.compactRev)
}

// hubEvent is an etcd event and, computed once for all its watchers, the
// objects a watch event can carry.
type hubEvent struct {
	*clientv3.Event
	svc *Service // reports corrupt objects

	curOnce, prevOnce sync.Once
	cur, prev         []byte
	curErr, prevErr   error
}

// current is the new value with metadata.resourceVersion; errCorrupt
// (reported once) when it cannot be served.
func (e *hubEvent) current() ([]byte, error) {
	e.curOnce.Do(func() {
		if e.cur, e.curErr = readObject(e.Kv.Value, e.Kv.ModRevision); e.curErr != nil {
			e.svc.reportCorrupt(e.Kv.Key, e.curErr)
		}
	})
	return e.cur, e.curErr
}

// previous is the previous value at the event's revision (the object of a
// DELETED event); errCorrupt (reported once) when it cannot be served.
func (e *hubEvent) previous() ([]byte, error) {
	e.prevOnce.Do(func() {
		if e.prev, e.prevErr = readObject(e.PrevKv.Value, e.Kv.ModRevision); e.prevErr != nil {
			e.svc.reportCorrupt(e.PrevKv.Key, e.prevErr)
		}
	})
	return e.prev, e.prevErr
}

// hubBatch is what a hub sends its subscribers: the events of one etcd
// response, or (events nil) a progress notification at rev.
type hubBatch struct {
	events []*hubEvent
	rev    int64
}

// subscription is one watch's place at a hub.
type subscription struct {
	hub   *hub
	start int64 // the watch wants the events after start
	ch    chan hubBatch
	err   error // why ch was closed (written before the close)
	gone  bool  // guarded by hub.mu
}

// hub is one etcd watch and its subscribers.
type hub struct {
	svc      *Service
	etcd     *clientv3.Client // the cluster that stores prefix
	prefix   string
	shared   bool
	capacity int // events kept for late joiners (shared hubs)
	buffer   int // batches a subscriber may lag behind

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	start     int64       // the etcd watch starts after start
	ring      []*hubEvent // the events with revisions in (ringStart, rev]
	ringStart int64
	rev       int64
	subs      map[*subscription]struct{}
	done      bool
}

var hubSeq atomic.Uint64

func (s *Service) newHub(base context.Context, prefix string, start int64, shared bool) *hub {
	// Metadata unique to the hub gives it its own etcd gRPC stream.
	ctx := metadata.AppendToOutgoingContext(base, "crdplane-watch-hub", strconv.FormatUint(hubSeq.Add(1), 10))
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	h := &hub{
		svc: s, etcd: s.etcdForPrefix(prefix), prefix: prefix, shared: shared, buffer: s.watchBuffer,
		ctx: ctx, cancel: cancel,
		start: start, ringStart: start, rev: start,
		subs: map[*subscription]struct{}{},
	}
	if shared {
		h.capacity = s.cfg.WatchCacheSize
	}
	return h
}

// subscribe places a watch of prefix from revision rev (> 0) at a hub: the
// resource's shared hub when it has the history, else a private one.
func (s *Service) subscribe(ctx context.Context, prefix string, rev int64) *subscription {
	if !s.cfg.DisableWatchCache {
		if sub := s.hubs.subscribe(s, prefix, rev); sub != nil {
			return sub
		}
	}
	h := s.newHub(ctx, prefix, rev, false)
	sub := h.add(rev)
	go h.run()
	return sub
}

// unsubscribe removes a watch from its hub; a hub without watches stops.
func (s *Service) unsubscribe(sub *subscription) {
	h := sub.hub
	if h.shared {
		s.hubs.mu.Lock()
		defer s.hubs.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !sub.gone {
		sub.gone = true
		delete(h.subs, sub)
	}
	if len(h.subs) == 0 && !h.done {
		h.done = true
		h.cancel()
		if h.shared && s.hubs.m[h.prefix] == h {
			delete(s.hubs.m, h.prefix)
		}
	}
}

// hubs are the shared hubs by resource prefix.
type hubs struct {
	mu sync.Mutex
	m  map[string]*hub
}

// subscribe joins the resource's shared hub, starting one at rev when there
// is none; nil when the hub's history does not reach back to rev.
func (c *hubs) subscribe(s *Service, prefix string, rev int64) *subscription {
	key := resourcePrefix(prefix)
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.m[key]; h != nil {
		h.mu.Lock()
		if !h.done {
			var sub *subscription
			if rev >= h.ringStart {
				sub = h.addLocked(rev)
			}
			h.mu.Unlock()
			return sub
		}
		h.mu.Unlock()
	}
	h := s.newHub(context.Background(), key, rev, true)
	if c.m == nil {
		c.m = map[string]*hub{}
	}
	c.m[key] = h
	sub := h.add(rev)
	go h.run()
	return sub
}

// count is the number of shared hubs (tests).
func (c *hubs) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// resourcePrefix is /registry/<group>/<plural>/ of a valid prefix.
func resourcePrefix(prefix string) string {
	parts := strings.SplitN(strings.TrimPrefix(prefix, keyRoot), "/", 3)
	if isGroupless(parts[0]) || len(parts) < 2 {
		return keyRoot + parts[0] + "/"
	}
	return keyRoot + parts[0] + "/" + parts[1] + "/"
}

func (h *hub) add(rev int64) *subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addLocked(rev)
}

// addLocked subscribes from rev, first replaying the kept events after it.
func (h *hub) addLocked(rev int64) *subscription {
	sub := &subscription{hub: h, start: rev, ch: make(chan hubBatch, h.buffer)}
	for i, ev := range h.ring {
		if ev.Kv.ModRevision > rev {
			sub.ch <- hubBatch{events: h.ring[i:len(h.ring):len(h.ring)], rev: h.rev}
			break
		}
	}
	h.subs[sub] = struct{}{}
	return sub
}

// run pumps the etcd watch into the subscribers until the hub stops or
// fails.
func (h *hub) run() {
	defer trackHub(h.shared)()
	defer h.cancel()
	wch := h.etcd.Watch(h.ctx, h.prefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(after(h.start)))
	for wr := range wch {
		switch {
		case wr.CompactRevision != 0:
			h.fail(compactedError{compactRev: wr.CompactRevision})
			return
		case wr.Err() != nil:
			h.fail(wr.Err())
			return
		case wr.IsProgressNotify():
			h.progress(wr.Header.Revision)
		case len(wr.Events) > 0:
			h.publish(wr.Events)
		}
	}
	if h.ctx.Err() == nil {
		h.fail(apierrors.NewServiceUnavailable("the etcd watch closed"))
	}
}

// after is the first revision after rev (rev itself at the largest
// revision, which no event can come after: rev+1 would wrap to a negative
// revision, which etcd reads as compacted).
func after(rev int64) int64 {
	if rev == math.MaxInt64 {
		return rev
	}
	return rev + 1
}

func (h *hub) publish(events []*clientv3.Event) {
	batch := hubBatch{events: make([]*hubEvent, len(events))}
	for i, ev := range events {
		batch.events[i] = &hubEvent{Event: ev, svc: h.svc}
	}
	if !h.shared {
		h.publishPrivate(batch)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev = max(h.rev, events[len(events)-1].Kv.ModRevision)
	batch.rev = h.rev
	if h.capacity > 0 {
		h.ring = append(h.ring, batch.events...)
		h.trimLocked()
	}
	for sub := range h.subs {
		select {
		case sub.ch <- batch:
		default:
			h.closeLocked(sub, errSlowWatcher)
		}
	}
}

// publishPrivate hands a batch to the only watch of a private hub, waiting
// while it is busy (etcd's client buffers meanwhile) rather than ending it.
// Only run sends on or closes a private hub's channels, so the send needs no
// lock; unsubscribing cancels the hub, which ends the wait.
func (h *hub) publishPrivate(batch hubBatch) {
	h.mu.Lock()
	h.rev = max(h.rev, batch.events[len(batch.events)-1].Kv.ModRevision)
	batch.rev = h.rev
	subs := make([]*subscription, 0, len(h.subs))
	for sub := range h.subs {
		subs = append(subs, sub)
	}
	h.mu.Unlock()
	for _, sub := range subs {
		select {
		case sub.ch <- batch:
		case <-h.ctx.Done():
			return
		}
	}
}

// trimLocked drops the oldest events beyond capacity, whole revisions at a
// time.
func (h *hub) trimLocked() {
	if len(h.ring) <= h.capacity {
		return
	}
	n := len(h.ring) - h.capacity
	last := h.ring[n-1].Kv.ModRevision
	for n < len(h.ring) && h.ring[n].Kv.ModRevision == last {
		n++
	}
	h.ringStart = last
	h.ring = append(h.ring[:0:0], h.ring[n:]...)
}

func (h *hub) progress(rev int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev = max(h.rev, rev)
	for sub := range h.subs {
		select {
		case sub.ch <- hubBatch{rev: h.rev}:
		default: // a progress notification can be skipped
		}
	}
}

// requestProgress asks etcd for a progress notification on the hub's stream.
func (h *hub) requestProgress() error {
	return h.etcd.RequestProgress(h.ctx)
}

// fail ends every subscription with err and retires the hub.
func (h *hub) fail(err error) {
	if h.shared {
		h.svc.hubs.mu.Lock()
		defer h.svc.hubs.mu.Unlock()
		if h.svc.hubs.m[h.prefix] == h {
			delete(h.svc.hubs.m, h.prefix)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	h.cancel()
	for sub := range h.subs {
		h.closeLocked(sub, err)
	}
}

func (h *hub) closeLocked(sub *subscription, err error) {
	if sub.gone {
		return
	}
	sub.gone = true
	sub.err = err
	close(sub.ch)
	delete(h.subs, sub)
}
