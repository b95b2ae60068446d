package webhook

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

func cronTabRV(name, rv string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":%q,"kind":"CronTab","metadata":{"name":%q,"namespace":"default","uid":"u-%s","resourceVersion":%q},"spec":{"hostPort":"h:1"}}`, beta, name, name, rv)
}

// TestCacheKeys: a conversion is reused only for the same CRD generation,
// object uid, resourceVersion, desired version and input bytes.
func TestCacheKeys(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{})
	defer c.Close()
	base := urlCRD(srv, caPEM)
	convert := func(obj []byte) []byte {
		t.Helper()
		out, err := c.Convert(context.Background(), base, v1, [][]byte{obj})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	steps := []struct {
		name  string
		obj   []byte
		calls int64 // reviews expected for this step
	}{
		{"first read", cronTabRV("a", "5"), 1},
		{"same object again", cronTabRV("a", "5"), 0},
		{"new resourceVersion", cronTabRV("a", "6"), 1},
		{"other object", cronTabRV("b", "6"), 1},
		{"same uid and rv, other bytes (a write's object)", bytes.Replace(cronTabRV("a", "6"), []byte("h:1"), []byte("h:2"), 1), 1},
		{"no resourceVersion: never cached", []byte(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"n","uid":"u-n"}}`), 1},
		{"no resourceVersion again", []byte(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"n","uid":"u-n"}}`), 1},
	}
	for _, s := range steps {
		before := fw.reviews.Load()
		out := convert(s.obj)
		if got := fw.reviews.Load() - before; got != s.calls {
			t.Errorf("%s: %d reviews, want %d", s.name, got, s.calls)
		}
		if !strings.Contains(string(out), `"apiVersion":"example.com/v1"`) {
			t.Errorf("%s: not converted: %s", s.name, out)
		}
	}
	st := c.Stats()
	if st.CacheHits != 1 || st.CacheEntries != 3 || st.CacheBytes <= 0 {
		t.Errorf("stats %+v: want 1 hit, 3 entries", st)
	}

	// A new CRD generation (here: another webhook and CA bundle) never
	// answers from the previous generation's conversions.
	fw2 := &fakeWebhook{mutate: func(o map[string]any) { o["spec"] = map[string]any{"by": "second"} }}
	caPEM2, srv2 := startWebhook(t, fw2)
	next := urlCRD(srv2, caPEM2)
	next.Generation = 2
	out, err := c.Convert(context.Background(), next, v1, [][]byte{cronTabRV("a", "5")})
	if err != nil {
		t.Fatal(err)
	}
	if fw2.reviews.Load() != 1 || !strings.Contains(string(out[0]), `"by":"second"`) {
		t.Errorf("generation 2: %d reviews of the new webhook, %s", fw2.reviews.Load(), out[0])
	}
	// Nor does another desired version share entries, nor a deleted CRD.
	c.Forget(string(base.UID))
	if st := c.Stats(); st.CacheEntries != 0 || st.CacheBytes != 0 {
		t.Errorf("after Forget: %+v", st)
	}
}

// TestCacheFailuresNotCached: a refused conversion is asked again.
func TestCacheFailuresNotCached(t *testing.T) {
	fw := &fakeWebhook{fail: true}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{})
	defer c.Close()
	for range 2 {
		if _, err := c.Convert(context.Background(), urlCRD(srv, caPEM), v1, [][]byte{cronTabRV("bad", "3")}); err == nil {
			t.Fatal("want the webhook's failure")
		}
	}
	if r := fw.reviews.Load(); r != 2 {
		t.Errorf("%d reviews, want 2", r)
	}
}

// TestCacheBound: the cache stays within its bytes, least recently used
// out first.
func TestCacheBound(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, fw)
	const budget = 8 << 10
	c := New(Config{CacheBytes: budget})
	defer c.Close()
	d := urlCRD(srv, caPEM)
	for i := range 200 {
		if _, err := c.Convert(context.Background(), d, v1, [][]byte{cronTabRV(fmt.Sprint("o", i), "1")}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // keep o0 recently used
			if _, err := c.Convert(context.Background(), d, v1, [][]byte{cronTabRV("o0", "1")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := c.Stats()
	if st.CacheBytes > budget || st.CacheEntries == 0 || st.CacheEntries >= 200 {
		t.Fatalf("stats %+v: want within %d bytes", st, budget)
	}
	before := fw.reviews.Load()
	for _, name := range []string{"o0", "o199"} {
		if _, err := c.Convert(context.Background(), d, v1, [][]byte{cronTabRV(name, "1")}); err != nil {
			t.Fatal(err)
		}
	}
	if fw.reviews.Load() != before {
		t.Errorf("recently used objects were evicted")
	}
	if _, err := c.Convert(context.Background(), d, v1, [][]byte{cronTabRV("o1", "1")}); err != nil {
		t.Fatal(err)
	}
	if fw.reviews.Load() != before+1 {
		t.Errorf("the least recently used object is still cached")
	}
}

// TestCacheDisabled: a negative budget sends every conversion.
func TestCacheDisabled(t *testing.T) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(t, fw)
	c := New(Config{CacheBytes: -1})
	defer c.Close()
	for range 3 {
		if _, err := c.Convert(context.Background(), urlCRD(srv, caPEM), v1, [][]byte{cronTabRV("a", "1")}); err != nil {
			t.Fatal(err)
		}
	}
	if r := fw.reviews.Load(); r != 3 {
		t.Errorf("%d reviews, want 3", r)
	}
}

// BenchmarkCacheHit is the cost of a conversion answered from the cache.
func BenchmarkCacheHit(b *testing.B) {
	fw := &fakeWebhook{}
	caPEM, srv := startWebhook(b, fw)
	c := New(Config{})
	defer c.Close()
	d := urlCRD(srv, caPEM)
	objs := [][]byte{cronTab(beta, "a")}
	if _, err := c.Convert(context.Background(), d, v1, objs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Convert(context.Background(), d, v1, objs); err != nil {
			b.Fatal(err)
		}
	}
	if fw.reviews.Load() != 1 {
		b.Fatalf("%d reviews", fw.reviews.Load())
	}
}
