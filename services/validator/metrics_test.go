package validator

import (
	"testing"

	"github.com/crdplane/crdplane/pkg/metrics"
)

// metricValue is the value of the counter or gauge name with the label
// result=label (when label is not empty) in the process's registry.
func metricValue(t *testing.T, name, label string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestSchemaCacheMetrics(t *testing.T) {
	crd := loadCRD(t, "testdata/crds/crontab-cel.yaml")
	crd.UID = "metrics-test-uid"
	crd.Generation = 1
	const requests = "crdplane_validator_schema_cache_requests_total"
	h0, m0 := metricValue(t, requests, "hit"), metricValue(t, requests, "miss")
	c := newCompiledCache(DefaultCompiledMemoryLimit())
	for range 3 {
		if _, err := c.get(crd, crd.Spec.Versions[0].Name); err != nil {
			t.Fatal(err)
		}
	}
	if got := metricValue(t, requests, "miss") - m0; got != 1 {
		t.Errorf("misses +%v, want +1", got)
	}
	if got := metricValue(t, requests, "hit") - h0; got != 2 {
		t.Errorf("hits +%v, want +2", got)
	}
	if got := metricValue(t, "crdplane_validator_compiled_crd_limit_bytes", ""); got != float64(DefaultCompiledMemoryLimit()) {
		t.Errorf("limit metric %v", got)
	}
}
