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
	for _, v := range crd.Spec.Versions {
		var err error
		c := retained(n, func() any {
			cv, e := compileVersion(crd, v.Name)
			if e != nil {
				err = e
			}
			return cv
		})
		if err != nil {
			t.Fatalf("%s %s: %v", crd.Name, v.Name, err)
		}
		cvs := make([]*compiledVersion, n)
		for i := range cvs {
			cvs[i], _ = compileVersion(crd, v.Name)
		}
		i := 0
		f := retained(n, func() any {
			_, e := cvs[i].managers()
			if e != nil {
				err = e
			}
			i++
			return nil
		})
		if err != nil {
			t.Fatalf("%s %s managers: %v", crd.Name, v.Name, err)
		}
		runtime.KeepAlive(cvs)
		p.compiled += c
		p.fm += f
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


// TestMeasureSynthetic prints the heap kept per schema element.
func TestMeasureSynthetic(t *testing.T) {
	if os.Getenv("CRDPLANE_MEASURE_CRDS") == "" {
		t.Skip("set CRDPLANE_MEASURE_CRDS")
	}
	base := measureCRD(t, genCRD(t, crdgen.Shape{}), 10)
	t.Logf("empty: json=%d compiled=%d fm=%d", base.json, base.compiled, base.fm)
	for _, tc := range []struct {
		name string
		n    int
		s    crdgen.Shape
	}{
		{"strings", 1000, crdgen.Shape{Strings: 1000}},
		{"strings", 10000, crdgen.Shape{Strings: 10000}},
		{"objects(1 field)", 1000, crdgen.Shape{Objects: 1000, Fields: 1}},
		{"objects(10 fields)", 100, crdgen.Shape{Objects: 100, Fields: 10}},
		{"rules", 100, crdgen.Shape{Rules: 100}},
		{"rules", 1000, crdgen.Shape{Rules: 1000}},
		{"listmaps", 1000, crdgen.Shape{ListMaps: 1000}},
		{"patterns", 1000, crdgen.Shape{Patterns: 1000}},
		{"descriptions(100B)", 1000, crdgen.Shape{Strings: 1000, Description: 100}},
		{"versions x strings1000", 10, crdgen.Shape{Versions: 10, Strings: 1000}},
		{"versions x strings1000 distinct", 10, crdgen.Shape{Versions: 10, Strings: 1000, Distinct: true}},
	} {
		p := measureCRD(t, genCRD(t, tc.s), 2)
		t.Logf("%-32s n=%5d json=%8d compiled=%10d (%6.1fx, %6d/unit) fm=%10d (%6.1fx, %6d/unit)", tc.name, tc.n, p.json,
			p.compiled, float64(p.compiled)/float64(p.json), (int(p.compiled)-int(base.compiled))/tc.n,
			p.fm, float64(p.fm)/float64(p.json), (int(p.fm)-int(base.fm))/tc.n)
		t.Logf("%-32s decoded=%10d (%6.1fx, %6d/unit)", "", p.decoded, float64(p.decoded)/float64(p.json), (int(p.decoded)-int(base.decoded))/tc.n)
		t.Log(p.String(fmt.Sprintf("%s %d", tc.name, tc.n)))
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
