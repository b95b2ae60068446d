package storage

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// seed creates objects ns/name for every name in each namespace and returns
// the prefix of the resource.
func seed(t *testing.T, e *env, namespaces []string, n int, spec func(i int) map[string]any) string {
	t.Helper()
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/"
	for _, ns := range namespaces {
		for i := range n {
			name := fmt.Sprintf("o%02d", i)
			var sp map[string]any
			if spec != nil {
				sp = spec(i)
			}
			labels := map[string]string{"parity": []string{"even", "odd"}[i%2]}
			if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + ns + "/" + name, Object: object(name, ns, labels, sp)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return prefix
}

func TestList(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a", "b"}, 3, nil)

	all, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Objects) != 6 || all.ContinueToken != "" || all.RemainingItemCount != nil {
		t.Fatalf("list: %d objects, continue %q, remaining %v", len(all.Objects), all.ContinueToken, all.RemainingItemCount)
	}
	maxRV := int64(0)
	for _, o := range all.Objects {
		maxRV = max(maxRV, rvOf(t, o))
	}
	if all.ResourceVersion < maxRV {
		t.Fatalf("list rv %d < item rv %d", all.ResourceVersion, maxRV)
	}
	// Each item carries its own mod revision.
	gr, err := e.client.Get(ctx, &storagev1.GetRequest{Key: prefix + "a/o00"})
	if err != nil {
		t.Fatal(err)
	}
	if string(all.Objects[0]) != string(gr.Object) {
		t.Fatalf("list item %s, get %s", all.Objects[0], gr.Object)
	}

	ns, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix + "b/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, ns.Objects); !slices.Equal(got, []string{"o00", "o01", "o02"}) {
		t.Fatalf("namespace list: %v", got)
	}
	empty, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix + "c/"})
	if err != nil || len(empty.Objects) != 0 || empty.ResourceVersion == 0 {
		t.Fatalf("empty list: %v %v", empty, err)
	}
}

func TestListSelectors(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	colors := []string{"red", "green", "blue"}
	prefix := seed(t, e, []string{"a", "b"}, 6, func(i int) map[string]any {
		return map[string]any{"color": colors[i%3], "size": i, "on": i%2 == 0}
	})
	selectable := []string{"spec.color", "spec.size", "spec.on"}
	tests := []struct {
		name, label, field string
		want               []string
	}{
		{"label", "parity=odd", "", []string{"a/o01", "a/o03", "a/o05", "b/o01", "b/o03", "b/o05"}},
		{"name", "", "metadata.name=o02", []string{"a/o02", "b/o02"}},
		{"namespace", "", "metadata.namespace=b,metadata.name!=o00", []string{"b/o01", "b/o02", "b/o03", "b/o04", "b/o05"}},
		{"string field", "", "spec.color=blue", []string{"a/o02", "a/o05", "b/o02", "b/o05"}},
		{"int field", "", "spec.size=4", []string{"a/o04", "b/o04"}},
		{"bool field", "", "spec.on=false,metadata.namespace=a", []string{"a/o01", "a/o03", "a/o05"}},
		{"both", "parity=even", "spec.color!=red", []string{"a/o02", "a/o04", "b/o02", "b/o04"}},
		{"none", "parity=none", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &commonv1.ListOptions{LabelSelector: tt.label, FieldSelector: tt.field, SelectableFields: selectable}
			resp, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			if got := nsNames(t, resp.Objects); !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			// Paginated one by one, the same objects come back.
			opts.Limit = 1
			var paged []string
			for {
				resp, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: opts})
				if err != nil {
					t.Fatal(err)
				}
				if resp.RemainingItemCount != nil {
					t.Fatal("remaining item count with a selector")
				}
				paged = append(paged, nsNames(t, resp.Objects)...)
				if resp.ContinueToken == "" {
					break
				}
				opts.ContinueToken = resp.ContinueToken
			}
			if !slices.Equal(paged, tt.want) {
				t.Fatalf("paged %v, want %v", paged, tt.want)
			}
		})
	}

	_, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{FieldSelector: "spec.nope=1", SelectableFields: selectable}})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "field label not supported: spec.nope")
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{FieldSelector: "spec.color=blue"}})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "field label not supported: spec.color")
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{LabelSelector: "a in ("}})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "")
}

