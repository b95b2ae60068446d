package validator

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// mapSource serves a fixed set of CRDs by name.
type mapSource struct {
	mu     sync.Mutex
	byName map[string]*CRD
}

func (s *mapSource) Get(_ context.Context, ref *commonv1.CRDRef) (*CRD, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	crd, ok := s.byName[ref.GetName()]
	if !ok {
		return nil, apierrors.NewNotFound(crdResource, ref.GetName())
	}
	return crd, nil
}
func (s *mapSource) OnChange(func(old, new *CRD)) {}
func (s *mapSource) Ready() error                 { return nil }

func genCRD(t testing.TB, s crdgen.Shape) *CRD {
	t.Helper()
	crd := &CRD{}
	if err := json.Unmarshal(s.JSON(), crd); err != nil {
		t.Fatal(err)
	}
	crd.UID, crd.Generation = types.UID("gen-"+crd.Name), 1
	crd.Status.AcceptedNames = crd.Spec.Names
	return crd
}

// The compiled-schema cache stays within its budget under many CRDs: it
// evicts the least recently used, recompiles them on demand, and answers
// stay right (a CEL rule of each CRD passes and fails as it should).
func TestCompiledCacheBudget(t *testing.T) {
	const crds = 12
	src := &mapSource{byName: map[string]*CRD{}}
	var perCRD int64
	for i := range crds {
		crd := genCRD(t, crdgen.Shape{Name: fmt.Sprintf("gen%ds", i), Strings: 200, Rules: 20})
		src.byName[crd.Name] = crd
		perCRD = crdlimits.EstimateCompiledSize(crd).Versions[0]
	}
	limit := 3*perCRD + perCRD/2 // room for three CRDs
	svc, err := New(context.Background(), Config{Source: src, CompiledMemoryLimit: limit, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, svc)
	admit := func(i int, value string) *validatorv1.AdmitResponse {
		obj := fmt.Sprintf(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"x","namespace":"default"},"spec":{"r3":%q,"s1":"a"}}`, value)
		resp, err := client.Admit(context.Background(), &validatorv1.AdmitRequest{
			Crd: &commonv1.CRDRef{Name: fmt.Sprintf("gen%ds.gen.example.com", i)}, Version: "v1",
			Operation: validatorv1.Operation_OPERATION_CREATE, Object: []byte(obj)})
		if err != nil {
			t.Fatalf("gen%d: %v", i, err)
		}
		return resp
	}
	for round := range 3 {
		for i := range crds {
			if resp := admit(i, "r3-ok"); len(resp.GetCauses()) != 0 {
				t.Errorf("round %d, gen%d: valid object refused: %v", round, i, resp.GetCauses())
			}
			resp := admit(i, "nope")
			if c := resp.GetCauses(); len(c) != 1 || c[0].GetField() != "spec.r3" || c[0].GetMessage() != `Invalid value: "string": must start with r3` {
				t.Errorf("round %d, gen%d: %v", round, i, c)
			}
			if used, _ := svc.compiled.stats(); used > limit {
				t.Fatalf("round %d, gen%d: %d bytes charged, over the limit of %d", round, i, used, limit)
			}
		}
	}
	used, evictions := svc.compiled.stats()
	t.Logf("%d CRDs of %d bytes (estimate), limit %d: %d bytes charged, %d evictions, %d versions cached", crds, perCRD, limit, used, evictions, svc.compiled.len())
	if evictions < 3*crds-3 || svc.compiled.len() != 3 || used != 3*perCRD {
		t.Errorf("%d evictions, %d cached, %d charged; want >= %d, 3, %d", evictions, svc.compiled.len(), used, 3*crds-3, 3*perCRD)
	}
	// a hit keeps a CRD: the most recent three stay compiled
	c := svc.compiled
	before := c.len()
	for i := crds - 3; i < crds; i++ {
		admit(i, "r3-ok")
	}
	if _, ev := c.stats(); ev != evictions || c.len() != before {
		t.Errorf("hits evicted: %d → %d evictions", evictions, ev)
	}
}

// The type converter of a CRD is built once for all its versions and
// charged to the budget.
func TestCompiledCacheTypeConverterShared(t *testing.T) {
	crd := genCRD(t, crdgen.Shape{Versions: 3, Strings: 50})
	c := newCompiledCache(1 << 30)
	var tcs []any
	for _, v := range []string{"v1", "v2", "v3"} {
		cv, err := c.get(crd, v)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := cv.managed()
		if err != nil {
			t.Fatal(err)
		}
		if fm := ms.local; fm == nil || fm.main == nil || fm.status == nil {
			t.Fatalf("%s: managers %+v", v, fm)
		}
		tcs = append(tcs, ms.tc)
	}
	if tcs[0] != tcs[1] || tcs[1] != tcs[2] {
		t.Errorf("versions of one generation have different type converters")
	}
	size := crdlimits.EstimateCompiledSize(crd)
	want := size.Versions[0] + size.Versions[1] + size.Versions[2] + size.TypeConverter
	if used, _ := c.stats(); used != want {
		t.Errorf("charged %d, want %d", used, want)
	}
}

// A CRD that alone exceeds the budget is refused with a 500 naming the
// limit, instead of being compiled; others still compile.
func TestCompiledCacheRefusesCRDOverBudget(t *testing.T) {
	big := genCRD(t, crdgen.Shape{Name: "bigs", Strings: 2000})
	small := genCRD(t, crdgen.Shape{Name: "smalls", Strings: 10})
	limit := crdlimits.EstimateCompiledSize(big).Versions[0] - 1
	svc, err := New(context.Background(), Config{Source: &mapSource{byName: map[string]*CRD{big.Name: big, small.Name: small}},
		CompiledMemoryLimit: limit, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, svc)
	obj := []byte(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"x","namespace":"default"},"spec":{}}`)
	_, err = client.Admit(context.Background(), &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: big.Name}, Version: "v1",
		Operation: validatorv1.Operation_OPERATION_CREATE, Object: obj})
	st := kstatus.FromError(err)
	want := fmt.Sprintf("Internal error occurred: CustomResourceDefinition bigs.gen.example.com needs an estimated %d bytes once compiled, more than this validator's limit of %d bytes (--compiled-crd-memory-limit): over the compiled-CRD memory budget",
		limit+1, limit)
	if st.Code != 500 || st.Reason != "InternalError" || st.Message != want {
		t.Errorf("got %d %s %q\nwant 500 %q", st.Code, st.Reason, st.Message, want)
	}
	if used, _ := svc.compiled.stats(); used != 0 || svc.compiled.len() != 0 {
		t.Errorf("refused CRD accounted: %d bytes, %d cached", used, svc.compiled.len())
	}
	if _, err := client.Admit(context.Background(), &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: small.Name}, Version: "v1",
		Operation: validatorv1.Operation_OPERATION_CREATE, Object: obj}); err != nil {
		t.Errorf("small CRD: %v", err)
	}
}

