package budgetcache

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
)

func genCRD(t testing.TB, s crdgen.Shape, gen int64) *CRD {
	t.Helper()
	crd := &CRD{}
	if err := json.Unmarshal(s.JSON(), crd); err != nil {
		t.Fatal(err)
	}
	crd.UID, crd.Generation = types.UID("uid-"+crd.Name), gen
	return crd
}

// compiled is a stand-in for a compiled version: which CRD generation and
// version it was compiled from.
type compiled struct {
	crd     string
	gen     int64
	version string
}

func compileOf(n *int, crd *CRD, version string) func(*Entry[*compiled]) (*compiled, error) {
	return func(e *Entry[*compiled]) (*compiled, error) {
		*n++
		return &compiled{e.CRD.Name, e.CRD.Generation, version}, nil
	}
}

// Under a budget of three CRDs, twelve used in turn are evicted least
// recently used first and compiled again; the charge never exceeds the
// limit and hits keep an entry.
func TestCacheLRU(t *testing.T) {
	const n = 12
	var crds []*CRD
	for i := range n {
		crds = append(crds, genCRD(t, crdgen.Shape{Name: fmt.Sprintf("gen%ds", i), Strings: 100}, 1))
	}
	per := crdlimits.EstimateStructuralSize(crds[0]).Versions[0]
	limit := 3*per + per/2
	c := New[*compiled](Config{Service: "budgettest", Limit: limit, Estimate: crdlimits.EstimateStructuralSize})
	evicted := testutil.ToFloat64(c.m.evictions)
	compiles := 0
	for round := range 3 {
		for _, crd := range crds {
			v, err := c.Version(crd, "v1", compileOf(&compiles, crd, "v1"))
			if err != nil || v.crd != crd.Name || v.version != "v1" {
				t.Fatalf("round %d, %s: %+v, %v", round, crd.Name, v, err)
			}
			if s := c.Stats(); s.Used > limit {
				t.Fatalf("round %d, %s: %d charged, over %d", round, crd.Name, s.Used, limit)
			}
		}
	}
	s := c.Stats()
	if compiles != 3*n || s.Evictions != 3*n-3 || s.CRDs != 3 || s.Versions != 3 || s.Used != 3*per {
		t.Errorf("%d compilations, %+v; want %d, %d evictions, 3 cached, %d bytes", compiles, s, 3*n, 3*n-3, 3*per)
	}
	if got := testutil.ToFloat64(c.m.evictions) - evicted; got != float64(3*n-3) {
		t.Errorf("evictions metric +%v", got)
	}
	// hits on the three most recent: nothing compiled, nothing evicted;
	// then the oldest of them is the one a new CRD evicts
	for _, crd := range crds[n-3:] {
		if _, err := c.Version(crd, "v1", compileOf(&compiles, crd, "v1")); err != nil {
			t.Fatal(err)
		}
	}
	if compiles != 3*n || c.Stats().Evictions != s.Evictions {
		t.Errorf("hits compiled or evicted: %d, %+v", compiles, c.Stats())
	}
	if _, err := c.Version(crds[n-1], "v1", compileOf(&compiles, crds[n-1], "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(crds[0], "v1", compileOf(&compiles, crds[0], "v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Version(crds[n-2], "v1", compileOf(&compiles, crds[n-2], "v1")); err != nil {
		t.Fatal(err)
	}
	if compiles != 3*n+1 {
		t.Errorf("recently used CRD evicted before the least recently used: %d compilations", compiles)
	}
}

// A CRD whose versions alone exceed the budget is refused with a 500
// when the charge of a version takes it over, and is not kept.
func TestCacheRefusesOverBudget(t *testing.T) {
	crd := genCRD(t, crdgen.Shape{Strings: 100, Versions: 2}, 1)
	per := crdlimits.EstimateStructuralSize(crd).Versions[0]
	c := New[*compiled](Config{Service: "budgettest", Limit: 2*per - 1, Estimate: crdlimits.EstimateStructuralSize})
	refused := testutil.ToFloat64(c.m.refused)
	compiles := 0
	if _, err := c.Version(crd, "v1", compileOf(&compiles, crd, "v1")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Version(crd, "v2", compileOf(&compiles, crd, "v2"))
	want := fmt.Sprintf("Internal error occurred: CustomResourceDefinition gens.gen.example.com needs an estimated %d bytes once compiled, more than this budgettest's limit of %d bytes (--compiled-crd-memory-limit): over the compiled-CRD memory budget", 2*per, 2*per-1)
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != 500 || st.Status().Message != want {
		t.Fatalf("got %v\nwant 500 %q", err, want)
	}
	if s := c.Stats(); s.Used != 0 || s.CRDs != 0 || compiles != 1 {
		t.Errorf("refused CRD kept: %+v, %d compilations", s, compiles)
	}
	if got := testutil.ToFloat64(c.m.refused) - refused; got != 1 {
		t.Errorf("refused metric +%v", got)
	}
	// the shared part is charged too
	c = New[*compiled](Config{Service: "budgettest", Limit: per, Estimate: func(crd *CRD) crdlimits.CompiledSize {
		s := crdlimits.EstimateStructuralSize(crd)
		s.TypeConverter = 1
		return s
	}})
	if _, err := c.Version(crd, "v1", func(e *Entry[*compiled]) (*compiled, error) {
		_, err := e.Shared(func() (any, error) { return "tc", nil })
		return nil, err
	}); !apierrors.IsInternalError(err) || !strings.HasSuffix(err.Error(), errOverBudget.Error()) {
		t.Errorf("shared part over the budget: %v", err)
	}
}

// Changes of a CRD evict its superseded generations and, on delete, all
// of them; a late request for a superseded generation is served, not kept.
func TestCacheOnChange(t *testing.T) {
	gen1 := genCRD(t, crdgen.Shape{Strings: 10, Versions: 2}, 1)
	gen2 := gen1.DeepCopy()
	gen2.Generation = 2
	c := New[*compiled](Config{Service: "budgettest", Estimate: crdlimits.EstimateStructuralSize})
	compiles := 0
	for _, v := range []string{"v1", "v2"} {
		if _, err := c.Version(gen1, v, compileOf(&compiles, gen1, v)); err != nil {
			t.Fatal(err)
		}
	}
	c.OnChange(gen1, gen2)
	if s := c.Stats(); s.CRDs != 0 || s.Used != 0 {
		t.Errorf("generation 1 kept: %+v", s)
	}
	if v, err := c.Version(gen1, "v1", compileOf(&compiles, gen1, "v1")); err != nil || v.gen != 1 || c.Stats().CRDs != 0 {
		t.Errorf("late generation 1: %+v, %v, %+v", v, err, c.Stats())
	}
	if v, err := c.Version(gen2, "v1", compileOf(&compiles, gen2, "v1")); err != nil || v.gen != 2 || c.Stats().Versions != 1 {
		t.Errorf("generation 2: %+v, %v, %+v", v, err, c.Stats())
	}
	c.OnChange(gen2, nil)
	if s := c.Stats(); s.CRDs != 0 || s.Used != 0 {
		t.Errorf("deleted CRD kept: %+v", s)
	}
}

func TestQuantityFlag(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want int64
		err  bool
	}{
		{"256Mi", 256 << 20, false},
		{"1G", 1_000_000_000, false},
		{"1048576", 1 << 20, false},
		{"0", 0, false},
		{"-1Mi", 0, true},
		{"lots", 0, true},
	} {
		var v int64
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(QuantityFlag{&v}, FlagName, "")
		err := fs.Parse([]string{"--" + FlagName + "=" + tc.arg})
		if (err != nil) != tc.err || (err == nil && v != tc.want) {
			t.Errorf("%s: %d, %v", tc.arg, v, err)
		}
	}
	if d := DefaultLimit(); d < 2*crdlimits.MaxCompiledBytes {
		t.Errorf("default %d", d)
	}
}
