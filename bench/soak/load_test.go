package soak

// The load: good requests (mixed CRUD) and malformed ones at a fixed total
// rate, every request recorded; the objects' acknowledged states.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// obj is one object of the load. Only the goroutine that holds it (busy)
// writes to it, so its acknowledged state is a sequence: the final read
// must show the last acknowledged write. A write whose outcome is unknown
// (a transport error or a 5xx: it may have been stored) retires the
// object: nothing writes it again, and the final read may show either its
// last acknowledged state or that write's.
type obj struct {
	name     string
	shard    string
	hostPort string
	replicas int

	// Acknowledged state.
	acked   bool // a create was acknowledged
	uid     string
	exists  bool
	image   string
	rv      string
	deleted bool // a delete was acknowledged

	pending *pendingWrite
	busy    bool
	retired bool
}

type pendingWrite struct {
	op     string
	exists bool   // state if it was applied
	image  string // content if it was applied and the object exists
}

// ack is one acknowledged write (create/update/patch/delete) the watches
// must show.
type ack struct {
	name  string
	shard string
	op    string
	rv    int64 // 0 for a delete: its answer carries the object as it was
	start time.Time
	end   time.Time
}

// rec is one request of the load.
type rec struct {
	start  time.Time
	dur    time.Duration
	op     string // good: create, get, list, update, patch, delete; bad: its class
	good   bool
	status int    // 0: transport error
	errK   string // transport error kind
	// bad requests: answered as expected.
	expected bool
	// good requests: the answer contradicts the acknowledged state (a
	// get or list without an acknowledged write).
	stale bool
}

type load struct {
	api    *api // good requests
	bad    *api // malformed requests
	rate   float64
	badPct float64
	maxObj int

	mu      sync.Mutex
	live    []*obj // acknowledged, existing, not retired
	objs    []*obj // every object a create was sent for
	acks    []ack
	recs    []rec
	skipped int // ticks with too many requests in flight

	seq      atomic.Int64
	maxRV    atomic.Int64
	inflight chan struct{}
	wg       sync.WaitGroup
	// bombTarget: the object the malformed patches and reads aim at
	// (never written by the good load).
	bombTarget string
	runID      string
	staleNotes []string
	classes    []badClass
}

func newLoad(good, bad *api, rate, badPct float64) *load {
	l := &load{api: good, bad: bad, rate: rate, badPct: badPct, maxObj: 400,
		inflight: make(chan struct{}, 512), runID: fmt.Sprintf("%04x", rand.Uint32()&0xffff)}
	l.classes = l.badClasses()
	return l
}

const reqTimeout = 15 * time.Second

// run sends requests at l.rate until ctx ends, then waits for the ones in
// flight.
func (l *load) run(ctx context.Context) {
	// Request i is due at t0 + i/rate: a late scheduler catches up, so the
	// count is rate × duration.
	t0 := time.Now()
	deadline, _ := ctx.Deadline()
	for i := 0; ; i++ {
		due := t0.Add(time.Duration(float64(i) * float64(time.Second) / l.rate))
		if !deadline.IsZero() && !due.Before(deadline) {
			l.wg.Wait()
			return
		}
		select {
		case <-ctx.Done():
			l.wg.Wait()
			return
		case <-time.After(time.Until(due)):
		}
		select {
		case l.inflight <- struct{}{}:
		default:
			l.mu.Lock()
			l.skipped++
			l.mu.Unlock()
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer func() { <-l.inflight }()
			if rand.Float64() < l.badPct {
				l.malformed()
			} else {
				l.goodOp()
			}
		}()
	}
}

func (l *load) record(r rec) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *load) noteRV(rv string) {
	n := parseRV(rv)
	for {
		cur := l.maxRV.Load()
		if n <= cur || l.maxRV.CompareAndSwap(cur, n) {
			return
		}
	}
}

// acquire takes a random idle live object (nil if none).
func (l *load) acquire() *obj {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range 8 {
		if len(l.live) == 0 {
			return nil
		}
		o := l.live[rand.IntN(len(l.live))]
		if !o.busy {
			o.busy = true
			return o
		}
	}
	return nil
}

func (l *load) release(o *obj) {
	l.mu.Lock()
	o.busy = false
	l.mu.Unlock()
}

func (l *load) removeLive(o *obj) {
	if i := indexOf(l.live, o); i >= 0 {
		l.live[i] = l.live[len(l.live)-1]
		l.live = l.live[:len(l.live)-1]
	}
}

