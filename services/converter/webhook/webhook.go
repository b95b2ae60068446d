// Package webhook converts custom resources with their CRD's conversion
// webhook: ConversionReview v1 or v1beta1 over TLS, checked as upstream
// checks it. Beyond upstream, concurrent conversions of the same CRD
// generation between the same versions share one ConversionReview
// (coalescing), and large lists are split into chunks converted in
// parallel.
//
// Coalescing: conversions with the same key (CRD uid, generation, source
// and desired apiVersion) share ConversionReviews, at most one leaving per
// batch window (3.5ms) per key. A conversion that finds its key quiet (no
// batch forming, and no review in flight or none sent within the window)
// is sent at once, so a lone caller never waits. Otherwise it joins the
// batch forming, which leaves one window after the key's previous review:
// no conversion waits longer than the window, and under load the calls stay
// at one per window while the batches grow with the load. A batch that
// reaches MaxBatch objects leaves at once; MaxInflight, when set, caps the
// reviews in flight per key (a batch then also waits for a slot). An object
// several callers of a batch convert (watches of one resource converting
// the same event) is sent once, and an object whose conversion is in
// flight is not sent again: later callers wait for that conversion (and
// convert it themselves if it fails). Results go back to each caller in its
// own order.
//
// Cache: converted objects are kept (package convcache), keyed by the CRD's uid and
// generation, the object's uid and resourceVersion and the desired
// apiVersion, checked against a hash of the input, in an LRU bounded by
// bytes: repeated reads of an object, the watches of a version and a
// write's answer followed by its watch event cost one conversion.
//
// Failures: when a coalesced review comes back Failed (result.status not
// Success), the batch is retried as one review per caller, so only the
// callers whose own objects the webhook rejects get the error — what
// upstream's one review per request gives. Any other failure (transport,
// timeout, HTTP error, malformed review) fails every caller in the batch,
// as each of their own calls would have. A converted object that fails
// the per-object checks fails only the caller it belongs to.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/convcache"
)

var tracer = otel.Tracer("github.com/crdplane/crdplane/services/converter/webhook")

// Converter converts custom resources through their CRD's conversion
// webhook. It is safe for concurrent use.
type Converter struct {
	cfg     Config
	targets *targets

	flights *flights
	cache   *convcache.Cache // nil: no cache

	mu     sync.Mutex
	queues map[batchKey]*queue

	calls   atomic.Int64
	objects atomic.Int64
}

// Stats counts the webhook calls a Converter made.
type Stats struct {
	// Calls is the number of ConversionReviews sent.
	Calls int64
	// Objects is the number of objects sent in them.
	Objects int64
	// CacheHits and CacheMisses count the conversions of objects with a
	// uid and resourceVersion answered from the cache of converted
	// objects, and not.
	CacheHits, CacheMisses int64
	// CacheBytes and CacheEntries are what the cache holds.
	CacheBytes   int64
	CacheEntries int
}

// New returns a Converter.
func New(cfg Config) *Converter {
	cfg = cfg.withDefaults()
	return &Converter{cfg: cfg, targets: newTargets(cfg), queues: map[batchKey]*queue{}, flights: newFlights(),
		cache: convcache.New(convcache.Config{MaxBytes: cfg.CacheBytes, Component: "converter"})}
}

// Stats returns the calls made so far.
func (c *Converter) Stats() Stats {
	cs := c.cache.Stats()
	return Stats{Calls: c.calls.Load(), Objects: c.objects.Load(), CacheHits: cs.Hits, CacheMisses: cs.Misses,
		CacheBytes: cs.Bytes, CacheEntries: cs.Entries}
}

// Forget drops what the Converter keeps for a deleted CRD.
func (c *Converter) Forget(uid string) {
	c.targets.forget(uid)
	c.cache.Forget(uid)
}

// Close closes idle webhook connections.
func (c *Converter) Close() { c.targets.closeIdle() }

// Convert converts objs (JSON objects of crd) to desiredAPIVersion, one of
// crd's versions, with crd's conversion webhook. Objects already at
// desiredAPIVersion are not sent. Errors are Kubernetes Status errors
// (InternalError with upstream's wording), or the context's error.
func (c *Converter) Convert(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, desiredAPIVersion string, objs [][]byte) ([][]byte, error) {
	out, err := c.convert(ctx, crd, desiredAPIVersion, objs)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return nil, err
		}
		// Upstream's converter returns a plain error, which its handlers
		// answer as a 500 with the error's text and no reason (not
		// "Internal error occurred: ...").
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}}
	}
	return out, nil
}

