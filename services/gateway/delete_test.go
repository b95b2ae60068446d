package gateway

import (
	"net/http"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeletePropagation: a delete whose options leave the garbage
// collector's finalizers marks the object (deletionTimestamp, the
// finalizer) and answers it, 200 (202 for orphanDependents=false); no
// garbage collector runs, so it stays. Without finalizers left it is gone
// and the answer is a Success Status.
func TestDeletePropagation(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	const orphan, fg, hold = metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents, "example.com/hold"
	for _, tc := range []struct {
		name     string
		fins     []string
		query    string
		body     any
		code     int
		wantFins []string // nil: deleted
	}{
		{name: "fg", query: "?propagationPolicy=Foreground", code: 200, wantFins: []string{fg}},
		{name: "orphan-body", body: map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"}, code: 200, wantFins: []string{orphan}},
		{name: "orphan-query", query: "?orphanDependents=true", code: 200, wantFins: []string{orphan}},
		{name: "orphan-query-body-wins", query: "?orphanDependents=true", body: map[string]any{"kind": "DeleteOptions", "apiVersion": "v1"}, code: 200},
		{name: "cascade", fins: []string{hold}, query: "?orphanDependents=false", code: 202, wantFins: []string{hold}},
		{name: "cascade-gone", query: "?orphanDependents=false", code: 200},
		{name: "bg", query: "?propagationPolicy=Background", code: 200},
		{name: "bg-drops-orphan", fins: []string{orphan}, query: "?propagationPolicy=Background", code: 200},
		{name: "held-fg", fins: []string{hold}, query: "?propagationPolicy=Foreground", code: 200, wantFins: []string{hold, fg}},
		{name: "held", fins: []string{hold, orphan}, code: 200, wantFins: []string{hold, orphan}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := cronTab(tc.name, map[string]any{})
			if tc.fins != nil {
				meta(obj)["finalizers"] = tc.fins
			}
			g.expect(http.StatusCreated, "POST", crontabs, obj)
			got := g.expect(tc.code, "DELETE", crontabs+"/"+tc.name+tc.query, tc.body)
			if tc.wantFins == nil {
				if got["kind"] != "Status" || got["status"] != "Success" {
					t.Fatalf("want a Success Status, got %v", got)
				}
				g.expect(http.StatusNotFound, "GET", crontabs+"/"+tc.name, nil)
				return
			}
			for _, o := range []map[string]any{got, g.expect(http.StatusOK, "GET", crontabs+"/"+tc.name, nil)} {
				m := meta(o)
				if o["kind"] != "CronTab" || m["deletionTimestamp"] == nil || m["deletionGracePeriodSeconds"] != float64(0) {
					t.Fatalf("want the object marked for deletion, got %v", o)
				}
				if fins := stringsOf(m["finalizers"]); !reflect.DeepEqual(fins, tc.wantFins) {
					t.Fatalf("finalizers %v; want %v", fins, tc.wantFins)
				}
				if m["generation"] != float64(2) {
					t.Fatalf("generation %v; want 2", m["generation"])
				}
			}
			// A second delete changes nothing more (no new revision).
			rv := meta(got)["resourceVersion"]
			again := g.expect(tc.code, "DELETE", crontabs+"/"+tc.name+tc.query, tc.body)
			if meta(again)["resourceVersion"] != rv || meta(again)["generation"] != float64(2) {
				t.Fatalf("a repeated delete rewrote the object: %v", again)
			}
		})
	}

	// A policy changes the finalizers of an object already being deleted,
	// and deleteCollection applies it to every object it deletes.
	g.expect(http.StatusOK, "DELETE", crontabs+"?propagationPolicy=Foreground", nil)
	list := g.expect(http.StatusOK, "GET", crontabs, nil)
	want := map[string][]string{
		"fg": {fg}, "orphan-body": {fg}, "orphan-query": {fg},
		"cascade": {hold, fg}, "held-fg": {hold, fg}, "held": {hold, fg},
	}
	items, _ := list["items"].([]any)
	if len(items) != len(want) {
		t.Fatalf("%d items left; want %d: %v", len(items), len(want), list)
	}
	for _, it := range items {
		m := meta(it.(map[string]any))
		if fins := stringsOf(m["finalizers"]); !reflect.DeepEqual(fins, want[str(m["name"])]) {
			t.Errorf("%s: finalizers %v; want %v", m["name"], fins, want[str(m["name"])])
		}
	}
}

func stringsOf(v any) []string {
	l, _ := v.([]any)
	out := []string{}
	for _, x := range l {
		out = append(out, str(x))
	}
	return out
}
