package cr

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestGCFinalizers is upstream's deletionFinalizersForGarbageCollection for
// custom resources (no default policy): which of orphan and
// foregroundDeletion a delete leaves on the object.
func TestGCFinalizers(t *testing.T) {
	pp := func(p metav1.DeletionPropagation) *metav1.DeleteOptions {
		return &metav1.DeleteOptions{PropagationPolicy: &p}
	}
	od := func(v bool) *metav1.DeleteOptions { return &metav1.DeleteOptions{OrphanDependents: &v} }
	const orphan, fg, hold = metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents, "example.com/hold"
	for _, tc := range []struct {
		name    string
		fins    []string
		opts    *metav1.DeleteOptions
		changed bool
		want    []string
	}{
		{name: "no options, no finalizers", opts: &metav1.DeleteOptions{}, want: nil},
		{name: "no options keep finalizers", fins: []string{hold, orphan}, opts: &metav1.DeleteOptions{}, want: []string{hold, orphan}},
		{name: "Background", opts: pp(metav1.DeletePropagationBackground), want: nil},
		{name: "Background drops orphan", fins: []string{orphan}, opts: pp(metav1.DeletePropagationBackground), changed: true, want: []string{}},
		{name: "Background drops foregroundDeletion", fins: []string{hold, fg}, opts: pp(metav1.DeletePropagationBackground), changed: true, want: []string{hold}},
		{name: "Foreground", opts: pp(metav1.DeletePropagationForeground), changed: true, want: []string{fg}},
		{name: "Foreground after hold", fins: []string{hold}, opts: pp(metav1.DeletePropagationForeground), changed: true, want: []string{hold, fg}},
		{name: "Foreground replaces orphan", fins: []string{orphan, hold}, opts: pp(metav1.DeletePropagationForeground), changed: true, want: []string{hold, fg}},
		{name: "Foreground already there", fins: []string{fg, hold}, opts: pp(metav1.DeletePropagationForeground), want: []string{fg, hold}},
		{name: "Orphan", opts: pp(metav1.DeletePropagationOrphan), changed: true, want: []string{orphan}},
		{name: "Orphan replaces foregroundDeletion", fins: []string{fg}, opts: pp(metav1.DeletePropagationOrphan), changed: true, want: []string{orphan}},
		{name: "orphanDependents=true", opts: od(true), changed: true, want: []string{orphan}},
		{name: "orphanDependents=false drops both", fins: []string{orphan, hold, fg}, opts: od(false), changed: true, want: []string{hold}},
		{name: "orphanDependents=false", opts: od(false), want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, got := gcFinalizers(tc.fins, tc.opts)
			if changed != tc.changed || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("gcFinalizers = %v, %#v; want %v, %#v", changed, got, tc.changed, tc.want)
			}
		})
	}
}
