package validator

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSchemaCacheMetrics(t *testing.T) {
	crd := loadCRD(t, "testdata/crds/crontab-cel.yaml")
	crd.UID = "metrics-test-uid"
	crd.Generation = 1
	hits, misses := schemaCacheRequests.WithLabelValues("hit"), schemaCacheRequests.WithLabelValues("miss")
	h0, m0 := testutil.ToFloat64(hits), testutil.ToFloat64(misses)
	c := newCompiledCache(DefaultCompiledMemoryLimit())
	for range 3 {
		if _, err := c.get(crd, crd.Spec.Versions[0].Name); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(misses) - m0; got != 1 {
		t.Errorf("misses +%v, want +1", got)
	}
	if got := testutil.ToFloat64(hits) - h0; got != 2 {
		t.Errorf("hits +%v, want +2", got)
	}
}