func indexOf(s []*obj, o *obj) int {
	for i, x := range s {
		if x == o {
			return i
		}
	}
	return -1
}

func randVersion() string {
	if rand.IntN(2) == 0 {
		return storageVersion
	}
	return servedVersion
}

// goodOp picks an operation: creates 15%, deletes 12%, gets 20%, lists
// 10%, updates 21%, merge patches 22%; creates turn into deletes above
// maxObj objects, and the rest into creates below 20.
func (l *load) goodOp() {
	l.mu.Lock()
	n := len(l.live)
	l.mu.Unlock()
	p := rand.IntN(100)
	var op string
	switch {
	case p < 15:
		op = "create"
	case p < 27:
		op = "delete"
	case p < 47:
		op = "get"
	case p < 57:
		op = "list"
	case p < 78:
		op = "update"
	default:
		op = "patch"
	}
	if op == "create" && n >= l.maxObj {
		op = "delete"
	}
	if op != "create" && op != "list" && n < 20 {
		op = "create"
	}
	if op == "create" {
		l.create()
		return
	}
	if op == "list" {
		l.list()
		return
	}
	o := l.acquire()
	if o == nil {
		l.create()
		return
	}
	defer l.release(o)
	switch op {
	case "get":
		l.get(o)
	case "update":
		l.update(o)
	case "patch":
		l.patch(o)
	case "delete":
		l.delete(o)
	}
}

// outcome classifies an answer to a write: ok (2xx), rejected (4xx: not
// applied), unknown (5xx or no answer: maybe applied).
func outcome(r response) string {
	switch {
	case r.err == nil && r.status >= 200 && r.status < 300:
		return "ok"
	case r.err == nil && r.status >= 400 && r.status < 500:
		return "rejected"
	default:
		return "unknown"
	}
}

func (l *load) finish(op string, start time.Time, r response, stale bool) {
	l.record(rec{start: start, dur: r.dur, op: op, good: true, status: r.status, errK: errKind(r.err), stale: stale})
}

func (l *load) nextImage() string { return fmt.Sprintf("img-%d", l.seq.Add(1)) }

func (l *load) create() {
	i := l.seq.Add(1)
	o := &obj{
		name:     fmt.Sprintf("soak-%s-%d", l.runID, i),
		shard:    []string{"a", "b"}[i%2],
		hostPort: fmt.Sprintf("host-%d:%d", i, 1000+i%9000),
		replicas: 1 + int(i%10),
		busy:     true,
	}
	image := l.nextImage()
	l.mu.Lock()
	l.objs = append(l.objs, o)
	l.mu.Unlock()
	v := randVersion()
	start := time.Now()
	r := l.api.do(context.Background(), reqTimeout, http.MethodPost, collectionPath(v), "application/json",
		objectBody(v, o.name, o.shard, image, o.hostPort, o.replicas, ""))
	var stale bool
	l.mu.Lock()
	defer l.mu.Unlock()
	switch outcome(r) {
	case "ok":
		var m objMeta
		if json.Unmarshal(r.body, &m) != nil || m.Metadata.UID == "" || m.Spec.Image != image {
			stale = true
		}
		o.acked, o.exists, o.uid, o.image, o.rv = true, true, m.Metadata.UID, image, m.Metadata.ResourceVersion
		l.noteRV(o.rv)
		l.acks = append(l.acks, ack{name: o.name, shard: o.shard, op: "create", rv: m.rv(), start: start, end: start.Add(r.dur)})
		l.live = append(l.live, o)
	case "rejected":
		o.retired = true // never existed
	default:
		o.pending = &pendingWrite{op: "create", exists: true, image: image}
		o.retired = true
	}
	o.busy = false
	l.recs = append(l.recs, rec{start: start, dur: r.dur, op: "create", good: true, status: r.status, errK: errKind(r.err), stale: stale})
}

