// Package budgetcache keeps what a service compiles from CRDs (structural
// schemas, CEL programs, type converters), per CRD uid and generation,
// within a memory budget, so that no CRD can take the service past its
// memory limit. Each compiled part is charged its estimate (pkg/crdlimits)
// before it is built; when a charge takes the cache over its limit, the
// least recently used CRD generations are evicted (they compile again on
// their next request). A CRD generation whose parts alone do not fit is
// refused with a Kubernetes 500 rather than compiled. Entries of
// superseded generations and deleted CRDs are evicted as the CRD source
// reports changes (Cache.OnChange).
//
// The validator and the gateway each keep one (services/validator,
// services/gateway/cr), with the flag --compiled-crd-memory-limit
// (QuantityFlag, DefaultLimit) and the metrics
// crdplane_<service>_compiled_crd_{bytes,limit_bytes,evictions_total,refused_total}
// and crdplane_<service>_schema_cache_requests_total{result}.
package budgetcache

import (
	"container/list"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// CRD is the CustomResourceDefinition compiled (read only).
type CRD = apiextensionsv1.CustomResourceDefinition

// errOverBudget ends the message of a refused compilation.
var errOverBudget = errors.New("over the compiled-CRD memory budget")

// Config configures a Cache.
type Config struct {
	// Service names the service in the metrics (crdplane_<Service>_...)
	// and in the refusal's message ("this <Service>'s limit").
	Service string
	// Limit is the budget in (estimated) bytes; <= 0: DefaultLimit().
	Limit int64
	// Estimate is the size of what the service compiles of a CRD:
	// Versions (in spec.versions order) are charged as each version is
	// compiled (Cache.Version), TypeConverter by Entry.Shared.
	Estimate func(*CRD) crdlimits.CompiledSize
}

// DefaultLimit is the budget when none is configured: half of GOMEMLIMIT
// when it is set (the rest is for requests, the CRD cache and the
// runtime), else 512 MiB; never less than two CRDs of the largest size
// the registry accepts (crdlimits.MaxCompiledBytes, so 128 MiB).
func DefaultLimit() int64 {
	limit := int64(512 << 20)
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		limit = l / 2
	}
	return max(limit, 2*crdlimits.MaxCompiledBytes)
}

// QuantityFlag is a flag.Value of a byte count given as a Kubernetes
// quantity (512Mi, 1G) into *V.
type QuantityFlag struct{ V *int64 }

func (q QuantityFlag) String() string {
	if q.V == nil {
		return ""
	}
	return resource.NewQuantity(*q.V, resource.BinarySI).String()
}

// Set parses s.
func (q QuantityFlag) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return err
	}
	n, ok := v.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("%s: not a byte count", s)
	}
	*q.V = n
	return nil
}

// FlagName is the flag of the budget in every service.
const FlagName = "compiled-crd-memory-limit"

// Cache keeps values of type V (compiled CRD versions) per CRD uid,
// generation and version within a memory budget. Its zero value is not
// usable; call New.
type Cache[V any] struct {
	service  string
	limit    int64
	estimate func(*CRD) crdlimits.CompiledSize
	m        *cacheMetrics

	mu        sync.Mutex
	entries   map[key]*Entry[V]
	lru       list.List           // of *Entry[V], most recently used first
	latest    map[types.UID]int64 // newest generation seen per CRD; -1: deleted
	used      int64               // bytes charged by the entries in the cache
	evictions int64
}

type key struct {
	uid        types.UID
	generation int64
}

// Entry is one CRD generation: its compiled versions and a part shared by
// them (Shared), built on demand.
type Entry[V any] struct {
	// CRD is the CRD generation compiled.
	CRD   *CRD
	cache *Cache[V]
	key   key
	size  crdlimits.CompiledSize

	// guarded by cache.mu
	versions map[string]*once[V]
	charged  int64
	elem     *list.Element // nil once evicted (or when never cached)

	shared once[any]
}

type once[T any] struct {
	once sync.Once
	v    T
	err  error
}

type cacheMetrics struct {
	requests                         *prometheus.CounterVec
	bytes, limit                     prometheus.Gauge
	evictions, refused, hits, misses prometheus.Counter
}

func newMetrics(service string) *cacheMetrics {
	m := &cacheMetrics{
		requests: metrics.NewCounterVec(service, "schema_cache_requests_total",
			"Compiled-schema cache lookups (CRD uid + generation + version), by result: hit or miss.", "result"),
		bytes: metrics.NewGauge(service, "compiled_crd_bytes",
			"Estimated bytes of the compiled CRDs in the compiled-schema cache (pkg/crdlimits estimates)."),
		limit: metrics.NewGauge(service, "compiled_crd_limit_bytes",
			"The compiled-schema cache's memory budget (--compiled-crd-memory-limit)."),
		evictions: metrics.NewCounter(service, "compiled_crd_evictions_total",
			"CRD generations evicted from the compiled-schema cache to stay within its memory budget."),
		refused: metrics.NewCounter(service, "compiled_crd_refused_total",
			"Compilations refused because the CRD alone exceeds the compiled-schema cache's memory budget."),
	}
	m.hits, m.misses = m.requests.WithLabelValues("hit"), m.requests.WithLabelValues("miss")
	return m
}

