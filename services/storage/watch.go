package storage

import (
	"bytes"
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// initialPageSize is the etcd page size of a watch's initial events.
const initialPageSize = 1000

// Watch streams the changes under a prefix after resource_version: ADDED,
// MODIFIED and DELETED events (filtered by the selectors: an object that
// stops matching is DELETED, one that starts matching is ADDED), optionally
// preceded by the initial state and a BOOKMARK, and with periodic BOOKMARK
// events when allowed. A compacted start revision ends the stream with a
// 410 Expired Status. The stream ends cleanly when the client cancels.
func (s *Service) Watch(req *storagev1.WatchRequest, stream storagev1.StorageService_WatchServer) error {
	defer trackWatch()()
	err := s.watch(stream.Context(), req, stream.Send)
	if err != nil && stream.Context().Err() != nil {
		return nil // the client went away
	}
	return kstatus.ToGRPC(err)
}

type sendFunc func(*storagev1.WatchResponse) error

func (s *Service) watch(ctx context.Context, req *storagev1.WatchRequest, send sendFunc) error {
	if err := checkPrefix(req.GetPrefix()); err != nil {
		return err
	}
	sel, err := newSelector(req.GetLabelSelector(), req.GetFieldSelector(), req.GetSelectableFields())
	if err != nil {
		return err
	}
	if req.GetResourceVersion() < 0 {
		return apierrors.NewBadRequest("resourceVersion must not be negative")
	}
	cli := s.etcdForPrefix(req.GetPrefix())
	// Without a leader, etcd would leave the watch silent: cancel it instead.
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()

	rev := req.GetResourceVersion()
	future := false
	switch {
	case req.GetSendInitialEvents():
		if rev > 0 {
			// Initial events as of a revision not reached yet: wait for it
			// as upstream's watch cache does (3s), then 504.
			if _, err := s.waitRevision(ctx, cli, uint64(rev)); err != nil {
				return err
			}
		}
		if rev, err = s.sendInitialEvents(ctx, cli, req.GetPrefix(), rev, sel, send); err != nil {
			return err
		}
		if err := send(bookmark(rev)); err != nil {
			return err
		}
	default:
		// "From now" (0) pins now to a revision, which bookmarks can then
		// carry; a watch from a revision still to come waits for it
		// silently (as upstream's) and has no bookmark before the store
		// reaches it.
		resp, err := cli.Get(ctx, keyRoot, clientv3.WithCountOnly())
		if err != nil {
			return etcdErr(ctx, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		future = rev > resp.Header.Revision
	}

	w := &watcher{svc: s, prefix: []byte(req.GetPrefix()), sel: sel, send: send, rev: rev, bookmarks: req.GetAllowBookmarks(), future: future}
	return w.run(ctx)
}

// sendInitialEvents sends an ADDED event for every matching object at rev
// (0: the latest revision) and returns the revision read.
func (s *Service) sendInitialEvents(ctx context.Context, cli *clientv3.Client, prefix string, rev int64, sel *selector, send sendFunc) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		ops := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(initialPageSize)}
		if rev > 0 {
			ops = append(ops, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, ops...)
		if err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return 0, errTooOld(rev, s.compactRevision(ctx, cli))
			}
			return 0, s.readErr(ctx, err, rev, false)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			ok, err := sel.matches(kv.Value)
			if err != nil {
				s.reportCorrupt(kv.Key, corrupt(err))
				continue
			}
			if !ok {
				continue
			}
			obj, err := readObject(kv.Value, kv.ModRevision)
			if err != nil {
				// A corrupt object is left out, as lists leave it out.
				s.reportCorrupt(kv.Key, err)
				continue
			}
			if err := send(&storagev1.WatchResponse{Type: commonv1.EventType_EVENT_TYPE_ADDED, Object: obj, ResourceVersion: kv.ModRevision}); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// bookmark is a BOOKMARK event: no object, only the revision.
func bookmark(rev int64) *storagev1.WatchResponse {
	return &storagev1.WatchResponse{Type: commonv1.EventType_EVENT_TYPE_BOOKMARK, ResourceVersion: rev}
}

// watcher turns the events of a hub into one watch's WatchResponses.
type watcher struct {
	svc       *Service
	prefix    []byte
	sel       *selector
	send      sendFunc
	rev       int64 // every change up to rev has been sent
	bookmarks bool
	// future is set while the watch's start revision is ahead of the
	// store: no bookmark is due before the store reaches it (upstream's
	// watch cache sends none).
	future bool
}

// run subscribes to a hub from w.rev and streams its events until ctx ends
// or the hub fails.
//
// Bookmarks: every BookmarkInterval the watcher asks etcd for a progress
// notification on its hub's stream, which carries the store's revision once
// every event before it was delivered, and sends a BOOKMARK with it. etcd
// withholds progress notifications while the watch starts in the future (as
// a watch from a list's revision does until the next write), so when none
// comes soon the BOOKMARK carries the revision the watcher knows it has
// reached.
func (w *watcher) run(ctx context.Context) error {
	return w.loop(ctx, w.svc.subscribe(ctx, string(w.prefix), w.rev))
}

func (w *watcher) loop(ctx context.Context, sub *subscription) error {
	defer func() { w.svc.unsubscribe(sub) }()

	var tick, fallback <-chan time.Time
	var fallbackTimer *time.Timer
	pending := false // a bookmark is due
	if w.bookmarks {
		t := time.NewTicker(w.svc.cfg.BookmarkInterval)
		defer t.Stop()
		tick = t.C
		fallbackTimer = time.NewTimer(time.Hour)
		fallbackTimer.Stop()
		defer fallbackTimer.Stop()
		fallback = fallbackTimer.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if err := sub.hub.requestProgress(); err != nil && ctx.Err() == nil {
				w.svc.log.Debug("watch progress request", "err", err)
			}
			pending = true
			fallbackTimer.Reset(min(w.svc.cfg.BookmarkInterval/2, time.Second))
		case <-fallback:
			if pending && !w.future {
				pending = false
				if err := w.send(bookmark(w.rev)); err != nil {
					return err
				}
			}
		case b, ok := <-sub.ch:
			if !ok {
				next, err := w.hubEnded(ctx, sub)
				if next == nil {
					return err
				}
				sub = next
				continue
			}
			if b.events == nil {
				if b.rev >= w.rev {
					w.future = false
				}
				w.rev = max(w.rev, b.rev)
				if pending && !w.future {
					pending = false
					fallbackTimer.Stop()
					if err := w.send(bookmark(w.rev)); err != nil {
						return err
					}
				}
				continue
			}
			for _, ev := range b.events {
				if ev.Kv.ModRevision <= sub.start || !bytes.HasPrefix(ev.Kv.Key, w.prefix) {
					continue
				}
				if err := w.event(ev); err != nil {
					return err
				}
			}
		}
	}
}

// hubEnded handles the end of a subscription: the error that ends the
// watch, or a new subscription to go on with.
func (w *watcher) hubEnded(ctx context.Context, sub *subscription) (*subscription, error) {
	if ctx.Err() != nil {
		return nil, nil
	}
	var compacted compactedError
	switch err := sub.err; {
	case errors.Is(err, errSlowWatcher):
		// As upstream's watch cache does with a watcher that cannot keep
		// up: end the watch; the client watches again from its last
		// revision.
		w.svc.log.Info("ending a watch that fell behind", "prefix", string(w.prefix), "rev", w.rev)
		return nil, nil
	case errors.As(err, &compacted):
		if w.rev < compacted.compactRev {
			return nil, errTooOld(w.rev, compacted.compactRev)
		}
		// The hub started from an older revision than this watch: the
		// watch's own history is still there.
		w.svc.unsubscribe(sub)
		return w.svc.subscribe(ctx, string(w.prefix), w.rev), nil
	case errors.Is(err, context.Canceled):
		return nil, nil
	default:
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err
		}
		return nil, etcdErr(ctx, err)
	}
}