// heapRetained is the heap that build's result keeps after collections,
// and the peak of live heap objects while it ran (sampled every
// millisecond, with the garbage collector's default pacing), both above
// the heap before.
func heapRetained(build func() any) (held, peak uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	runtime.GC()
	before := read()
	done := make(chan struct{})
	var top uint64
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			top = max(top, read())
			select {
			case <-done:
				close(done)
				return
			case <-tick.C:
			}
		}
	}()
	keep := build()
	done <- struct{}{}
	<-done
	runtime.GC()
	runtime.GC()
	after := read()
	runtime.KeepAlive(keep)
	top = max(top, after)
	if after < before {
		return 0, top - before
	}
	return after - before, top - before
}

// atLimit returns shape with the most strings whose estimate stays within
// crdlimits.MaxCompiledBytes (the estimate is about linear in strings).
func atLimit(t testing.TB, s crdgen.Shape) crdgen.Shape {
	t.Helper()
	est := func(n int) int64 {
		s.Strings = n
		return crdlimits.EstimateCompiledSize(genCRD(t, s)).Total()
	}
	a, b := est(10000), est(11000)
	n := 10000 + int((crdlimits.MaxCompiledBytes-a)*1000/(b-a))
	for est(n) > crdlimits.MaxCompiledBytes {
		n--
	}
	for est(n+1) <= crdlimits.MaxCompiledBytes {
		n++
	}
	s.Strings = n
	return s
}

// A CRD of the largest size the registry accepts, decoded and compiled in
// full (every version, CEL programs, type converter and field managers),
// keeps less heap than crdlimits.MaxCompiledBytes (64 MiB): the estimate
// bounds what a service really holds for it. Measured: 41–46 MiB held
// (0.63–0.72 of the estimate), a peak of 105–160 MB of heap objects.
func TestCompiledMemoryOfLargestCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles CRDs of 64 MiB")
	}
	for _, tc := range []struct {
		name  string
		shape crdgen.Shape
	}{
		{"strings", crdgen.Shape{}},
		{"rules", crdgen.Shape{Rules: 2000}},
		{"versions", crdgen.Shape{Versions: 4, Distinct: true}},
		{"objects and list maps", crdgen.Shape{Objects: 500, Fields: 10, ListMaps: 500, Patterns: 500}},
	} {
		s := atLimit(t, tc.shape)
		raw := s.JSON()
		var crd *CRD
		held, peak := heapRetained(func() any {
			crd = &CRD{}
			if err := json.Unmarshal(raw, crd); err != nil {
				t.Fatal(err)
			}
			crd.UID, crd.Generation = types.UID("gen-"+crd.Name), 1
			crd.Status.AcceptedNames = crd.Spec.Names
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
			return []any{crd, c}
		})
		est := crdlimits.EstimateCompiledSize(crd).Total()
		t.Logf("%s: %d bytes of JSON, estimate %d, held %d (%.2f of the estimate, %.0fx the JSON), peak %d", tc.name, len(raw), est, held,
			float64(held)/float64(est), float64(held)/float64(len(raw)), peak)
		if held > crdlimits.MaxCompiledBytes {
			t.Errorf("%s: %d bytes held, over %d", tc.name, held, crdlimits.MaxCompiledBytes)
		}
		// the peak, garbage not yet collected included (the default
		// GOGC lets the heap reach twice the live heap; a GOMEMLIMIT
		// collects sooner), stays within four times the bound: it is the
		// process's heap, so what other tests' servers still running
		// allocate meanwhile counts too (measured alone 105–160 MB;
		// 186–214 MB with -count=3 on a loaded machine)
		if peak > 4*crdlimits.MaxCompiledBytes {
			t.Errorf("%s: peak %d bytes, over %d", tc.name, peak, 4*crdlimits.MaxCompiledBytes)
		}
	}
}

// The flag sets the budget (its parsing: pkg/budgetcache).
func TestCompiledMemoryLimitFlag(t *testing.T) {
	var cfg Config
	fs := flag.NewFlagSet("validator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--compiled-crd-memory-limit=256Mi"}); err != nil || cfg.CompiledMemoryLimit != 256<<20 {
		t.Errorf("%d, %v", cfg.CompiledMemoryLimit, err)
	}
	if d := DefaultCompiledMemoryLimit(); d < 2*crdlimits.MaxCompiledBytes {
		t.Errorf("default %d", d)
	}
}
