package soak

// Watches that must see every acknowledged change: each lists, then
// watches from the list's resourceVersion; on a disconnect it resumes from
// the last resourceVersion it saw (events and bookmarks); on 410 Gone (an
// expired resourceVersion, as an answer or an ERROR event) it relists.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type watcher struct {
	name    string
	api     *api
	version string
	query   url.Values // e.g. labelSelector
	shardA  bool       // sees only shard a

	mu sync.Mutex
	// seen: name → resourceVersions it was seen at (events and lists).
	seen    map[string]map[int64]bool
	deleted map[string]bool
	// state: what the watch says exists now (name → resourceVersion).
	state  map[string]int64
	lastRV int64
	// lastHeard: when the watch last knew it was current (an event or a
	// bookmark came, or a list was sent).
	lastHeard time.Time
	// gaps: the revisions a relist skipped (from, to], with when the
	// stream it replaced ended and when the relist was sent.
	gaps []gap

	events, bookmarks, reconnects, relists, errorEvents, outOfOrder int
	lastErr                                                         string
	downSince                                                       time.Time
	down                                                            time.Duration
	ready                                                           chan struct{}
	readyOnce                                                       sync.Once

	// A laggard closes its stream at lagFirst after it starts and then
	// every lagEvery, and stays away lagFor (longer than etcd's compaction
	// retention: its resume should get 410 and relist); no pause starts
	// after lagStop.
	lagFirst, lagFor, lagEvery time.Duration
	lagStop                    time.Time
	lags                       int
}

type gap struct {
	from, to   int64
	streamEnd  time.Time
	relistSent time.Time
}

func newWatcher(name string, a *api, version string, query url.Values, shardA bool) *watcher {
	return &watcher{name: name, api: a, version: version, query: query, shardA: shardA,
		seen: map[string]map[int64]bool{}, deleted: map[string]bool{}, state: map[string]int64{}, ready: make(chan struct{})}
}

func (w *watcher) matches(shard string) bool { return !w.shardA || shard == "a" }

func (w *watcher) observe(name string, rv int64) {
	m := w.seen[name]
	if m == nil {
		m = map[int64]bool{}
		w.seen[name] = m
	}
	m[rv] = true
}

// relist lists the collection (pages of 500) and replaces the state.
func (w *watcher) relist(ctx context.Context) error {
	sent := time.Now()
	items := map[string]int64{}
	var listRV int64
	cont := ""
	for {
		q := url.Values{"limit": {"500"}}
		for k, v := range w.query {
			q[k] = v
		}
		if cont != "" {
			q.Set("continue", cont)
		}
		r := w.api.do(ctx, 60*time.Second, http.MethodGet, collectionPath(w.version)+"?"+q.Encode(), "", nil)
		if r.err != nil || r.status != http.StatusOK {
			return fmt.Errorf("list: %d %v %.200s", r.status, r.err, r.body)
		}
		var lst objList
		if err := json.Unmarshal(r.body, &lst); err != nil {
			return fmt.Errorf("list: %v", err)
		}
		if listRV == 0 {
			listRV = parseRV(lst.Metadata.ResourceVersion)
		}
		for _, it := range lst.Items {
			items[it.Metadata.Name] = it.rv()
		}
		if cont = lst.Metadata.Continue; cont == "" {
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gaps = append(w.gaps, gap{from: w.lastRV, to: listRV, streamEnd: w.lastHeard, relistSent: sent})
	w.lastHeard = sent
	w.state = items
	for n, rv := range items {
		w.observe(n, rv)
	}
	w.lastRV = listRV
	return nil
}

// run watches until ctx ends.
func (w *watcher) run(ctx context.Context) {
	backoff := func(d *time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(*d):
		}
		*d = min(2**d, 2*time.Second)
	}
	needList := true
	var nextLag time.Time
	if w.lagFor > 0 {
		nextLag = time.Now().Add(w.lagFirst)
	}
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		if needList {
			if err := w.relist(ctx); err != nil {
				w.noteErr(err.Error())
				backoff(&pause)
				continue
			}
			needList = false
		}
		w.mu.Lock()
		from := w.lastRV
		w.mu.Unlock()
		q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {strconv.FormatInt(from, 10)}}
		for k, v := range w.query {
			q[k] = v
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.api.host+collectionPath(w.version)+"?"+q.Encode(), nil)
		resp, err := w.api.hc.Do(req)
		if err != nil {
			w.noteErr(err.Error())
			backoff(&pause)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			w.noteErr(fmt.Sprintf("watch: HTTP %d", resp.StatusCode))
			if resp.StatusCode == http.StatusGone {
				needList = true
				w.mu.Lock()
				w.relists++
				w.mu.Unlock()
				continue
			}
			backoff(&pause)
			continue
		}
		w.up()
		w.readyOnce.Do(func() { close(w.ready) })
		var lagTimer *time.Timer
		var lagging atomic.Bool
		if !nextLag.IsZero() && nextLag.Before(w.lagStop) {
			body := resp.Body
			lagTimer = time.AfterFunc(time.Until(nextLag), func() {
				lagging.Store(true)
				body.Close()
			})
		}
		gone := w.stream(resp)
		if lagTimer != nil {
			lagTimer.Stop()
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		if lagging.Load() {
			w.mu.Lock()
			w.lags++
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.lagFor):
			}
			nextLag = nextLag.Add(w.lagEvery)
			continue
		}
		w.mu.Lock()
		w.reconnects++
		w.downSince = time.Now()
		if gone {
			w.relists++
		}
		w.mu.Unlock()
		if gone {
			needList = true
		}
		pause = 100 * time.Millisecond
	}
}

