package cr

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
)

// defaultedCRD is a synthetic CRD (crdgen's shape, every version the same
// schema) whose .spec.replicas defaults to 3.
func defaultedCRD(t testing.TB, s crdgen.Shape) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(s.JSON(), crd); err != nil {
		t.Fatal(err)
	}
	crd.UID, crd.Generation = types.UID("uid-"+crd.Name), 1
	for _, v := range crd.Spec.Versions {
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Properties["replicas"] = apiextensionsv1.JSONSchemaProps{Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte("3")}}
		v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	return crd
}

// The compiled-schema cache stays within its budget under many CRDs: it
// evicts the least recently used, compiles them again on demand, and
// answers stay right (stored objects read with their version's default,
// unknown fields pruned after a conversion).
func TestSchemaCacheBudget(t *testing.T) {
	const crds = 12
	var rs []*resource
	for i := range crds {
		crd := defaultedCRD(t, crdgen.Shape{Name: fmt.Sprintf("gen%ds", i), Strings: 200, Rules: 20, Versions: 2})
		r, err := newResource(crd, "v1")
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	perVersion := crdlimits.EstimateStructuralSize(rs[0].crd).Versions[0]
	limit := 3*perVersion + perVersion/2 // room for three versions
	c := newSchemaCache(limit)
	stored := []byte(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"a"},"spec":{"s1":"x","stale":"pruned"}}`)
	want := `{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"a"},"spec":{"replicas":3,"s1":"x"}}`
	fromV2 := []byte(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"a"},"spec":{"s1":"x","unknown":1}}`)
	for round := range 3 {
		for i, r := range rs {
			out, err := c.readDefaults(r, [][]byte{stored})
			if err != nil {
				t.Fatalf("round %d, gen%d: %v", round, i, err)
			}
			if !jsonEqual(t, out[0], []byte(want)) {
				t.Errorf("round %d, gen%d: read %s\nwant %s", round, i, out[0], want)
			}
			// a conversion from v2 (the same schema: nothing to prune)
			// and from a version of another schema (pruned)
			pr, err := c.pruner(r, "v1")
			if err != nil {
				t.Fatal(err)
			}
			if pr.needed("v2") {
				t.Errorf("round %d, gen%d: v2's schema is v1's, yet pruned", round, i)
			}
			pruned, err := pr.apply(fromV2)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, pruned, []byte(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"a"},"spec":{"s1":"x"}}`)) {
				t.Errorf("round %d, gen%d: pruned %s", round, i, pruned)
			}
			if s := c.cache.Stats(); s.Used > limit {
				t.Fatalf("round %d, gen%d: %d bytes charged, over the limit of %d", round, i, s.Used, limit)
			}
		}
	}
	s := c.cache.Stats()
	t.Logf("%d CRDs of 2 versions of %d bytes (estimate), limit %d: %+v", crds, perVersion, limit, s)
	// each CRD compiles v1, and v2 for needed(): two of the three
	// versions the budget holds; every CRD evicts the one before
	if s.Evictions < 3*crds-1 || s.Used > limit || s.Versions != 2 || s.CRDs != 1 {
		t.Errorf("%+v; want >= %d evictions, the last CRD's 2 versions cached", s, 3*crds-1)
	}
}

// A CRD whose versions alone exceed the budget is refused with a 500 in
// the validator's words, on reads and conversions; other CRDs still
// compile, and nothing of the refused one stays charged.
func TestSchemaCacheRefusesCRDOverBudget(t *testing.T) {
	big := defaultedCRD(t, crdgen.Shape{Name: "bigs", Strings: 2000})
	small := defaultedCRD(t, crdgen.Shape{Name: "smalls", Strings: 10})
	need := crdlimits.EstimateStructuralSize(big).Versions[0]
	a := &Server{schemas: newSchemaCache(need - 1)}
	rBig, err := newResource(big, "v1")
	if err != nil {
		t.Fatal(err)
	}
	rSmall, err := newResource(small, "v1")
	if err != nil {
		t.Fatal(err)
	}
	obj := []byte(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"a"},"spec":{}}`)
	want := fmt.Sprintf("Internal error occurred: CustomResourceDefinition bigs.gen.example.com needs an estimated %d bytes once compiled, more than this gateway's limit of %d bytes (--compiled-crd-memory-limit): over the compiled-CRD memory budget",
		need, need-1)
	for name, read := range map[string]func() error{
		"read": func() error { _, err := a.readObjects(context.Background(), rBig, [][]byte{obj}); return err },
		"convert": func() error {
			_, err := a.convertObjects(context.Background(), rBig, "gen.example.com/v1", [][]byte{obj})
			return err
		},
	} {
		err := read()
		st, ok := err.(apierrors.APIStatus)
		if !ok || st.Status().Code != 500 || st.Status().Reason != "InternalError" || st.Status().Message != want {
			t.Errorf("%s: got %v\nwant 500 %q", name, err, want)
		}
	}
	if s := a.schemas.cache.Stats(); s.Used != 0 || s.CRDs != 0 {
		t.Errorf("refused CRD accounted: %+v", s)
	}
	out, err := a.readObjects(context.Background(), rSmall, [][]byte{obj})
	if err != nil || !jsonEqual(t, out[0], []byte(`{"apiVersion":"gen.example.com/v1","kind":"Gen","metadata":{"name":"a"},"spec":{"replicas":3}}`)) {
		t.Errorf("small CRD: %s, %v", out, err)
	}
}

