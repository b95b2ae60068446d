package openapi

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

func crontabIn(i int) *CRD {
	c := crontab(true)
	c.Name = fmt.Sprintf("crontabs.g%d.example.com", i)
	c.Spec.Group = fmt.Sprintf("g%d.example.com", i)
	c.UID = "u"
	c.Generation = 1
	return c
}

// A document the cache let go is rendered again, identical, and the
// index's hashes do not change.
func TestDocumentCacheEviction(t *testing.T) {
	big, small := New(), NewWithCache(1) // small keeps none
	for i := range 3 {
		big.Update(nil, crontabIn(i))
		small.Update(nil, crontabIn(i))
	}
	if !bytes.Equal(big.Index().Body, small.Index().Body) {
		t.Fatalf("indexes differ:\n%s\n%s", big.Index().Body, small.Index().Body)
	}
	for i := range 3 {
		gv := fmt.Sprintf("apis/g%d.example.com/v1", i)
		want, _ := big.Get(gv)
		for range 2 {
			got, ok := small.Get(gv)
			if !ok || !bytes.Equal(got.Body, want.Body) || got.Hash != want.Hash {
				t.Fatalf("%s rendered again differs", gv)
			}
		}
	}
	if n := len(small.bodies.byGV); n != 0 {
		t.Fatalf("a 1-byte cache keeps %d documents", n)
	}
	// a change makes the document stale, in the cache too
	before, _ := big.Get("apis/g0.example.com/v1")
	c := crontabIn(0)
	c.Generation = 2
	c.Spec.Versions[0].Subresources = nil
	big.Update(crontabIn(0), c)
	after, _ := big.Get("apis/g0.example.com/v1")
	if after == nil || after.Hash == before.Hash || bytes.Equal(after.Body, before.Body) || !bytes.Contains(big.Index().Body, []byte(after.Hash)) {
		t.Fatalf("after a change the document or the index is stale")
	}
	// the LRU order: the most recently used stays
	cache := newBodyCache(10)
	cache.put("a", &Document{Body: []byte("12345"), Hash: "a"})
	cache.put("b", &Document{Body: []byte("12345"), Hash: "b"})
	cache.get("a", "a")
	cache.put("c", &Document{Body: []byte("12345"), Hash: "c"})
	if cache.get("a", "a") == nil || cache.get("b", "b") != nil || cache.get("c", "c") == nil || cache.size != 10 {
		t.Fatalf("LRU kept %v (size %d)", cache.byGV, cache.size)
	}
	if cache.get("a", "other") != nil || cache.size != 5 {
		t.Fatalf("a stale hash is served, or kept")
	}
}

// TestDocumentModified: a document's Modified (the Last-Modified served)
// is when it last changed: a copy the cache dropped and rendered again
// keeps it, a change of the CRD's spec moves it on, and so does the
// index's.
func TestDocumentModified(t *testing.T) {
	b := NewWithCache(1) // keeps no body: every Get renders again
	start := time.Now()
	b.Update(nil, crontabIn(0))
	const gv = "apis/g0.example.com/v1"
	first, _ := b.Get(gv)
	index := b.Index()
	if first.Modified.Before(start) || index.Modified.Before(start) {
		t.Fatalf("Modified %v (index %v) is before the CRD was added (%v)", first.Modified, index.Modified, start)
	}
	time.Sleep(10 * time.Millisecond)
	again, _ := b.Get(gv)
	if again == first || again.Hash != first.Hash || !again.Modified.Equal(first.Modified) {
		t.Fatalf("rendered again: Modified %v, want %v (the same document)", again.Modified, first.Modified)
	}
	if b.Index() != index {
		t.Fatal("the index was built again without a change")
	}
	c := crontabIn(0)
	c.Generation = 2
	c.Spec.Versions[0].Subresources = nil
	b.Update(crontabIn(0), c)
	changed, _ := b.Get(gv)
	if changed.Hash == first.Hash || !changed.Modified.After(first.Modified) {
		t.Fatalf("after a change: Modified %v, before %v", changed.Modified, first.Modified)
	}
	if !b.Index().Modified.After(index.Modified) {
		t.Fatal("the index's Modified did not move on after a change")
	}
	// the static documents and /openapi/v2 carry one too
	for _, p := range []string{crdGVPath, builtinGroups[0].gvPath} {
		if d, _ := b.Get(p); d.Modified.IsZero() {
			t.Errorf("%s has no Modified", p)
		}
	}
	if b.V2().Modified.IsZero() {
		t.Error("/openapi/v2 has no Modified")
	}
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// The v3 documents of N CRDs keep a few KiB per CRD beyond the cache
// (issue 17's per-CRD budget): each part's path items deflated, its own
// schemas, the group-version's hash; the meta.v1 schemas shared. Before
// the cache and the deflated parts this was 159 KiB per CRD.
func TestV3MemoryPerCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 300 CRD parts")
	}
	const n = 300
	crds := make([]*CRD, n)
	for i := range crds {
		crds[i] = crontabIn(i)
	}
	base := heapInuse()
	b := NewWithCache(1 << 20)
	for _, c := range crds {
		b.Update(nil, c)
	}
	b.Index()
	per := (int64(heapInuse()) - int64(base) - 1<<20) / n
	t.Logf("v3 documents: %d KiB per CRD beyond a 1 MiB cache", per/1024)
	if per > 32<<10 {
		t.Errorf("v3 documents keep %d KiB per CRD, budget 32 KiB", per/1024)
	}
	for _, c := range crds {
		b.Update(c, nil)
	}
	b.Index()
	if left := int64(heapInuse()) - int64(base); left > 1<<20 {
		t.Errorf("after deleting every CRD the builder keeps %d KiB", left/1024)
	}
	runtime.KeepAlive(b)
}

// BenchmarkRenderV3 is what serving an evicted document costs: one CRD's
// group-version merged and rendered from its built part.
func BenchmarkRenderV3(b *testing.B) {
	c := crontabIn(0)
	p := &v3Part{crd: c, version: "v1"}
	p.build()
	gv := &v3GV{parts: map[string]*v3Part{c.Name: p}}
	for b.Loop() {
		renderV3(gv)
	}
}