func nsNames(t *testing.T, objs [][]byte) []string {
	var out []string
	for _, o := range objs {
		m := meta(t, o)
		out = append(out, m.Namespace+"/"+m.Name)
	}
	return out
}

func TestListPaginationIsConsistent(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a"}, 10, nil)

	opts := &commonv1.ListOptions{Limit: 4}
	first, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, first.Objects); !slices.Equal(got, []string{"o00", "o01", "o02", "o03"}) {
		t.Fatalf("first page %v", got)
	}
	if first.ContinueToken == "" || first.RemainingItemCount == nil || *first.RemainingItemCount != 6 {
		t.Fatalf("continue %q remaining %v", first.ContinueToken, first.RemainingItemCount)
	}

	// Writes between pages: none shows in the later pages.
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "a/o05"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "a/o04a", Object: object("o04a", "a", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: prefix + "a/o06", Object: object("o06", "a", map[string]string{"changed": "yes"}, nil)}); err != nil {
		t.Fatal(err)
	}

	opts.ContinueToken = first.ContinueToken
	second, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, second.Objects); !slices.Equal(got, []string{"o04", "o05", "o06", "o07"}) {
		t.Fatalf("second page %v", got)
	}
	if meta(t, second.Objects[2]).Labels["changed"] != "" {
		t.Fatal("the second page shows a later update")
	}
	if second.ResourceVersion != first.ResourceVersion || *second.RemainingItemCount != 2 {
		t.Fatalf("second page rv %d (first %d), remaining %v", second.ResourceVersion, first.ResourceVersion, second.RemainingItemCount)
	}
	opts.ContinueToken = second.ContinueToken
	third, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, third.Objects); !slices.Equal(got, []string{"o08", "o09"}) || third.ContinueToken != "" || third.RemainingItemCount != nil {
		t.Fatalf("third page %v continue %q", got, third.ContinueToken)
	}

	// A fresh list sees the writes.
	fresh, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, fresh.Objects); !slices.Equal(got, []string{"o00", "o01", "o02", "o03", "o04", "o04a", "o06", "o07", "o08", "o09"}) {
		t.Fatalf("fresh list %v", got)
	}

	// Exactly limit objects left: no continue token.
	last, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{Limit: 10}})
	if err != nil || len(last.Objects) != 10 || last.ContinueToken != "" {
		t.Fatalf("limit = count: %d objects, continue %q, %v", len(last.GetObjects()), last.GetContinueToken(), err)
	}
}

func TestListAtResourceVersion(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a"}, 2, nil)
	before, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "a/o00"}); err != nil {
		t.Fatal(err)
	}
	old, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: before.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	if len(old.Objects) != 2 || old.ResourceVersion != before.ResourceVersion {
		t.Fatalf("list at %d: %d objects at %d", before.ResourceVersion, len(old.Objects), old.ResourceVersion)
	}
	// Pages of a list at a revision stay at it.
	page, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: before.ResourceVersion, Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	next, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ContinueToken: page.ContinueToken, Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := append(names(t, page.Objects), names(t, next.Objects)...); !slices.Equal(got, []string{"o00", "o01"}) {
		t.Fatalf("pages at a revision: %v", got)
	}

	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: 1, ContinueToken: page.ContinueToken}})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "specifying resource version is not allowed when using continue")
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ContinueToken: "garbage"}})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "")
	// An exact read of a revision etcd has not reached: etcd's error, as
	// upstream's etcd3 store returns it (a plain 500).
	future := before.ResourceVersion + 1_000_000
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: future}})
	st := wantStatus(t, err, 500, "", "etcdserver: mvcc: required revision is a future revision")
	if st.Details != nil {
		t.Fatalf("details %+v", st.Details)
	}
}