// heldBytes is the heap that build's result keeps after collections.
func heldBytes(build func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := build()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// measureSchemas compiles every version of crd through a cache of its own
// (as a read of each version does) and returns the heap the cache keeps
// and its charge.
func measureSchemas(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) (held uint64, charged int64) {
	t.Helper()
	r, err := newResource(crd, crd.Spec.Versions[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	var c *schemaCache
	held = heldBytes(func() any {
		c = newSchemaCache(1 << 40)
		for _, v := range crd.Spec.Versions {
			if _, err := c.get(r, v.Name); err != nil {
				t.Fatal(err)
			}
		}
		return c
	})
	return held, c.cache.Stats().Used
}

// What the gateway's cache keeps of a compiled CRD stays under the charge
// (crdlimits.EstimateStructuralSize), whatever the CRD's shape.
func TestCompiledSchemaSizeWithinEstimate(t *testing.T) {
	for _, tc := range crdgen.Measured {
		if tc.Shape.Strings == 100 || tc.Shape.Rules == 100 {
			continue // too small for the heap's noise
		}
		crd := defaultedCRD(t, tc.Shape)
		held, charged := measureSchemas(t, crd)
		t.Logf("%s: held %d, charged %d (%.2f)", tc.Name, held, charged, float64(held)/float64(charged))
		if held > uint64(charged) {
			t.Errorf("%s: %d bytes held, over the %d charged", tc.Name, held, charged)
		}
	}
}

// BenchmarkCompiledSchemaSize compiles synthetic CRDs of growing size
// through the gateway's compiled-schema cache (every version's structural
// schema) and reports the heap it keeps (held-B) against the charge
// (estimate-B, crdlimits.EstimateStructuralSize) and the validator's full
// estimate (compiled-estimate-B: CEL programs and type converter too):
//
//	go test -run '^$' -bench CompiledSchemaSize -benchtime 1x -count 5 ./services/gateway/cr
func BenchmarkCompiledSchemaSize(b *testing.B) {
	for _, tc := range crdgen.Measured {
		b.Run(tc.Name, func(b *testing.B) {
			crd := defaultedCRD(b, tc.Shape)
			var held uint64
			var charged int64
			for b.Loop() {
				held, charged = measureSchemas(b, crd)
			}
			full := crdlimits.EstimateCompiledSize(crd)
			b.ReportMetric(float64(held), "held-B")
			b.ReportMetric(float64(charged), "estimate-B")
			b.ReportMetric(float64(full.Total()-full.Decoded), "compiled-estimate-B")
			b.ReportMetric(float64(held)/float64(charged), "held/estimate")
		})
	}
}
