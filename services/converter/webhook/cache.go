package webhook

import (
	"container/list"
	"hash/maphash"
	"sync"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// Cache metrics (every Converter of the process adds to them).
var (
	cacheHits = metrics.NewCounter("converter", "cache_hits_total",
		"Conversions answered from the cache of converted objects.")
	cacheMisses = metrics.NewCounter("converter", "cache_misses_total",
		"Conversions of cacheable objects (with uid and resourceVersion) not in the cache.")
	cacheEvictions = metrics.NewCounter("converter", "cache_evictions_total",
		"Converted objects evicted from the cache to stay within its byte budget.")
	cacheBytes = metrics.NewGauge("converter", "cache_bytes",
		"Bytes held by the cache of converted objects (objects and keys).")
	cacheEntries = metrics.NewGauge("converter", "cache_entries",
		"Converted objects held in the cache.")
)

// cacheKey names one conversion result: an object (uid) as of one
// resourceVersion, converted to one apiVersion, with one generation of its
// CRD (crd uid and generation: any change of the CRD's spec, the webhook's
// clientConfig and caBundle included, bumps the generation, so a changed
// webhook never answers from conversions of the previous one). A new
// resourceVersion is a new key: nothing is invalidated, stale entries age
// out of the LRU.
type cacheKey struct {
	crdUID     string
	generation int64
	uid        string
	rv         string
	to         string
}

// cacheEntry is one converted object. sum is the hash of the object
// converted: the same uid and resourceVersion with other bytes (a write's
// object, which carries the resourceVersion it replaces; defaults of
// another schema) is a miss.
type cacheEntry struct {
	key  cacheKey
	sum  uint64
	out  []byte
	size int64
}

// entryOverhead approximates the bookkeeping of one entry (map slot, list
// element, struct) beyond its strings and object.
const entryOverhead = 160

// cache holds converted objects, least recently used evicted first, within
// max bytes. It is safe for concurrent use.
type cache struct {
	seed maphash.Seed
	max  int64

	mu    sync.Mutex
	size  int64
	lru   *list.List // of *cacheEntry, most recent first
	byKey map[cacheKey]*list.Element
}

func newCache(maxBytes int64) *cache {
	if maxBytes <= 0 {
		return nil
	}
	return &cache{seed: maphash.MakeSeed(), max: maxBytes, lru: list.New(), byKey: map[cacheKey]*list.Element{}}
}

// lookupKey returns the key and hash of obj's conversion to `to`; ok is
// false for objects without uid or resourceVersion (a create's object),
// which are not cached.
func (c *cache) lookupKey(t *target, to string, obj []byte) (k cacheKey, sum uint64, ok bool) {
	meta, found, err := jsonscan.Lookup(obj, "metadata")
	if err != nil || !found || len(meta) == 0 || meta[0] != '{' {
		return k, 0, false
	}
	var m [2]jsonscan.Member
	if scanMembers(meta, cacheMetaKeys, m[:]) != nil {
		return k, 0, false
	}
	uid, rv := stringValue(m[0].Value(meta)), stringValue(m[1].Value(meta))
	if uid == "" || rv == "" {
		return k, 0, false
	}
	return cacheKey{crdUID: t.uid, generation: t.generation, uid: uid, rv: rv, to: to}, maphash.Bytes(c.seed, obj), true
}

var cacheMetaKeys = []string{"uid", "resourceVersion"}

// get returns the converted object of k, if cached from the same input.
func (c *cache) get(k cacheKey, sum uint64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok || el.Value.(*cacheEntry).sum != sum {
		cacheMisses.Inc()
		return nil, false
	}
	c.lru.MoveToFront(el)
	cacheHits.Inc()
	return el.Value.(*cacheEntry).out, true
}

// put caches out as the conversion of k, evicting the least recently used
// entries beyond the budget. An object larger than a quarter of the budget
// is not cached.
func (c *cache) put(k cacheKey, sum uint64, out []byte) {
	size := int64(len(out)+len(k.crdUID)+len(k.uid)+len(k.rv)+len(k.to)) + entryOverhead
	if size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.removeLocked(el)
	}
	e := &cacheEntry{key: k, sum: sum, out: out, size: size}
	c.byKey[k] = c.lru.PushFront(e)
	c.size += size
	cacheBytes.Add(float64(size))
	cacheEntries.Inc()
	for c.size > c.max {
		c.removeLocked(c.lru.Back())
		cacheEvictions.Inc()
	}
}

// forget drops the entries of a CRD (deleted).
func (c *cache) forget(crdUID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*cacheEntry).key.crdUID == crdUID {
			c.removeLocked(el)
		}
		el = next
	}
}

func (c *cache) removeLocked(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.byKey, e.key)
	c.size -= e.size
	cacheBytes.Sub(float64(e.size))
	cacheEntries.Dec()
}

// stats returns the bytes and entries held.
func (c *cache) stats() (bytes int64, entries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size, c.lru.Len()
}