func (c *Converter) convert(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, desired string, objs [][]byte) ([][]byte, error) {
	t := c.targets.get(crd)
	if !t.versions[desired] {
		gv, _ := schema.ParseGroupVersion(desired)
		return nil, fmt.Errorf("request to convert CR to an invalid group/version: %s", gv)
	}
	out := make([][]byte, len(objs))
	// Objects to convert, by source apiVersion (almost always one).
	type group struct {
		from string
		idx  []int
	}
	var groups []*group
	// Cacheable objects not in the cache, by position: stored once converted.
	var keys map[int]convcache.Key
	var inputs map[int]convcache.Input
	for i, o := range objs {
		from := apiVersionOf(o)
		if from == desired {
			out[i] = o
			continue
		}
		if !t.versions[from] {
			gv, _ := schema.ParseGroupVersion(from)
			if len(objs) == 1 {
				return nil, fmt.Errorf("request to convert CR from an invalid group/version: %s", gv)
			}
			return nil, fmt.Errorf("request to convert CR list failed, list index %d has invalid group/version: %s", i, gv)
		}
		if in, ok := c.cache.Inspect(o); ok {
			k := in.KeyFor(t.uid, t.generation, desired)
			if res, hit := c.cache.Get(k, in); hit {
				out[i] = res
				continue
			}
			if keys == nil {
				keys, inputs = map[int]convcache.Key{}, map[int]convcache.Input{}
			}
			keys[i], inputs[i] = k, in
		}
		var g *group
		for _, x := range groups {
			if x.from == from {
				g = x
			}
		}
		if g == nil {
			g = &group{from: from}
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	single := len(objs) == 1
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for gi, g := range groups {
		run := func() {
			sub := make([][]byte, len(g.idx))
			for j, i := range g.idx {
				sub[j] = objs[i]
			}
			key := batchKey{uid: t.uid, generation: t.generation, from: g.from, to: desired}
			res, err := c.convertShared(ctx, t, key, sub, g.idx, single)
			if err != nil {
				errs[gi] = err
				return
			}
			for j, i := range g.idx {
				out[i] = res[j]
				if k, ok := keys[i]; ok {
					c.cache.Put(k, inputs[i], res[j])
				}
			}
		}
		if len(groups) == 1 {
			run()
			break
		}
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// convertShared is convertGroup sharing conversions in flight: objects
// another caller is converting are waited for, and the rest are converted
// here (and shared with callers that come meanwhile).
func (c *Converter) convertShared(ctx context.Context, t *target, key batchKey, objs [][]byte, idx []int, single bool) ([][]byte, error) {
	if c.cfg.BatchWindow < 0 {
		return c.convertGroup(ctx, t, key, objs, idx, single) // upstream's way: nothing shared
	}
	claims := c.flights.claim(key, objs)
	out := make([][]byte, len(objs))
	var lead []int
	for j, cl := range claims {
		if cl.lead {
			lead = append(lead, j)
		}
	}
	if len(lead) > 0 {
		res, err := c.convertGroup(ctx, t, key, pick(objs, lead), pickInts(idx, lead), single)
		for k, j := range lead {
			var r []byte
			if err == nil {
				r = res[k]
			}
			c.flights.land(key, objs[j], claims[j].f, r, err)
		}
		if err != nil {
			return nil, err
		}
		for k, j := range lead {
			out[j] = res[k]
		}
	}
	var retry []int
	for j, cl := range claims {
		if cl.lead {
			continue
		}
		select {
		case <-cl.f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if cl.f.ok {
			out[j] = cl.f.res
		} else {
			retry = append(retry, j) // its leader failed: convert it ourselves
		}
	}
	if len(retry) > 0 {
		res, err := c.convertGroup(ctx, t, key, pick(objs, retry), pickInts(idx, retry), single)
		if err != nil {
			return nil, err
		}
		for k, j := range retry {
			out[j] = res[k]
		}
	}
	return out, nil
}

func pick(objs [][]byte, at []int) [][]byte {
	if len(at) == len(objs) {
		return objs
	}
	out := make([][]byte, len(at))
	for k, j := range at {
		out[k] = objs[j]
	}
	return out
}

func pickInts(idx []int, at []int) []int {
	if len(at) == len(idx) {
		return idx
	}
	out := make([]int, len(at))
	for k, j := range at {
		out[k] = idx[j]
	}
	return out
}

// convertGroup converts objects at one source version; idx are their
// positions in the caller's request (for messages).
func (c *Converter) convertGroup(ctx context.Context, t *target, key batchKey, objs [][]byte, idx []int, single bool) ([][]byte, error) {
	if c.cfg.BatchWindow < 0 || (c.cfg.MaxBatch > 0 && len(objs) >= c.cfg.MaxBatch) {
		return c.chunked(ctx, t, key, objs, idx, single)
	}
	res, err := c.coalesce(ctx, t, key, objs)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(res))
	for j := range res {
		if out[j], err = t.finish(objs[j], res[j], key.from, key.to, idx[j], single); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// review sends one ConversionReview (counted and traced). links are the
// spans of the requests it serves.
func (c *Converter) review(ctx context.Context, t *target, key batchKey, objs [][]byte, links ...trace.Link) ([][]byte, error) {
	c.calls.Add(1)
	c.objects.Add(int64(len(objs)))
	ctx, span := tracer.Start(ctx, "Call conversion webhook", trace.WithLinks(links...), trace.WithAttributes(
		attribute.String("custom-resource-definition", t.crdName),
		attribute.String("desired-api-version", key.to),
		attribute.Int("object-count", len(objs)),
	))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	res, err := t.review(ctx, key.from, key.to, objs)
	if err != nil {
		span.RecordError(err)
	}
	return res, err
}

// chunked converts objs in chunks of MaxBatch objects, up to
// MaxParallelChunks at once; the first failure cancels the rest.
func (c *Converter) chunked(ctx context.Context, t *target, key batchKey, objs [][]byte, idx []int, single bool) ([][]byte, error) {
	size := c.cfg.MaxBatch
	if size <= 0 || size > len(objs) {
		size = len(objs)
	}
	out := make([][]byte, len(objs))
	convert := func(ctx context.Context, off, end int) error {
		res, err := c.review(ctx, t, key, objs[off:end])
		if err != nil {
			return err
		}
		for j := range res {
			if out[off+j], err = t.finish(objs[off+j], res[j], key.from, key.to, idx[off+j], single); err != nil {
				return err
			}
		}
		return nil
	}
	if size == len(objs) {
		if err := convert(ctx, 0, len(objs)); err != nil {
			return nil, err
		}
		return out, nil
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	sem := make(chan struct{}, c.cfg.MaxParallelChunks)
loop:
	for off := 0; off < len(objs); off += size {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		wg.Add(1)
		go func(off, end int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := convert(ctx, off, end); err != nil {
				once.Do(func() { firstErr = err; cancel() })
			}
		}(off, min(off+size, len(objs)))
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// batchKey is what concurrent conversions must share to share a review.
type batchKey struct {
	uid        string
	generation int64
	from, to   string
}

// waiter is one caller's objects in a batch.
type waiter struct {
	arrived time.Time
	objs    [][]byte
	res     [][]byte
	err     error
	done    chan struct{}
	link    trace.Link
}

// queue is the batch forming for one key.
type queue struct {
	key      batchKey
	t        *target
	waiting  []*waiter
	n        int       // objects waiting
	inflight int       // coalesced reviews in flight
	last     time.Time // when the last review left
	timer    *time.Timer
	seq      uint64 // flushes so far; a timer armed before the last flush is stale
}

// coalesce adds objs to the batch of key and waits for its result.
func (c *Converter) coalesce(ctx context.Context, t *target, key batchKey, objs [][]byte) ([][]byte, error) {
	now := time.Now()
	w := &waiter{arrived: now, objs: objs, done: make(chan struct{}), link: trace.LinkFromContext(ctx)}
	c.mu.Lock()
	q := c.queues[key]
	if q == nil {
		q = &queue{key: key, t: t}
		c.queues[key] = q
	}
	var full, due []*waiter
	if c.full(q, len(objs)) && c.slotFree(q) {
		full = c.takeLocked(q) // the batch forming is full: it goes now, w starts the next
	}
	quiet := len(q.waiting) == 0 && (q.inflight == 0 || now.Sub(q.last) >= c.cfg.BatchWindow)
	q.waiting = append(q.waiting, w)
	q.n += len(objs)
	lone := false
	if (quiet || c.full(q, 0)) && c.slotFree(q) {
		// Quiet (a lone caller) or full: go at once.
		due = c.takeLocked(q)
		lone = len(due) == 1
	} else {
		due = c.scheduleLocked(q)
	}
	c.mu.Unlock()
	if full != nil {
		go c.send(context.Background(), q, full)
	}
	if lone {
		// Only w's objects: its own call, made here, ended by its context.
		c.send(ctx, q, due)
	} else if due != nil {
		go c.send(context.Background(), q, due)
	}
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// full reports whether q's batch, with more objects added, would exceed
// MaxBatch (more == 0: whether it holds MaxBatch already).
func (c *Converter) full(q *queue, more int) bool {
	if c.cfg.MaxBatch <= 0 || q.n == 0 {
		return false
	}
	if more == 0 {
		return q.n >= c.cfg.MaxBatch
	}
	return q.n+more > c.cfg.MaxBatch
}

// slotFree reports whether another review of q may leave (MaxInflight).
func (c *Converter) slotFree(q *queue) bool {
	return c.cfg.MaxInflight <= 0 || q.inflight < c.cfg.MaxInflight
}

// scheduleLocked returns q's batch when it is due (a window after the
// previous review left, or full) and a review slot is free, for the caller
// to send; otherwise it is sent when the window passes (a timer, which
// sends it from its own goroutine) or when a review in flight returns
// (send schedules again). c.mu is held.
func (c *Converter) scheduleLocked(q *queue) []*waiter {
	if len(q.waiting) == 0 || !c.slotFree(q) {
		return nil
	}
	wait := c.cfg.BatchWindow - time.Since(q.last)
	if wait <= 0 || c.full(q, 0) {
		return c.takeLocked(q)
	}
	if q.timer != nil {
		return nil
	}
	seq := q.seq
	q.timer = time.AfterFunc(wait, func() {
		var batch []*waiter
		c.mu.Lock()
		if q.seq == seq {
			q.timer = nil
			batch = c.scheduleLocked(q)
		}
		c.mu.Unlock()
		if batch != nil {
			c.send(context.Background(), q, batch)
		}
	})
	return nil
}

// takeLocked takes the waiting batch of q, to be sent with send. c.mu is
// held.
func (c *Converter) takeLocked(q *queue) []*waiter {
	batch := q.waiting
	q.waiting, q.n = nil, 0
	q.seq++
	q.last = time.Now()
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.inflight++
	return batch
}

// send runs one coalesced review (under ctx: a lone caller's own context,
// else a background one, as the review serves several callers) and hands
// each waiter its part.
func (c *Converter) send(ctx context.Context, q *queue, batch []*waiter) {
	objs, pos := batchObjects(batch)
	links := make([]trace.Link, len(batch))
	for i, w := range batch {
		links[i] = w.link
	}
	sent := time.Now()
	res, err := c.review(ctx, q.t, q.key, objs, links...)
	reviewObjects.Observe(float64(len(objs)))
	reviewRequests.Observe(float64(len(batch)))
	reviewDuration.Observe(time.Since(sent).Seconds())
	if c.cfg.Observe != nil {
		rtt := time.Since(sent)
		waits := make([]time.Duration, len(batch))
		for i, w := range batch {
			waits[i] = sent.Sub(w.arrived)
		}
		c.cfg.Observe(waits, rtt)
	}

	// The review slot is free: what queued meanwhile goes when due.
	var next []*waiter
	c.mu.Lock()
	q.inflight--
	if len(q.waiting) > 0 {
		next = c.scheduleLocked(q)
	} else if q.inflight == 0 && c.queues[q.key] == q {
		delete(c.queues, q.key)
	}
	c.mu.Unlock()
	if next != nil {
		go c.send(context.Background(), q, next)
	}

	var failed *failedError
	if err != nil && len(batch) > 1 && errors.As(err, &failed) {
		// Rejected as a whole: find out whose objects the webhook refuses,
		// one review per caller, as upstream would have sent them.
		var wg sync.WaitGroup
		for _, w := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.res, w.err = c.review(context.Background(), q.t, q.key, w.objs, w.link)
				close(w.done)
			}()
		}
		wg.Wait()
		return
	}
	for i, w := range batch {
		if err != nil {
			w.err = err
		} else {
			w.res = make([][]byte, len(w.objs))
			for j, p := range pos[i] {
				w.res[j] = res[p]
			}
		}
		close(w.done)
	}
}

// batchObjects lists the objects of a batch's review, each distinct object
// once (watches of one resource converting the same event, or readers of
// one object, send it once), and where each waiter's objects are in it.
func batchObjects(batch []*waiter) (objs [][]byte, pos [][]int) {
	pos = make([][]int, len(batch))
	if len(batch) == 1 {
		objs = batch[0].objs
		pos[0] = make([]int, len(objs))
		for j := range objs {
			pos[0][j] = j
		}
		return objs, pos
	}
	seen := make(map[string]int, len(batch))
	for i, w := range batch {
		pos[i] = make([]int, len(w.objs))
		for j, o := range w.objs {
			p, ok := seen[string(o)]
			if !ok {
				p = len(objs)
				seen[string(o)] = p
				objs = append(objs, o)
			}
			pos[i][j] = p
		}
	}
	return objs, pos
}
