package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
)

// A gateway whose compiled-schema budget holds one small CRD at a time:
// objects of two CRDs with defaults, written and read in turn, are
// defaulted right every time (their schemas evicted and compiled again),
// and a CRD whose schema alone exceeds the budget is answered with a 500
// Status naming the limit, on write as on read, while the others work.
func TestCompiledSchemaBudgetThroughTheGateway(t *testing.T) {
	shape := func(name string, strings int) map[string]any {
		var crd map[string]any
		if err := json.Unmarshal(crdgen.Shape{Name: name, Strings: strings}.JSON(), &crd); err != nil {
			t.Fatal(err)
		}
		// a group of its own: the kinds would conflict in one group
		crd["spec"].(map[string]any)["group"] = name + ".example.com"
		crd["metadata"].(map[string]any)["name"] = name + "." + name + ".example.com"
		v := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
		spec := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
		spec["properties"].(map[string]any)["replicas"] = map[string]any{"type": "integer", "default": 3}
		return crd
	}
	estimate := func(crd map[string]any) int64 {
		raw, _ := json.Marshal(crd)
		var c apiextensionsv1.CustomResourceDefinition
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		return crdlimits.EstimateStructuralSize(&c).Total()
	}
	smalls := []map[string]any{shape("as", 100), shape("bs", 100)}
	big := shape("bigs", 1000)
	limit := estimate(smalls[0]) + estimate(smalls[0])/2
	if estimate(big) <= limit {
		t.Fatalf("big CRD %d bytes, within %d", estimate(big), limit)
	}
	g := newTestGatewayWith(t, func(c *Config) { c.CompiledMemoryLimit = limit })
	for _, crd := range append(smalls, big) {
		g.createCRD(crd)
	}
	obj := func(plural, name string) map[string]any {
		return map[string]any{"apiVersion": plural + ".example.com/v1", "kind": "Gen", "metadata": map[string]any{"name": name}, "spec": map[string]any{"s1": "x"}}
	}
	for round := range 3 {
		for _, plural := range []string{"as", "bs"} {
			path := "/apis/" + plural + ".example.com/v1/namespaces/default/" + plural
			name := fmt.Sprintf("o%d", round)
			created := g.expect(http.StatusCreated, "POST", path, obj(plural, name))
			got := g.expect(http.StatusOK, "GET", path+"/"+name, nil)
			list := g.expect(http.StatusOK, "GET", path, nil)
			for what, o := range map[string]any{"created": created, "read": got, "listed": list["items"].([]any)[round]} {
				if r := o.(map[string]any)["spec"].(map[string]any)["replicas"]; r != 3.0 {
					t.Errorf("round %d, %s %s: replicas %v, want the default 3", round, plural, what, r)
				}
			}
		}
	}
	if s := g.svc.api.crAPI.CompiledSchemas(); s.Used > limit || s.Evictions < 5 {
		t.Errorf("%+v; limit %d, want 5 evictions or more", s, limit)
	}

	want := fmt.Sprintf("Internal error occurred: CustomResourceDefinition bigs.bigs.example.com needs an estimated %d bytes once compiled, more than this gateway's limit of %d bytes (--compiled-crd-memory-limit): over the compiled-CRD memory budget",
		estimate(big), limit)
	st := g.expect(http.StatusInternalServerError, "POST", "/apis/bigs.example.com/v1/namespaces/default/bigs", obj("bigs", "x"))
	if st["kind"] != "Status" || st["reason"] != "InternalError" || st["message"] != want || st["code"] != 500.0 {
		t.Errorf("got %v\nwant 500 %q", st, want)
	}
	g.expect(http.StatusNotFound, "GET", "/apis/bigs.example.com/v1/namespaces/default/bigs/x", nil)
	g.expect(http.StatusOK, "GET", "/apis/as.example.com/v1/namespaces/default/as/o0", nil)
}