func (w *watcher) noteErr(s string) {
	w.mu.Lock()
	w.lastErr = s
	if w.downSince.IsZero() {
		w.downSince = time.Now()
	}
	w.mu.Unlock()
}

func (w *watcher) up() {
	w.mu.Lock()
	if !w.downSince.IsZero() {
		w.down += time.Since(w.downSince)
		w.downSince = time.Time{}
	}
	w.mu.Unlock()
}

// stream reads events until the stream ends; it reports whether it ended
// with a 410 ERROR event.
func (w *watcher) stream(resp *http.Response) bool {
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return false
		}
		if ev.Type == "ERROR" {
			var st struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			w.mu.Lock()
			w.errorEvents++
			w.lastErr = fmt.Sprintf("ERROR event %d %s", st.Code, st.Message)
			w.mu.Unlock()
			return st.Code == http.StatusGone
		}
		var o objMeta
		if err := json.Unmarshal(ev.Object, &o); err != nil {
			continue
		}
		rv := o.rv()
		w.mu.Lock()
		w.lastHeard = time.Now()
		switch ev.Type {
		case "BOOKMARK":
			w.bookmarks++
			if rv > w.lastRV {
				w.lastRV = rv
			}
		case "ADDED", "MODIFIED", "DELETED":
			w.events++
			if rv <= w.lastRV {
				w.outOfOrder++
			} else {
				w.lastRV = rv
			}
			n := o.Metadata.Name
			if ev.Type == "DELETED" {
				w.deleted[n] = true
				delete(w.state, n)
			} else {
				w.observe(n, rv)
				w.state[n] = rv
			}
		}
		w.mu.Unlock()
	}
}

func (w *watcher) last() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastRV
}

// watchCheck is the verdict on one watcher.
type watchCheck struct {
	expected, seen, byRelist, missed int
	missedNotes                      []string
	diverged                         int
	divergedNotes                    []string
}

// check compares what w saw with the acknowledged writes and with the
// final state (name → resourceVersion, objects of the soak only).
func (w *watcher) check(acks []ack, final map[string]objMeta) watchCheck {
	w.mu.Lock()
	defer w.mu.Unlock()
	var c watchCheck
	inGap := func(rv int64) bool {
		for _, g := range w.gaps {
			if rv > g.from && rv <= g.to {
				return true
			}
		}
		return false
	}
	// A delete's revision is not in its answer: it is excused when a
	// relist replaced a stream whose last event came before the delete was
	// answered, and was sent after the delete began.
	deleteInGap := func(a ack) bool {
		for _, g := range w.gaps[1:] {
			if g.streamEnd.Before(a.end) && g.relistSent.After(a.start) {
				return true
			}
		}
		return false
	}
	for _, a := range acks {
		if !w.matches(a.shard) {
			continue
		}
		c.expected++
		switch {
		case a.op == "delete" && w.deleted[a.name], a.op != "delete" && w.seen[a.name][a.rv]:
			c.seen++
		case a.op != "delete" && inGap(a.rv), a.op == "delete" && len(w.gaps) > 1 && deleteInGap(a):
			c.byRelist++
		default:
			c.missed++
			if len(c.missedNotes) < 5 {
				c.missedNotes = append(c.missedNotes, fmt.Sprintf("%s %s rv %d (acknowledged %s)", a.op, a.name, a.rv, a.end.Format("15:04:05.000")))
			}
		}
	}
	// Converged: the same objects at the same resourceVersions.
	for name, o := range final {
		if w.shardA && o.Metadata.Labels["shard"] != "a" {
			continue
		}
		if rv, ok := w.state[name]; !ok || rv != o.rv() {
			c.diverged++
			if len(c.divergedNotes) < 5 {
				c.divergedNotes = append(c.divergedNotes, fmt.Sprintf("%s: watch has rv %d (present %v), final read %d", name, rv, ok, o.rv()))
			}
		}
	}
	for name, rv := range w.state {
		if _, ok := final[name]; !ok {
			c.diverged++
			if len(c.divergedNotes) < 5 {
				c.divergedNotes = append(c.divergedNotes, fmt.Sprintf("%s: watch has it at rv %d, final read has not", name, rv))
			}
		}
	}
	return c
}
