package convcache

import (
	"fmt"
	"testing"
)

func object(name, rv, spec string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":%q,"uid":"u-%s","resourceVersion":%q},"spec":%s}`, name, name, rv, spec)
}

func TestKeys(t *testing.T) {
	c := New(Config{MaxBytes: 1 << 20, Component: "test"})
	stored := object("a", "5", `{"x":1}`)
	in, ok := c.Inspect(stored)
	if !ok || in.UID != "u-a" || in.ResourceVersion != "5" {
		t.Fatalf("Inspect: %+v %v", in, ok)
	}
	k := in.KeyFor("crd", 1, "example.com/v1")
	c.Put(k, in, []byte("converted"))
	tests := []struct {
		name string
		obj  []byte
		gen  int64
		to   string
		hit  bool
	}{
		{"same object, generation and version", object("a", "5", `{"x":1}`), 1, "example.com/v1", true},
		{"new resourceVersion", object("a", "6", `{"x":1}`), 1, "example.com/v1", false},
		{"same uid and resourceVersion, other bytes", object("a", "5", `{"x":2}`), 1, "example.com/v1", false},
		{"new CRD generation", object("a", "5", `{"x":1}`), 2, "example.com/v1", false},
		{"other version", object("a", "5", `{"x":1}`), 1, "example.com/v2", false},
		{"other object", object("b", "5", `{"x":1}`), 1, "example.com/v1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, ok := c.Inspect(tt.obj)
			if !ok {
				t.Fatal("not cacheable")
			}
			out, hit := c.Get(in.KeyFor("crd", tt.gen, tt.to), in)
			if hit != tt.hit || hit && string(out) != "converted" {
				t.Fatalf("hit %v (%s), want %v", hit, out, tt.hit)
			}
		})
	}
	for _, obj := range []string{
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"n","uid":"u"}}`,
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"n","resourceVersion":"1"}}`,
		`{"apiVersion":"v1","kind":"K","metadata":"x"}`,
		`{"apiVersion":"v1","kind":"K"}`,
	} {
		if _, ok := c.Inspect([]byte(obj)); ok {
			t.Errorf("%s: cacheable", obj)
		}
	}
	c.Forget("crd")
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 || s.Hits != 1 {
		t.Fatalf("after Forget: %+v", s)
	}
}

func TestBoundAndLRU(t *testing.T) {
	const budget = 4 << 10
	c := New(Config{MaxBytes: budget, Component: "test"})
	put := func(name string) {
		in, _ := c.Inspect(object(name, "1", "{}"))
		c.Put(in.KeyFor("crd", 1, "v"), in, make([]byte, 200))
	}
	has := func(name string) bool {
		in, _ := c.Inspect(object(name, "1", "{}"))
		_, ok := c.Get(in.KeyFor("crd", 1, "v"), in)
		return ok
	}
	for i := range 100 {
		put(fmt.Sprint("o", i))
		if i%5 == 0 && !has("o0") { // o0 stays recently used
			t.Fatalf("o0 evicted at %d", i)
		}
	}
	s := c.Stats()
	if s.Bytes > budget || s.Entries == 0 || s.Evictions == 0 {
		t.Fatalf("%+v: want within %d bytes, with evictions", s, budget)
	}
	if !has("o99") || has("o1") {
		t.Fatal("want the most recent kept and the least recently used evicted")
	}
	// Too large for the cache: not kept.
	in, _ := c.Inspect(object("big", "1", "{}"))
	c.Put(in.KeyFor("crd", 1, "v"), in, make([]byte, budget))
	if _, ok := c.Get(in.KeyFor("crd", 1, "v"), in); ok {
		t.Fatal("an object over a quarter of the budget was cached")
	}
}

func TestNilCache(t *testing.T) {
	c := New(Config{})
	if c != nil {
		t.Fatal("a cache without budget")
	}
	in, ok := c.Inspect(object("a", "1", "{}"))
	c.Put(Key{}, in, []byte("x"))
	if _, hit := c.Get(Key{}, in); ok || hit || c.Stats() != (Stats{}) {
		t.Fatal("a nil cache holds something")
	}
	c.Forget("x")
}

// BenchmarkHit is a lookup that hits: the cost a cached conversion adds.
func BenchmarkHit(b *testing.B) {
	c := New(Config{MaxBytes: DefaultMaxBytes, Component: "test"})
	obj := object("a", "12345", `{"cronSpec":"* * * * */5","image":"registry.example.com/team/my-awesome-cron-image:v1.2.3","replicas":5,"hostPort":"a.example.com:8080"}`)
	in, _ := c.Inspect(obj)
	c.Put(in.KeyFor("crd", 1, "example.com/v1"), in, obj)
	b.ReportAllocs()
	for b.Loop() {
		in, ok := c.Inspect(obj)
		if !ok {
			b.Fatal("not cacheable")
		}
		if _, ok := c.Get(in.KeyFor("crd", 1, "example.com/v1"), in); !ok {
			b.Fatal("miss")
		}
	}
}
