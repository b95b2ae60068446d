package registry

import (
	"sync"
	"time"
)

// queue is a work queue of keys: a key is queued at most once, and is not
// handed to two workers at once (a key added while it is processed is
// processed again afterwards). Failed keys come back with exponential
// backoff.
type queue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	items      []string
	queued     map[string]bool
	processing map[string]bool
	dirty      map[string]bool // added while processing
	failures   map[string]int
	shutdown   bool
}

func newQueue() *queue {
	q := &queue{queued: map[string]bool{}, processing: map[string]bool{}, dirty: map[string]bool{}, failures: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add queues key.
func (q *queue) add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	if q.queued[key] {
		return
	}
	q.queued[key] = true
	q.items = append(q.items, key)
	q.cond.Signal()
}

// addAfter queues key after d.
func (q *queue) addAfter(key string, d time.Duration) {
	if d <= 0 {
		q.add(key)
		return
	}
	time.AfterFunc(d, func() { q.add(key) })
}

// retry queues key again after a backoff that grows with its failures.
func (q *queue) retry(key string) {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := 5 * time.Millisecond << min(n, 12) // up to ~20s
	q.addAfter(key, d)
}

// forget resets key's failure count.
func (q *queue) forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// get waits for a key; ok is false once the queue shut down.
func (q *queue) get() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return "", false
	}
	key, q.items = q.items[0], q.items[1:]
	delete(q.queued, key)
	q.processing[key] = true
	return key, true
}

// done marks key processed, queueing it again if it was added meanwhile.
func (q *queue) done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] {
		delete(q.dirty, key)
		if !q.queued[key] && !q.shutdown {
			q.queued[key] = true
			q.items = append(q.items, key)
			q.cond.Signal()
		}
	}
}

// stop wakes every waiting worker and drops further work.
func (q *queue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}