// New returns an empty cache.
func New[V any](cfg Config) *Cache[V] {
	if cfg.Limit <= 0 {
		cfg.Limit = DefaultLimit()
	}
	c := &Cache[V]{
		service:  cfg.Service,
		limit:    cfg.Limit,
		estimate: cfg.Estimate,
		m:        newMetrics(cfg.Service),
		entries:  map[key]*Entry[V]{},
		latest:   map[types.UID]int64{},
	}
	c.m.limit.Set(float64(cfg.Limit))
	return c
}

// Limit is the budget in bytes.
func (c *Cache[V]) Limit() int64 { return c.limit }

// Version returns crd's version compiled by compile, compiling it once per
// CRD generation while the generation stays cached: its estimate is
// charged first (a refusal is the answer instead). version must be one of
// crd's (the caller checks: an unknown version would be charged nothing).
func (c *Cache[V]) Version(crd *CRD, version string, compile func(e *Entry[V]) (V, error)) (V, error) {
	k := key{crd.UID, crd.Generation}
	c.mu.Lock()
	e, ok := c.entries[k]
	if !ok {
		e = &Entry[V]{CRD: crd, cache: c, key: k, size: c.estimate(crd), versions: map[string]*once[V]{}}
		// Do not keep what is already superseded (a change raced with
		// this request); it is still compiled for this request.
		if latest, seen := c.latest[crd.UID]; !seen || (latest >= 0 && latest <= crd.Generation) {
			c.entries[k] = e
			e.elem = c.lru.PushFront(e)
		}
	} else {
		c.lru.MoveToFront(e.elem)
	}
	ve, ok := e.versions[version]
	if ok {
		c.m.hits.Inc()
	} else {
		c.m.misses.Inc()
		ve = &once[V]{}
		e.versions[version] = ve
	}
	c.mu.Unlock()
	ve.once.Do(func() {
		if ve.err = e.Charge(e.versionSize(version)); ve.err != nil {
			return
		}
		ve.v, ve.err = compile(e)
	})
	return ve.v, ve.err
}

func (e *Entry[V]) versionSize(version string) int64 {
	for i, v := range e.CRD.Spec.Versions {
		if v.Name == version && i < len(e.size.Versions) {
			return e.size.Versions[i]
		}
	}
	return 0
}

// Shared returns the entry's part shared by its versions (the validator's
// type converter), building it once after charging the estimate's
// TypeConverter.
func (e *Entry[V]) Shared(build func() (any, error)) (any, error) {
	e.shared.once.Do(func() {
		if e.shared.err = e.Charge(e.size.TypeConverter); e.shared.err != nil {
			return
		}
		e.shared.v, e.shared.err = build()
	})
	return e.shared.v, e.shared.err
}

// Charge accounts n more bytes to e, evicting the least recently used
// other entries while the cache is over its limit. When e alone would not
// fit, it is evicted too and the answer is a 500: compiling it could take
// the service past its memory limit.
func (e *Entry[V]) Charge(n int64) error {
	c := e.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.charged+n > c.limit {
		c.m.refused.Inc()
		c.removeLocked(e)
		return apierrors.NewInternalError(fmt.Errorf(
			"CustomResourceDefinition %s needs an estimated %d bytes once compiled, more than this %s's limit of %d bytes (--%s): %w",
			e.CRD.Name, e.charged+n, c.service, c.limit, FlagName, errOverBudget))
	}
	e.charged += n
	if e.elem == nil {
		// evicted or never cached: compiled for the request at hand only
		return nil
	}
	c.used += n
	c.m.bytes.Add(float64(n))
	for c.used > c.limit {
		last := c.lru.Back()
		if last == nil || last == e.elem {
			break
		}
		c.removeLocked(last.Value.(*Entry[V]))
		c.evictions++
		c.m.evictions.Inc()
	}
	return nil
}

// removeLocked drops e from the cache (those holding its compiled
// versions keep them until they are done).
func (c *Cache[V]) removeLocked(e *Entry[V]) {
	if e.elem == nil {
		return
	}
	c.lru.Remove(e.elem)
	e.elem = nil
	delete(c.entries, e.key)
	c.used -= e.charged
	c.m.bytes.Sub(float64(e.charged))
}

// OnChange evicts the entries that a CRD change supersedes (old is nil on
// add, new is nil on delete): register it with the CRD source.
func (c *Cache[V]) OnChange(old, new *CRD) {
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

// Stats are a snapshot of a cache.
type Stats struct {
	// Used is the bytes charged by the cached entries.
	Used int64
	// Evictions counts the entries evicted to stay within the limit.
	Evictions int64
	// CRDs and Versions count the cached CRD generations and versions.
	CRDs, Versions int
}

// Stats returns the cache's figures now.
func (c *Cache[V]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Used: c.used, Evictions: c.evictions, CRDs: len(c.entries)}
	for _, e := range c.entries {
		s.Versions += len(e.versions)
	}
	return s
}