func TestListCompacted(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a"}, 3, nil)
	first, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	old := first.ResourceVersion
	upd, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: prefix + "a/o00", Object: object("o00", "a", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Client().Compact(ctx, upd.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: old}})
	wantStatus(t, err, 410, metav1.StatusReasonExpired, "The resourceVersion for the provided list is too old.")
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{Limit: 1, ContinueToken: first.ContinueToken}})
	wantStatus(t, err, 410, metav1.StatusReasonExpired,
		"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
	// The compaction revision itself is still readable.
	if _, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: upd.ResourceVersion}}); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteCollection(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a", "b"}, 4, nil)

	// With a selector, only the matching objects go.
	resp, err := e.client.DeleteCollection(ctx, &storagev1.DeleteCollectionRequest{Prefix: prefix, Options: &commonv1.ListOptions{LabelSelector: "parity=odd"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := nsNames(t, resp.Objects); !slices.Equal(got, []string{"a/o01", "a/o03", "b/o01", "b/o03"}) {
		t.Fatalf("deleted %v", got)
	}
	for _, o := range resp.Objects {
		if rv := rvOf(t, o); rv > resp.ResourceVersion || rv == 0 {
			t.Fatalf("deleted object rv %d, response rv %d", rv, resp.ResourceVersion)
		}
	}
	left, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if got := nsNames(t, left.Objects); !slices.Equal(got, []string{"a/o00", "a/o02", "b/o00", "b/o02"}) {
		t.Fatalf("left %v", got)
	}

	// A namespace, without selectors: one range delete.
	resp, err = e.client.DeleteCollection(ctx, &storagev1.DeleteCollectionRequest{Prefix: prefix + "a/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := nsNames(t, resp.Objects); !slices.Equal(got, []string{"a/o00", "a/o02"}) {
		t.Fatalf("deleted %v", got)
	}
	for _, o := range resp.Objects {
		if rvOf(t, o) != resp.ResourceVersion {
			t.Fatalf("deleted object rv %d, deletion rv %d", rvOf(t, o), resp.ResourceVersion)
		}
	}
	left, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil || !slices.Equal(nsNames(t, left.Objects), []string{"b/o00", "b/o02"}) {
		t.Fatalf("left %v %v", nsNames(t, left.GetObjects()), err)
	}
	// Nothing to delete.
	resp, err = e.client.DeleteCollection(ctx, &storagev1.DeleteCollectionRequest{Prefix: prefix + "zzz/", Options: &commonv1.ListOptions{LabelSelector: "parity"}})
	if err != nil || len(resp.Objects) != 0 {
		t.Fatalf("empty delete collection: %v %v", resp, err)
	}
}

// TestListUnpagedChunks: a list without a limit reads etcd in chunks of
// unpagedChunk, all at one revision, and answers every object in one
// response without a continue token.
func TestListUnpagedChunks(t *testing.T) {
	e := sharedWith(t, "default")
	g := testGroup()
	prefix := "/registry/" + g + "/crontabs/default/"
	ctx := ctxT(t)
	n := 2*int(unpagedChunk) + 37
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				name := fmt.Sprintf("c%05d", i)
				if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + name, Object: object(name, "default", nil, nil)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ranges := func() uint64 {
		var m dto.Metric
		if err := etcdRequests.WithLabelValues("main", "KV/Range", "OK").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	before := ranges()
	resp, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	// The etcd reads of the list: one per chunk (others may read beside
	// it, none in this test's sequential run but the odd stray).
	if reads := ranges() - before; reads < 3 || reads > 5 {
		t.Errorf("the list took %d etcd range reads, want 3 (chunks of %d)", reads, unpagedChunk)
	}
	if len(resp.Objects) != n || resp.ContinueToken != "" || resp.RemainingItemCount != nil {
		t.Fatalf("%d objects, continue %q, remaining %v; want %d, none", len(resp.Objects), resp.ContinueToken, resp.RemainingItemCount, n)
	}
	got := names(t, resp.Objects)
	for i, name := range got {
		if want := fmt.Sprintf("c%05d", i); name != want {
			t.Fatalf("object %d is %s, want %s", i, name, want)
		}
		if rv := rvOf(t, resp.Objects[i]); rv > resp.ResourceVersion {
			t.Fatalf("object %s at %d, after the list's revision %d", name, rv, resp.ResourceVersion)
		}
	}
	// A list at the revision of the first: the same objects, though more
	// were written since.
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "z-later", Object: object("z-later", "default", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	at, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: &commonv1.ListOptions{ResourceVersion: resp.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	if len(at.Objects) != n || at.ResourceVersion != resp.ResourceVersion {
		t.Fatalf("list at %d: %d objects at %d", resp.ResourceVersion, len(at.Objects), at.ResourceVersion)
	}
}
