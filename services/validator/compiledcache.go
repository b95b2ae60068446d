package validator

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// compiledCache keeps compiled CRD versions, per CRD uid and generation,
// within a memory budget: each compiled version and each CRD's type
// converter is charged its estimate (crdlimits.EstimateCompiledSize) before
// it is built; when a charge takes the cache over its limit, the least
// recently used CRDs are evicted (they compile again on their next
// request). A CRD whose versions alone do not fit is refused with a 500
// rather than compiled. Entries of superseded generations and deleted CRDs
// are evicted as the source reports changes.
type compiledCache struct {
	limit int64

	mu        sync.Mutex
	entries   map[crdKey]*crdEntry
	lru       list.List           // of *crdEntry, most recently used first
	latest    map[types.UID]int64 // newest generation seen per CRD; -1: deleted
	used      int64               // bytes charged by the entries in the cache
	evictions int64
}

type crdKey struct {
	uid        types.UID
	generation int64
}

// crdEntry is one CRD generation: its compiled versions and its type
// converter, built on demand.
type crdEntry struct {
	cache *compiledCache
	key   crdKey
	crd   *CRD
	size  crdlimits.CompiledSize

	// guarded by cache.mu
	versions map[string]*versionEntry
	charged  int64
	elem     *list.Element // nil once evicted (or when never cached)

	tcOnce sync.Once
	tc     managedfields.TypeConverter
	tcErr  error
}

type versionEntry struct {
	once sync.Once
	cv   *compiledVersion
	err  error
}

var (
	// schemaCacheRequests counts compiled-schema lookups by result (hit, miss).
	schemaCacheRequests = metrics.NewCounterVec("validator", "schema_cache_requests_total",
		"Compiled-schema cache lookups (CRD uid + generation + version), by result: hit or miss.", "result")
	compiledBytes = metrics.NewGauge("validator", "compiled_crd_bytes",
		"Estimated bytes of the compiled CRD versions and type converters in the compiled-schema cache (crdlimits.EstimateCompiledSize).")
	compiledLimit = metrics.NewGauge("validator", "compiled_crd_limit_bytes",
		"The compiled-schema cache's memory budget (--compiled-crd-memory-limit).")
	compiledEvictions = metrics.NewCounter("validator", "compiled_crd_evictions_total",
		"CRD generations evicted from the compiled-schema cache to stay within its memory budget.")
	compiledRefused = metrics.NewCounter("validator", "compiled_crd_refused_total",
		"Compilations refused because the CRD alone exceeds the compiled-schema cache's memory budget.")
)

func newCompiledCache(limit int64) *compiledCache {
	compiledLimit.Set(float64(limit))
	return &compiledCache{limit: limit, entries: map[crdKey]*crdEntry{}, latest: map[types.UID]int64{}}
}

// errOverBudget marks a refused compilation.
var errOverBudget = errors.New("over the compiled-CRD memory budget")

// get returns crd's version compiled, compiling it once per generation
// while it stays cached.
func (c *compiledCache) get(crd *CRD, version string) (*compiledVersion, error) {
	if _, err := findVersion(crd, version); err != nil {
		return nil, err
	}
	key := crdKey{crd.UID, crd.Generation}
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &crdEntry{cache: c, key: key, crd: crd, size: crdlimits.EstimateCompiledSize(crd), versions: map[string]*versionEntry{}}
		// Do not keep what is already superseded (a change raced with
		// this request); it is still compiled for this request.
		if latest, seen := c.latest[crd.UID]; !seen || (latest >= 0 && latest <= crd.Generation) {
			c.entries[key] = e
			e.elem = c.lru.PushFront(e)
		}
	} else {
		c.lru.MoveToFront(e.elem)
	}
	ve, ok := e.versions[version]
	if ok {
		schemaCacheRequests.WithLabelValues("hit").Inc()
	} else {
		schemaCacheRequests.WithLabelValues("miss").Inc()
		ve = &versionEntry{}
		e.versions[version] = ve
	}
	c.mu.Unlock()
	ve.once.Do(func() {
		if err := e.charge(e.versionSize(version)); err != nil {
			ve.err = err
			return
		}
		ve.cv, ve.err = compileVersion(crd, version)
		if ve.cv != nil {
			ve.cv.owner = e
		}
	})
	return ve.cv, ve.err
}

func (e *crdEntry) versionSize(version string) int64 {
	for i, v := range e.crd.Spec.Versions {
		if v.Name == version {
			return e.size.Versions[i]
		}
	}
	return 0
}

// typeConverter returns the CRD's server-side apply type converter (built
// from all its versions), building it once, after charging it.
func (e *crdEntry) typeConverter() (managedfields.TypeConverter, error) {
	e.tcOnce.Do(func() {
		if e.tcErr = e.charge(e.size.TypeConverter); e.tcErr != nil {
			return
		}
		e.tc, e.tcErr = typeConverter(e.crd)
	})
	return e.tc, e.tcErr
}

// charge accounts n more bytes to e, evicting the least recently used
// other entries while the cache is over its limit. When e alone would not
// fit, it is evicted too and the answer is a 500: compiling it could take
// the service past its memory limit.
func (e *crdEntry) charge(n int64) error {
	c := e.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.charged+n > c.limit {
		compiledRefused.Inc()
		c.removeLocked(e)
		return apierrors.NewInternalError(fmt.Errorf(
			"CustomResourceDefinition %s needs an estimated %d bytes once compiled, more than this validator's limit of %d bytes (--compiled-crd-memory-limit): %w",
			e.crd.Name, e.charged+n, c.limit, errOverBudget))
	}
	e.charged += n
	if e.elem == nil {
		// evicted or never cached: compiled for the request at hand only
		return nil
	}
	c.used += n
	compiledBytes.Add(float64(n))
	for c.used > c.limit {
		last := c.lru.Back()
		if last == nil || last == e.elem {
			break
		}
		c.removeLocked(last.Value.(*crdEntry))
		c.evictions++
		compiledEvictions.Inc()
	}
	return nil
}

// removeLocked drops e from the cache (those holding its compiled
// versions keep them until they are done).
func (c *compiledCache) removeLocked(e *crdEntry) {
	if e.elem == nil {
		return
	}
	c.lru.Remove(e.elem)
	e.elem = nil
	delete(c.entries, e.key)
	c.used -= e.charged
	compiledBytes.Sub(float64(e.charged))
}

// onChange evicts the entries that old's change supersedes.
func (c *compiledCache) onChange(old, new *CRD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if new != nil {
		if g, ok := c.latest[new.UID]; !ok || g < new.Generation {
			c.latest[new.UID] = new.Generation
		}
	}
	if old == nil {
		return
	}
	if new == nil || new.UID != old.UID {
		c.latest[old.UID] = -1
	}
	for k, e := range c.entries {
		if k.uid != old.UID {
			continue
		}
		if new == nil || new.UID != old.UID || k.generation < new.Generation {
			c.removeLocked(e)
		}
	}
}

// len is the number of cached compiled versions (tests).
func (c *compiledCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.entries {
		n += len(e.versions)
	}
	return n
}

// stats are the bytes charged and the evictions so far (tests).
func (c *compiledCache) stats() (used, evictions int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.evictions
}