func (l *load) get(o *obj) {
	v := randVersion()
	start := time.Now()
	r := l.api.do(context.Background(), reqTimeout, http.MethodGet, objectPath(v, o.name), "", nil)
	stale := false
	if r.err == nil && r.status == http.StatusOK {
		var m objMeta
		if json.Unmarshal(r.body, &m) != nil || m.Metadata.UID != o.uid || m.Spec.Image != o.image || m.Metadata.ResourceVersion != o.rv {
			stale = true
			l.noteStale(fmt.Sprintf("get %s at %s: uid %s image %s rv %s; acknowledged uid %s image %s rv %s",
				o.name, v, m.Metadata.UID, m.Spec.Image, m.Metadata.ResourceVersion, o.uid, o.image, o.rv))
		}
	} else if r.err == nil && r.status == http.StatusNotFound {
		stale = true
		l.noteStale(fmt.Sprintf("get %s at %s: 404, acknowledged at rv %s", o.name, v, o.rv))
	}
	l.finish("get", start, r, stale)
}

func (l *load) noteStale(s string) {
	l.mu.Lock()
	if len(l.staleNotes) < 20 {
		l.staleNotes = append(l.staleNotes, s)
	}
	l.mu.Unlock()
}

func (l *load) list() {
	v := randVersion()
	q := url.Values{"limit": {"100"}}
	if rand.IntN(2) == 0 {
		q.Set("labelSelector", "shard=a")
	}
	start := time.Now()
	r := l.api.do(context.Background(), reqTimeout, http.MethodGet, collectionPath(v)+"?"+q.Encode(), "", nil)
	stale := false
	if r.err == nil && r.status == http.StatusOK {
		var lst objList
		if json.Unmarshal(r.body, &lst) != nil {
			stale = true
		}
		for _, it := range lst.Items {
			if q.Get("labelSelector") != "" && it.Metadata.Labels["shard"] != "a" {
				stale = true
				l.noteStale(fmt.Sprintf("list with shard=a returned %s of shard %q", it.Metadata.Name, it.Metadata.Labels["shard"]))
			}
			if it.APIVersion != group+"/"+v && it.APIVersion != "" {
				stale = true
			}
		}
	}
	l.finish("list", start, r, stale)
}

// write applies the outcome of an update or a patch to o.
func (l *load) write(op string, o *obj, image string, start time.Time, r response) {
	stale := false
	l.mu.Lock()
	switch outcome(r) {
	case "ok":
		var m objMeta
		if json.Unmarshal(r.body, &m) != nil || m.Spec.Image != image || m.Metadata.UID != o.uid {
			stale = true
		}
		o.image, o.rv = image, m.Metadata.ResourceVersion
		l.noteRV(o.rv)
		l.acks = append(l.acks, ack{name: o.name, shard: o.shard, op: op, rv: m.rv(), start: start, end: start.Add(r.dur)})
	case "rejected":
	default:
		o.pending = &pendingWrite{op: op, exists: true, image: image}
		o.retired = true
		l.removeLive(o)
	}
	l.mu.Unlock()
	l.finish(op, start, r, stale)
}

func (l *load) update(o *obj) {
	v := randVersion()
	image := l.nextImage()
	start := time.Now()
	r := l.api.do(context.Background(), reqTimeout, http.MethodPut, objectPath(v, o.name), "application/json",
		objectBody(v, o.name, o.shard, image, o.hostPort, o.replicas, o.rv))
	l.write("update", o, image, start, r)
}

func (l *load) patch(o *obj) {
	v := randVersion()
	image := l.nextImage()
	start := time.Now()
	r := l.api.do(context.Background(), reqTimeout, http.MethodPatch, objectPath(v, o.name), "application/merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"image":%q}}`, image))
	l.write("patch", o, image, start, r)
}

func (l *load) delete(o *obj) {
	v := randVersion()
	start := time.Now()
	r := l.api.do(context.Background(), reqTimeout, http.MethodDelete, objectPath(v, o.name), "", nil)
	l.mu.Lock()
	switch outcome(r) {
	case "ok":
		o.exists, o.deleted = false, true
		l.removeLive(o)
		l.acks = append(l.acks, ack{name: o.name, shard: o.shard, op: "delete", start: start, end: start.Add(r.dur)})
	case "rejected":
	default:
		o.pending = &pendingWrite{op: "delete", exists: false}
		o.retired = true
		l.removeLive(o)
	}
	l.mu.Unlock()
	l.finish("delete", start, r, false)
}

// Malformed requests: each class and the answer it must get (upstream's).
type badClass struct {
	name   string
	expect string // for the tables
	send   func(l *load) response
	ok     func(r response) bool
}

func statusIs(code int) func(response) bool {
	return func(r response) bool { return r.err == nil && r.status == code }
}

var (
	oversizedBody []byte
	copyBomb      string
)

func init() {
	// 3 MiB + 1 KiB of JSON: over the gateway's (kube-apiserver's)
	// --max-request-body-bytes.
	oversizedBody = []byte(`{"apiVersion":"soak.crdplane.io/v1beta1","kind":"SoakObject","metadata":{"name":"soak-oversized"},"spec":{"image":"x","data":"` +
		strings.Repeat("z", 3<<20+1024) + `"}}`)
	// CVE-2019-1002100's shape: a value, then copies of the spec into
	// itself, doubling it each time (2^24 KiB if nothing stopped it).
	ops := []string{`{"op":"add","path":"/spec/bomb","value":"` + strings.Repeat("b", 1024) + `"}`}
	for i := range 24 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/spec","path":"/spec/c%d"}`, i))
	}
	copyBomb = "[" + strings.Join(ops, ",") + "]"
}