func (w *watcher) event(ev *hubEvent) error {
	rev := ev.Kv.ModRevision
	resp, err := w.convert(ev)
	if err != nil {
		return err
	}
	w.rev = rev
	w.future = false
	if resp == nil {
		return nil
	}
	return w.send(resp)
}

// convert maps an etcd event to the event the client sees through the
// selector; nil when it sees none. A corrupt value is one the client does
// not see (lists leave it out): a corrupt previous value makes the new one
// an ADDED, a corrupt new value of an object the client saw a DELETED.
func (w *watcher) convert(ev *hubEvent) (*storagev1.WatchResponse, error) {
	rev := ev.Kv.ModRevision
	prev := ev.PrevKv
	prevMatches := false // a corrupt previous value matches nothing
	if prev != nil {
		if _, err := ev.previous(); err == nil {
			ok, err := w.sel.matches(prev.Value)
			prevMatches = ok && err == nil
		}
	}
	if ev.Type == mvccpb.DELETE {
		if prev == nil {
			w.svc.log.Warn("etcd delete event without the previous value", "key", string(ev.Kv.Key), "rev", rev)
			return nil, nil
		}
		if !prevMatches {
			return nil, nil
		}
		return deletedEvent(ev, rev)
	}

	curMatches := false
	if _, err := ev.current(); err == nil {
		ok, err := w.sel.matches(ev.Kv.Value)
		curMatches = ok && err == nil
	}
	if prev == nil && !ev.IsCreate() {
		// The previous value is unknown (compacted): judge by the new one.
		prevMatches = curMatches
	}
	switch {
	case curMatches && prevMatches:
		return objectEvent(commonv1.EventType_EVENT_TYPE_MODIFIED, ev)
	case curMatches:
		return objectEvent(commonv1.EventType_EVENT_TYPE_ADDED, ev)
	case prevMatches:
		// It stopped matching (or went corrupt): DELETED with the previous
		// content at the event's revision, as the upstream watch cache does.
		return deletedEvent(ev, rev)
	}
	return nil, nil
}

func objectEvent(t commonv1.EventType, ev *hubEvent) (*storagev1.WatchResponse, error) {
	obj, err := ev.current()
	if err != nil {
		return nil, err
	}
	return &storagev1.WatchResponse{Type: t, Object: obj, ResourceVersion: ev.Kv.ModRevision}, nil
}

func deletedEvent(ev *hubEvent, rev int64) (*storagev1.WatchResponse, error) {
	obj, err := ev.previous()
	if err != nil {
		return nil, err
	}
	return &storagev1.WatchResponse{Type: commonv1.EventType_EVENT_TYPE_DELETED, Object: obj, ResourceVersion: rev}, nil
}
