package validator

import (
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/crdplane/crdplane/pkg/budgetcache"
	"github.com/crdplane/crdplane/pkg/crdlimits"
)

// compiledCache keeps compiled CRD versions, per CRD uid and generation,
// within a memory budget (pkg/budgetcache): each compiled version and each
// CRD's type converter is charged its estimate
// (crdlimits.EstimateCompiledSize) before it is built; when a charge takes
// the cache over its limit, the least recently used CRDs are evicted (they
// compile again on their next request). A CRD whose versions alone do not
// fit is refused with a 500 rather than compiled. Entries of superseded
// generations and deleted CRDs are evicted as the source reports changes.
// Metrics: crdplane_validator_compiled_crd_* and
// crdplane_validator_schema_cache_requests_total.
type compiledCache struct {
	*budgetcache.Cache[*compiledVersion]
}

// crdEntry is one CRD generation: its compiled versions and its type
// converter, built on demand.
type crdEntry = budgetcache.Entry[*compiledVersion]

func newCompiledCache(limit int64) *compiledCache {
	return &compiledCache{budgetcache.New[*compiledVersion](budgetcache.Config{
		Service: "validator", Limit: limit, Estimate: crdlimits.EstimateCompiledSize})}
}

// get returns crd's version compiled, compiling it once per generation
// while it stays cached.
func (c *compiledCache) get(crd *CRD, version string) (*compiledVersion, error) {
	if _, err := findVersion(crd, version); err != nil {
		return nil, err
	}
	return c.Version(crd, version, func(e *crdEntry) (*compiledVersion, error) {
		cv, err := compileVersion(crd, version)
		if cv != nil {
			cv.owner = e
		}
		return cv, err
	})
}

// entryTypeConverter returns the CRD generation's server-side apply type
// converter (built from all its versions), building it once, after
// charging it.
func entryTypeConverter(e *crdEntry) (managedfields.TypeConverter, error) {
	v, err := e.Shared(func() (any, error) {
		tc, err := typeConverter(e.CRD)
		return tc, err
	})
	tc, _ := v.(managedfields.TypeConverter)
	return tc, err
}

// onChange evicts the entries that old's change supersedes.
func (c *compiledCache) onChange(old, new *CRD) { c.OnChange(old, new) }

// len is the number of cached compiled versions (tests).
func (c *compiledCache) len() int { return c.Stats().Versions }

// stats are the bytes charged and the evictions so far (tests).
func (c *compiledCache) stats() (used, evictions int64) {
	s := c.Stats()
	return s.Used, s.Evictions
}