func (l *load) badClasses() []badClass {
	post := func(body string) func(l *load) response {
		return func(l *load) response {
			return l.bad.do(context.Background(), reqTimeout, http.MethodPost, collectionPath(storageVersion), "application/json", []byte(body))
		}
	}
	return []badClass{
		{name: "bad JSON (truncated)", expect: "400", ok: statusIs(400),
			send: post(`{"apiVersion":"soak.crdplane.io/v1beta1","kind":"SoakObject","metadata":{"name":"soak-bad-`)},
		{name: "bad JSON (not JSON)", expect: "400", ok: statusIs(400),
			send: post(`this is not json`)},
		{name: "schema violation (replicas 15)", expect: "422", ok: statusIs(422),
			send: func(l *load) response {
				return l.bad.do(context.Background(), reqTimeout, http.MethodPost, collectionPath(servedVersion), "application/json",
					objectBody(servedVersion, fmt.Sprintf("soak-invalid-%d", l.seq.Add(1)), "a", "x", "h:1", 15, ""))
			}},
		{name: "schema violation (cronSpec, port)", expect: "422", ok: statusIs(422),
			send: func(l *load) response {
				b := objectBody(servedVersion, fmt.Sprintf("soak-invalid-%d", l.seq.Add(1)), "a", "x", "h:notaport", 1, "")
				b = []byte(strings.Replace(string(b), `"*/5 * * * *"`, `"every minute"`, 1))
				return l.bad.do(context.Background(), reqTimeout, http.MethodPost, collectionPath(servedVersion), "application/json", b)
			}},
		{name: "JSON-patch copy bomb", expect: "422", ok: statusIs(422),
			send: func(l *load) response {
				return l.bad.do(context.Background(), reqTimeout, http.MethodPatch, objectPath(storageVersion, l.bombTarget), "application/json-patch+json", []byte(copyBomb))
			}},
		{name: "oversized body (3 MiB + 1 KiB)", expect: "413", ok: statusIs(413),
			send: func(l *load) response {
				return l.bad.do(context.Background(), reqTimeout, http.MethodPost, collectionPath(storageVersion), "application/json", oversizedBody)
			}},
		{name: "invalid label selector", expect: "400", ok: statusIs(400),
			send: func(l *load) response {
				return l.bad.do(context.Background(), reqTimeout, http.MethodGet, collectionPath(storageVersion)+"?labelSelector="+url.QueryEscape("shard in (a"), "", nil)
			}},
		{name: "unsupported field selector", expect: "400", ok: statusIs(400),
			send: func(l *load) response {
				return l.bad.do(context.Background(), reqTimeout, http.MethodGet, collectionPath(storageVersion)+"?fieldSelector="+url.QueryEscape("spec.image=x"), "", nil)
			}},
		{name: "future resourceVersion (get)", expect: "504 Too large resource version (upstream, after 3s)",
			ok: func(r response) bool {
				return r.err == nil && r.status == http.StatusGatewayTimeout && strings.Contains(string(r.body), "Too large resource version")
			},
			send: func(l *load) response {
				rv := l.maxRV.Load() + 1_000_000_000
				return l.bad.do(context.Background(), reqTimeout, http.MethodGet, objectPath(storageVersion, l.bombTarget)+"?resourceVersion="+fmt.Sprint(rv), "", nil)
			}},
	}
}

func (l *load) malformed() {
	c := l.classes[rand.IntN(len(l.classes))]
	start := time.Now()
	r := c.send(l)
	l.record(rec{start: start, dur: r.dur, op: c.name, status: r.status, errK: errKind(r.err), expected: c.ok(r)})
}
