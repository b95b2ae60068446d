package registry

import (
	"log/slog"
	"slices"
	"strconv"
	"testing"
)

// TestInformerGroupIndex: listGroup follows replace, observe and remove,
// as a scan of list by spec.group would.
func TestInformerGroupIndex(t *testing.T) {
	inf := newInformer(nil, slog.Default())
	crd := func(name, group string, rv int) *CRD {
		c := &CRD{}
		c.Name, c.Spec.Group, c.ResourceVersion = name, group, strconv.Itoa(rv)
		return c
	}
	inf.replace(map[string]*CRD{"as.a": crd("as.a", "a", 1), "bs.a": crd("bs.a", "a", 2), "cs.b": crd("cs.b", "b", 3)})
	inf.observe(crd("ds.b", "b", 4))
	inf.observe(crd("as.a", "a", 5))
	inf.observe(crd("as.a", "a", 4)) // older: ignored
	inf.remove("bs.a", 6)
	inf.remove("missing.c", 7)
	for _, group := range []string{"a", "b", "c"} {
		var want []*CRD
		for _, c := range inf.list() {
			if c.Spec.Group == group {
				want = append(want, c)
			}
		}
		if got := inf.listGroup(group); !slices.Equal(got, want) {
			t.Errorf("listGroup(%q) = %v, want %v", group, names(got), names(want))
		}
	}
	if got := inf.listGroup("a"); len(got) != 1 || got[0].ResourceVersion != "5" {
		t.Errorf("group a holds %v, want as.a at 5", names(got))
	}
	if len(inf.groups) != 2 {
		t.Errorf("%d groups indexed, want 2 (an emptied group is dropped)", len(inf.groups))
	}
}

func names(cs []*CRD) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name+"@"+c.ResourceVersion)
	}
	return out
}
