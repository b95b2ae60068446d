// Package convcache keeps converted custom resources: the result of
// converting one object, as of one resourceVersion, to one apiVersion, with
// one generation of its CRD. A new resourceVersion is a new key, so nothing
// is ever invalidated: stale entries fall out of a least-recently-used list
// bounded by bytes. Any change of a CRD's spec (its conversion webhook's
// clientConfig and caBundle, its schemas) bumps the CRD's generation, part
// of the key, so a changed CRD never answers from conversions of the
// previous one.
//
// An entry is used only for the very bytes it was converted from: a
// 64-bit hash of the input is kept with it (an update's object carries
// the resourceVersion it replaces, with other content; the defaults of
// another schema give other bytes).
//
// The converter service caches webhook answers with it, the gateway the
// objects it serves (converted and coerced to the target schema), so that
// repeated reads of an object, the watches of a version and a write's
// answer followed by its watch event cost one conversion.
package convcache

import (
	"container/list"
	"hash/maphash"
	"sync"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// DefaultMaxBytes is the default budget of a cache.
const DefaultMaxBytes = 64 << 20

// Metrics, labelled by the component that owns the cache.
var (
	hits = metrics.NewCounterVec("conversion_cache", "hits_total",
		"Conversions answered from the cache of converted objects.", "component")
	misses = metrics.NewCounterVec("conversion_cache", "misses_total",
		"Conversions of cacheable objects (with uid and resourceVersion) not in the cache.", "component")
	evictions = metrics.NewCounterVec("conversion_cache", "evictions_total",
		"Converted objects evicted to stay within the cache's byte budget.", "component")
	bytesHeld = metrics.NewGaugeVec("conversion_cache", "bytes",
		"Bytes held by the cache of converted objects (objects and keys).", "component")
	entriesHeld = metrics.NewGaugeVec("conversion_cache", "entries",
		"Converted objects held in the cache.", "component")
)

// Config configures a Cache.
type Config struct {
	// MaxBytes bounds what the cache holds (objects, keys and a per-entry
	// overhead); 0 or less: no cache (New returns nil).
	MaxBytes int64
	// Component names the owner in the metrics ("gateway", "converter").
	Component string
}

// Key names one conversion result.
type Key struct {
	CRDUID     string
	Generation int64 // of the CRD
	UID        string
	// ResourceVersion of the object converted.
	ResourceVersion string
	// APIVersion converted to.
	APIVersion string
}

// Input is an object to convert as the cache sees it: its key (without
// the CRD's part and the target) and the hash of its bytes.
type Input struct {
	UID, ResourceVersion string
	sum                  uint64
}

// entryOverhead approximates the bookkeeping of one entry (map slot, list
// element, struct) beyond its strings and object.
const entryOverhead = 160

type entry struct {
	key  Key
	sum  uint64
	out  []byte
	size int64
}

// Cache holds converted objects. A nil *Cache is a cache that holds
// nothing. It is safe for concurrent use.
type Cache struct {
	seed maphash.Seed
	max  int64

	hits, misses, evictions prometheusCounter
	bytes, entries          prometheusGauge

	mu    sync.Mutex
	size  int64
	lru   *list.List // of *entry, most recent first
	byKey map[Key]*list.Element
	stats Stats
}

// Stats counts what a Cache did and holds.
type Stats struct {
	Hits, Misses, Evictions int64
	Bytes                   int64
	Entries                 int
}

type prometheusCounter interface{ Inc() }

type prometheusGauge interface {
	Add(float64)
	Inc()
	Dec()
}

// New returns a cache, or nil when cfg.MaxBytes is not positive.
func New(cfg Config) *Cache {
	if cfg.MaxBytes <= 0 {
		return nil
	}
	return &Cache{
		seed: maphash.MakeSeed(), max: cfg.MaxBytes, lru: list.New(), byKey: map[Key]*list.Element{},
		hits: hits.WithLabelValues(cfg.Component), misses: misses.WithLabelValues(cfg.Component),
		evictions: evictions.WithLabelValues(cfg.Component),
		bytes:     bytesHeld.WithLabelValues(cfg.Component), entries: entriesHeld.WithLabelValues(cfg.Component),
	}
}

var metaKeys = []string{"uid", "resourceVersion"}

// Inspect reads obj's uid and resourceVersion and hashes it; ok is false
// for an object without both (a create's object), which is not cached.
func (c *Cache) Inspect(obj []byte) (in Input, ok bool) {
	if c == nil {
		return in, false
	}
	meta, found, err := jsonscan.Lookup(obj, "metadata")
	if err != nil || !found || len(meta) == 0 || meta[0] != '{' {
		return in, false
	}
	var m [2]jsonscan.Member
	if jsonscan.FindEach(meta, jsonscan.SkipSpace(meta, 0), metaKeys, m[:]) != nil {
		return in, false
	}
	uid, _ := jsonscan.String(m[0].Value(meta))
	rv, _ := jsonscan.String(m[1].Value(meta))
	if uid == "" || rv == "" {
		return in, false
	}
	return Input{UID: uid, ResourceVersion: rv, sum: maphash.Bytes(c.seed, obj)}, true
}

// KeyFor is the key of in's conversion to apiVersion with a CRD
// generation.
func (in Input) KeyFor(crdUID string, generation int64, apiVersion string) Key {
	return Key{CRDUID: crdUID, Generation: generation, UID: in.UID, ResourceVersion: in.ResourceVersion, APIVersion: apiVersion}
}

// Get returns the cached conversion of in under k, if any.
func (c *Cache) Get(k Key, in Input) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok || el.Value.(*entry).sum != in.sum {
		c.stats.Misses++
		c.misses.Inc()
		return nil, false
	}
	c.lru.MoveToFront(el)
	c.stats.Hits++
	c.hits.Inc()
	return el.Value.(*entry).out, true
}

// Put caches out as the conversion of in under k, evicting the least
// recently used entries beyond the budget. An object larger than a quarter
// of the budget is not cached. out must not be modified afterwards.
func (c *Cache) Put(k Key, in Input, out []byte) {
	if c == nil {
		return
	}
	size := int64(len(out)+len(k.CRDUID)+len(k.UID)+len(k.ResourceVersion)+len(k.APIVersion)) + entryOverhead
	if size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.removeLocked(el)
	}
	// Capacity clipped: an append by a reader copies, never writes into
	// what other readers share.
	c.byKey[k] = c.lru.PushFront(&entry{key: k, sum: in.sum, out: out[:len(out):len(out)], size: size})
	c.size += size
	c.bytes.Add(float64(size))
	c.entries.Inc()
	for c.size > c.max {
		c.removeLocked(c.lru.Back())
		c.stats.Evictions++
		c.evictions.Inc()
	}
}

// Forget drops the entries of a CRD (deleted).
func (c *Cache) Forget(crdUID string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*entry).key.CRDUID == crdUID {
			c.removeLocked(el)
		}
		el = next
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := el.Value.(*entry)
	c.lru.Remove(el)
	delete(c.byKey, e.key)
	c.size -= e.size
	c.bytes.Add(-float64(e.size))
	c.entries.Dec()
}

// Stats returns what the cache did and holds.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Entries = c.size, c.lru.Len()
	return s
}
