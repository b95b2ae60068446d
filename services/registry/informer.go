package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// informer keeps a local copy of every CRD, fed by a StorageService watch
// (initial events, then changes), and tells handlers about each change.
// Handlers run synchronously in event order and must not block.
type informer struct {
	client storagev1.StorageServiceClient
	log    *slog.Logger

	mu   sync.RWMutex
	crds map[string]*CRD
	// groups indexes crds by spec.group: the names controller reads one
	// group per CRD it syncs, which must not cost a scan of every CRD.
	groups  map[string]map[string]*CRD
	deleted map[string]int64 // revision at which a CRD was last seen deleted
	// created is the revision at which each CRD was first seen: its
	// creation's, for CRDs created while the watch runs (updates, such as
	// the finalizer's, do not move it)
	created map[string]int64
	// watched is the revision the watch has delivered up to: every CRD
	// created at or before it is in crds (observe may add later ones
	// earlier)
	watched  int64
	synced   bool
	syncedCh chan struct{}
	handlers []func(old, new *CRD)
}

func newInformer(client storagev1.StorageServiceClient, log *slog.Logger) *informer {
	return &informer{client: client, log: log, crds: map[string]*CRD{}, groups: map[string]map[string]*CRD{}, deleted: map[string]int64{}, created: map[string]int64{}, syncedCh: make(chan struct{})}
}

// addHandler registers fn for every change (old nil on add, new nil on
// delete). Register before run.
func (in *informer) addHandler(fn func(old, new *CRD)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.handlers = append(in.handlers, fn)
}

// get returns the CRD called name (do not modify it).
func (in *informer) get(name string) (*CRD, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	c, ok := in.crds[name]
	return c, ok
}

// createdAt returns the revision at which the CRD called name was first
// seen (0: not known), and the revision the watch has delivered up to.
func (in *informer) createdAt(name string) (created, watched int64) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.created[name], in.watched
}

// listGroup returns the CRDs of group, by name (do not modify them).
func (in *informer) listGroup(group string) []*CRD {
	in.mu.RLock()
	defer in.mu.RUnlock()
	m := in.groups[group]
	out := make([]*CRD, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// index records crd (nil: none) in place of old (nil: none) in groups;
// in.mu is held.
func (in *informer) index(old, crd *CRD) {
	if old != nil {
		if m := in.groups[old.Spec.Group]; m != nil {
			delete(m, old.Name)
			if len(m) == 0 {
				delete(in.groups, old.Spec.Group)
			}
		}
	}
	if crd != nil {
		m := in.groups[crd.Spec.Group]
		if m == nil {
			m = map[string]*CRD{}
			in.groups[crd.Spec.Group] = m
		}
		m[crd.Name] = crd
	}
}

// list returns every CRD, by name (do not modify them).
func (in *informer) list() []*CRD {
	in.mu.RLock()
	defer in.mu.RUnlock()
	out := make([]*CRD, 0, len(in.crds))
	for _, c := range in.crds {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (in *informer) hasSynced() bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return in.synced
}

// waitSynced waits for the first complete view.
func (in *informer) waitSynced(ctx context.Context) error {
	select {
	case <-in.syncedCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run follows the watch until ctx ends, starting over from a fresh set of
// initial events whenever the stream breaks.
func (in *informer) run(ctx context.Context) {
	backoff := 20 * time.Millisecond
	for ctx.Err() == nil {
		err := in.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		in.log.Debug("CRD watch ended; restarting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func (in *informer) follow(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := in.client.Watch(ctx, &storagev1.WatchRequest{Prefix: crdPrefix, SendInitialEvents: true, AllowBookmarks: true})
	if err != nil {
		return fmt.Errorf("watch CRDs: %w", err)
	}
	initial := map[string]*CRD{}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("watch closed")
			}
			return fmt.Errorf("watch CRDs: %w", err)
		}
		switch ev.GetType() {
		case commonv1.EventType_EVENT_TYPE_BOOKMARK:
			if initial != nil {
				in.replace(initial)
				initial = nil
			}
			in.watchedUpTo(ev.GetResourceVersion())
			continue
		case commonv1.EventType_EVENT_TYPE_ADDED, commonv1.EventType_EVENT_TYPE_MODIFIED, commonv1.EventType_EVENT_TYPE_DELETED:
		default:
			continue
		}
		crd, err := decodeWithRV(ev.GetObject(), ev.GetResourceVersion())
		if err != nil {
			in.log.Warn("undecodable CRD in watch", "err", err)
			continue
		}
		switch {
		case initial != nil:
			initial[crd.Name] = crd
		case ev.GetType() == commonv1.EventType_EVENT_TYPE_DELETED:
			in.remove(crd.Name, ev.GetResourceVersion())
		default:
			in.observe(crd)
		}
		if initial == nil {
			in.watchedUpTo(ev.GetResourceVersion())
		}
	}
}

// watchedUpTo records that the watch has delivered every change up to rv.
func (in *informer) watchedUpTo(rv int64) {
	in.mu.Lock()
	in.watched = max(in.watched, rv)
	in.mu.Unlock()
}

// replace installs a complete view, notifying the differences.
func (in *informer) replace(all map[string]*CRD) {
	in.mu.Lock()
	type change struct{ old, new *CRD }
	var changes []change
	for name, old := range in.crds {
		if _, ok := all[name]; !ok {
			changes = append(changes, change{old, nil})
		}
	}
	for name, c := range all {
		old := in.crds[name]
		if old == nil || old.ResourceVersion != c.ResourceVersion {
			changes = append(changes, change{old, c})
		}
	}
	in.crds = all
	in.groups = map[string]map[string]*CRD{}
	for name, c := range all {
		in.index(nil, c)
		if _, ok := in.created[name]; !ok {
			in.created[name] = rvOf(c)
		}
	}
	for name := range in.created {
		if _, ok := all[name]; !ok {
			delete(in.created, name)
		}
	}
	if !in.synced {
		in.synced = true
		close(in.syncedCh)
	}
	handlers := in.handlers
	in.mu.Unlock()
	for _, ch := range changes {
		for _, h := range handlers {
			h(ch.old, ch.new)
		}
	}
}

// observe records a CRD read or written (newer resourceVersions win), so
// that controllers see their own writes before the watch brings them.
func (in *informer) observe(crd *CRD) {
	in.mu.Lock()
	old := in.crds[crd.Name]
	if (old != nil && !newer(crd, old)) || rvOf(crd) <= in.deleted[crd.Name] {
		in.mu.Unlock()
		return
	}
	in.crds[crd.Name] = crd
	in.index(old, crd)
	if old == nil {
		in.created[crd.Name] = rvOf(crd)
	}
	handlers := in.handlers
	in.mu.Unlock()
	for _, h := range handlers {
		h(old, crd)
	}
}

func (in *informer) remove(name string, rv int64) {
	in.mu.Lock()
	old, ok := in.crds[name]
	delete(in.crds, name)
	delete(in.created, name)
	if ok {
		in.index(old, nil)
	}
	in.deleted[name] = max(in.deleted[name], rv)
	handlers := in.handlers
	in.mu.Unlock()
	if !ok {
		return
	}
	for _, h := range handlers {
		h(old, nil)
	}
}

// newer reports whether a has a higher resourceVersion than b.
func newer(a, b *CRD) bool { return rvOf(a) > rvOf(b) }

func rvOf(crd *CRD) int64 {
	rv, _ := strconv.ParseInt(crd.ResourceVersion, 10, 64)
	return rv
}
