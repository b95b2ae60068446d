// Package crdcache keeps a local, watch-fed copy of every
// CustomResourceDefinition, so that services answer requests without asking
// the registry (DESIGN.md: CRD state flows by watch, not by lookup).
package crdcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// CRD is an immutable snapshot of one CustomResourceDefinition.
type CRD = apiextensionsv1.CustomResourceDefinition

// Cache is a watch-fed map of CRDs by name. Its zero value is not usable;
// call New.
type Cache struct {
	client registryv1.RegistryServiceClient
	log    *slog.Logger

	mu       sync.RWMutex
	byName   map[string]*CRD
	byGR     map[groupResource]*CRD
	synced   bool
	rv       int64
	changed  chan struct{} // closed and replaced on every change
	handlers []func(old, new *CRD)
}

type groupResource struct{ group, resource string }

// New returns a cache that follows client's CRD watch once Run is called.
func New(client registryv1.RegistryServiceClient, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.Default()
	}
	return &Cache{
		client:  client,
		log:     log.With("component", "crdcache"),
		byName:  map[string]*CRD{},
		byGR:    map[groupResource]*CRD{},
		changed: make(chan struct{}),
	}
}

// OnChange registers fn to run (synchronously, in event order) for every
// change: old is nil on add, new is nil on delete. Register before Run.
func (c *Cache) OnChange(fn func(old, new *CRD)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers = append(c.handlers, fn)
}

// Run follows the registry's watch until ctx ends, reconnecting (and
// resynchronising from a fresh list) whenever the stream breaks.
func (c *Cache) Run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		c.log.Debug("CRD watch ended; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (c *Cache) follow(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.client.Watch(ctx, &registryv1.WatchRequest{SendInitialEvents: true, AllowBookmarks: true})
	if err != nil {
		return fmt.Errorf("watch CRDs: %w", err)
	}
	initial := map[string]*CRD{}
	inInitial := true
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("watch closed by registry")
			}
			return fmt.Errorf("watch CRDs: %w", err)
		}
		switch ev.GetType() {
		case commonv1.EventType_EVENT_TYPE_BOOKMARK:
			if inInitial {
				inInitial = false
				c.replaceAll(initial, ev.GetResourceVersion())
				initial = nil
			}
			continue
		case commonv1.EventType_EVENT_TYPE_ADDED, commonv1.EventType_EVENT_TYPE_MODIFIED, commonv1.EventType_EVENT_TYPE_DELETED:
		default:
			continue
		}
		crd := &CRD{}
		if err := json.Unmarshal(ev.GetObject(), crd); err != nil {
			c.log.Warn("undecodable CRD in watch", "err", err)
			continue
		}
		if inInitial {
			initial[crd.Name] = crd
			continue
		}
		if ev.GetType() == commonv1.EventType_EVENT_TYPE_DELETED {
			c.apply(crd.Name, nil, ev.GetResourceVersion())
		} else {
			c.apply(crd.Name, crd, ev.GetResourceVersion())
		}
	}
}

func (c *Cache) replaceAll(all map[string]*CRD, rv int64) {
	c.mu.Lock()
	type change struct{ old, new *CRD }
	var changes []change
	for name, old := range c.byName {
		if _, ok := all[name]; !ok {
			changes = append(changes, change{old, nil})
		}
	}
	for name, crd := range all {
		old := c.byName[name]
		if old == nil || old.ResourceVersion != crd.ResourceVersion {
			changes = append(changes, change{old, crd})
		}
	}
	c.byName = all
	c.byGR = make(map[groupResource]*CRD, len(all))
	for _, crd := range all {
		c.byGR[groupResource{crd.Spec.Group, crd.Spec.Names.Plural}] = crd
	}
	c.synced = true
	c.rv = rv
	handlers := c.handlers
	c.notifyLocked()
	c.mu.Unlock()
	for _, ch := range changes {
		for _, h := range handlers {
			h(ch.old, ch.new)
		}
	}
}

func (c *Cache) apply(name string, crd *CRD, rv int64) {
	c.mu.Lock()
	old := c.byName[name]
	if old != nil {
		delete(c.byGR, groupResource{old.Spec.Group, old.Spec.Names.Plural})
	}
	if crd == nil {
		delete(c.byName, name)
	} else {
		c.byName[name] = crd
		c.byGR[groupResource{crd.Spec.Group, crd.Spec.Names.Plural}] = crd
	}
	if rv > c.rv {
		c.rv = rv
	}
	handlers := c.handlers
	c.notifyLocked()
	c.mu.Unlock()
	for _, h := range handlers {
		h(old, crd)
	}
}

func (c *Cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Synced reports whether the first full list has arrived.
func (c *Cache) Synced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.synced
}

// WaitSynced blocks until the first full list has arrived or ctx ends.
func (c *Cache) WaitSynced(ctx context.Context) error {
	return c.wait(ctx, func() bool { return c.synced })
}

// ResourceVersion is the newest CRD revision the cache has seen.
func (c *Cache) ResourceVersion() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

// Get returns the CRD named name.
func (c *Cache) Get(name string) (*CRD, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	crd, ok := c.byName[name]
	return crd, ok
}

// ByResource returns the CRD serving group/resource (resource = the plural).
func (c *Cache) ByResource(group, resource string) (*CRD, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	crd, ok := c.byGR[groupResource{group, resource}]
	return crd, ok
}

// List returns every CRD (in no particular order).
func (c *Cache) List() []*CRD {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*CRD, 0, len(c.byName))
	for _, crd := range c.byName {
		out = append(out, crd)
	}
	return out
}

// WaitFor returns the CRD named name once the cache holds it with the given
// uid at generation >= generation (an empty uid or zero generation matches
// any), or an error when ctx ends first.
func (c *Cache) WaitFor(ctx context.Context, name, uid string, generation int64) (*CRD, error) {
	var found *CRD
	err := c.wait(ctx, func() bool {
		crd, ok := c.byName[name]
		if !ok || (uid != "" && string(crd.UID) != uid) || crd.Generation < generation {
			return false
		}
		found = crd
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("CRD %s (uid %s, generation %d) not in cache: %w", name, uid, generation, err)
	}
	return found, nil
}

// wait blocks until cond (called with the read lock held) is true.
func (c *Cache) wait(ctx context.Context, cond func() bool) error {
	for {
		c.mu.RLock()
		ok := cond()
		ch := c.changed
		c.mu.RUnlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
