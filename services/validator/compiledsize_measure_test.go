package validator

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
)

// retained returns the heap that the values build returns keep (after a
// full collection), divided by n (build is called n times).
func retained(n int, build func() any) uint64 {
	keep := make([]any, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		keep = append(keep, build())
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}

// compiledParts measures, for every version of crd, the heap kept by the
// structural schema + CEL programs (compileVersion) and, separately, by
// the field managers (SSA type converter) built on first apply.
type compiledParts struct {
	json             int
	versions         int
	compiled, fm     uint64 // all versions
	decoded          uint64 // the CRD decoded (held by the CRD cache)
	estimate         crdlimits.CompiledSize
	perVersionLimits []uint64
}

func measureCRD(t testing.TB, crd *CRD, n int) compiledParts {
	t.Helper()
	raw, _ := json.Marshal(crd)
	p := compiledParts{json: len(raw), versions: len(crd.Spec.Versions), estimate: crdlimits.EstimateCompiledSize(crd)}
	p.decoded = retained(n, func() any {
		c := &CRD{}
		if err := json.Unmarshal(raw, c); err != nil {
			t.Fatal(err)
		}
		return c
	})
	p.compiled = retained(n, func() any {
		var out []*compiledVersion
		for _, v := range crd.Spec.Versions {
			cv, err := compileVersion(crd, v.Name)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, cv)
		}
		return out
	})
	// everything the cache holds once every version served an apply: the
	// compiled versions, their field managers and the CRD's type converter
	all := retained(n, func() any {
		c := newCompiledCache(1 << 40)
		for _, v := range crd.Spec.Versions {
			cv, err := c.get(crd, v.Name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cv.managed(); err != nil {
				t.Fatal(err)
			}
		}
		return c
	})
	if all > p.compiled {
		p.fm = all - p.compiled
	}
	return p
}

// TestMeasureCompiledSize prints what compiled CRDs keep, for the CRDs in
// $CRDPLANE_MEASURE_CRDS (a directory of manifests) and synthetic ones.
func TestMeasureCompiledSize(t *testing.T) {
	dir := os.Getenv("CRDPLANE_MEASURE_CRDS")
	if dir == "" {
		t.Skip("set CRDPLANE_MEASURE_CRDS to a directory of CRD manifests")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	sort.Strings(files)
	var lines []string
	for _, f := range files {
		crds, err := readCRDs(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, crd := range crds {
			p := measureCRD(t, crd, 1)
			lines = append(lines, p.String(crd.Name))
		}
	}
	t.Log("\n" + strings.Join(lines, "\n"))
}

// BenchmarkCompiledSize compiles synthetic CRDs of growing size through
// the validator's compile path (every version, CEL programs, field
// managers and type converter, as after an apply to each version) and
// reports the heap they keep with the decoded CRD (held-B), against their
// JSON (json-B) and the registry's estimate (estimate-B):
//
//	go test -run '^$' -bench CompiledSize -benchtime 1x -count 5 ./services/validator
func BenchmarkCompiledSize(b *testing.B) {
	for _, tc := range crdgen.Measured {
		b.Run(tc.Name, func(b *testing.B) {
			crd := genCRD(b, tc.Shape)
			var p compiledParts
			for b.Loop() {
				p = measureCRD(b, crd, 1)
			}
			b.ReportMetric(float64(p.json), "json-B")
			b.ReportMetric(float64(p.measured()), "held-B")
			b.ReportMetric(float64(p.estimate.Total()), "estimate-B")
			b.ReportMetric(float64(p.measured())/float64(p.json), "held/json")
			b.ReportMetric(float64(p.measured())/float64(p.estimate.Total()), "held/estimate")
		})
	}
}

func (p compiledParts) measured() uint64 { return p.decoded + p.compiled + p.fm }

func (p compiledParts) String(name string) string {
	var ev int64
	for _, v := range p.estimate.Versions {
		ev += v
	}
	return fmt.Sprintf("%-45s json=%8d v=%d decoded=%9d/%9d compiled+fm=%9d/%9d total=%9d/%9d (%.2f) %.0fx json",
		name, p.json, p.versions, p.decoded, p.estimate.Decoded, p.compiled+p.fm, ev+p.estimate.TypeConverter,
		p.measured(), p.estimate.Total(), float64(p.estimate.Total())/float64(p.measured()), float64(p.measured())/float64(p.json))
}
