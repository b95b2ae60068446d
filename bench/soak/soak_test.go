// Package soak is a soak benchmark of the docker compose deployment
// (deploy/compose) under faults (issue 19):
//
//   - a fixed request rate (SOAK_RATE, 50 req/s) of mixed CRUD on a custom
//     resource with webhook conversion (create, get, list, update with
//     resourceVersion, merge patch, delete; half of them at the version the
//     converter replicas convert to) and malformed requests (SOAK_BAD,
//     10%: bad JSON, schema violations, a JSON-patch copy bomb, an
//     oversized body, invalid selectors, a future resourceVersion), each of
//     which must get upstream's answer;
//   - four watches (at either version, with and without a label
//     selector) that must see every acknowledged change: they resume from
//     their last resourceVersion on a disconnect and relist on 410 Gone;
//     and a laggard that stays away SOAK_LAG_PAUSE (11m, beyond etcd's
//     compaction retention) so that its resume gets the 410;
//   - every SOAK_KILL_INTERVAL (2m, the first at half of it) one replica of
//     a tier is killed (docker kill, SIGKILL) in rotation: gateway,
//     registry, a validator, a converter, a storage replica, the etcd
//     leader; docker kill marks a container stopped by hand, so its restart
//     policy does not apply: it is started again after SOAK_RESTART_DELAY
//     (1s), as deploy/compose/test does;
//   - at the end: 0 acknowledged writes lost (the final read shows every
//     acknowledged create, update, patch and delete: present with the last
//     acknowledged content, deleted ones absent), no container restarted or
//     exited other than the killed ones, the watches complete and
//     converged; latency (p50/p99 per minute and overall) and error counts
//     by status of the good requests, with the errors at a kill counted
//     apart.
//
// The summary table goes to stdout and to SOAK_RESULTS (default
// bench/soak/results-<date>.md). `make soak` runs it through run.sh (its
// own compose project, always removed); without CRDPLANE_SOAK=1 it is
// skipped. SOAK_DURATION defaults to 30m.
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type config struct {
	duration     time.Duration
	rate         float64
	badPct       float64
	killInterval time.Duration
	restartDelay time.Duration
	lagPause     time.Duration
	results      string
}

func envDuration(t *testing.T, key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return d
}

func envFloat(t *testing.T, key string, def float64) float64 {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		t.Fatalf("%s=%q: not a number", key, v)
	}
	return f
}

// kill is one fault: a container killed and started again.
type kill struct {
	n          int
	tier       string
	container  string
	note       string // "leader" for etcd
	at         time.Time
	started    time.Time // docker start done (or the restart policy's)
	recovered  time.Time // healthy again
	restartErr string
}

func (k kill) window() (time.Time, time.Time) {
	end := k.recovered
	if end.IsZero() {
		end = k.started.Add(time.Minute)
	}
	// Requests in flight at the kill, and those until 10s after it serves
	// again (clients re-resolve and reconnect).
	return k.at.Add(-reqTimeout), end.Add(10 * time.Second)
}

var tiers = []string{"gateway", "registry", "validator", "converter", "storage", "etcd"}

func TestSoak(t *testing.T) {
	if os.Getenv("CRDPLANE_SOAK") != "1" {
		t.Skip("set CRDPLANE_SOAK=1 (make soak) to run the soak benchmark against docker compose")
	}
	cfg := config{
		duration:     envDuration(t, "SOAK_DURATION", 30*time.Minute),
		rate:         envFloat(t, "SOAK_RATE", 50),
		badPct:       envFloat(t, "SOAK_BAD", 0.10),
		killInterval: envDuration(t, "SOAK_KILL_INTERVAL", 2*time.Minute),
		restartDelay: envDuration(t, "SOAK_RESTART_DELAY", time.Second),
		lagPause:     envDuration(t, "SOAK_LAG_PAUSE", 11*time.Minute),
		results:      os.Getenv("SOAK_RESULTS"),
	}
	if cfg.results == "" {
		cfg.results = "results-" + time.Now().Format("2006-01-02-1504") + ".md"
	}
	if cfg.rate <= 0 {
		t.Fatal("SOAK_RATE must be positive")
	}
	began := time.Now()
	loadAvgStart := loadAvg()

	s := newStack(t)
	ca := s.webhookPKI()
	s.MustUp()
	restCfg, err := loadConfig(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := newAPI(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitReady(t, admin, 3*time.Minute)
	if err := s.waitAllHealthy(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := installCRD(ctx, admin, ca); err != nil {
		t.Fatal(err)
	}
	t.Logf("stack up, CRD established in %s", time.Since(began).Round(time.Second))

	good, err := newAPI(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := newAPI(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	l := newLoad(good, bad, cfg.rate, cfg.badPct)
	l.bombTarget = "soak-target-" + l.runID
	if r := admin.do(ctx, reqTimeout, http.MethodPost, collectionPath(storageVersion), "application/json",
		objectBody(storageVersion, l.bombTarget, "b", "target", "target:1", 1, "")); r.status != http.StatusCreated {
		t.Fatalf("create %s: %d %v %s", l.bombTarget, r.status, r.err, r.body)
	}

	cw := newCrashWatch(s)
	if err := cw.baseline(); err != nil {
		t.Fatal(err)
	}

	// Watches, each on connections of its own.
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	var watchers []*watcher
	for _, spec := range []struct {
		name    string
		version string
		query   url.Values
		shardA  bool
	}{
		{name: "namespace, " + storageVersion, version: storageVersion},
		{name: "namespace, " + servedVersion + " (converted)", version: servedVersion},
		{name: "namespace, shard=a selector", version: storageVersion, query: url.Values{"labelSelector": {"shard=a"}}, shardA: true},
		{name: "namespace, " + servedVersion + ", shard=a", version: servedVersion, query: url.Values{"labelSelector": {"shard=a"}}, shardA: true},
	} {
		a, err := newAPI(restCfg)
		if err != nil {
			t.Fatal(err)
		}
		w := newWatcher(spec.name, a, spec.version, spec.query, spec.shardA)
		watchers = append(watchers, w)
	}
	// The laggard: a fifth watch that goes away for SOAK_LAG_PAUSE (11m,
	// beyond etcd's 5m compaction retention) 30s in and every pause + 4m,
	// when the run is long enough to come back before the end.
	lagFirst := 30 * time.Second
	if cfg.lagPause > 0 && lagFirst+cfg.lagPause+time.Minute <= cfg.duration {
		a, err := newAPI(restCfg)
		if err != nil {
			t.Fatal(err)
		}
		w := newWatcher(fmt.Sprintf("namespace, %s, away %s every %s", storageVersion, cfg.lagPause, cfg.lagPause+4*time.Minute), a, storageVersion, nil, false)
		w.lagFirst, w.lagFor, w.lagEvery = lagFirst, cfg.lagPause, cfg.lagPause+4*time.Minute
		w.lagStop = time.Now().Add(cfg.duration - cfg.lagPause - time.Minute)
		watchers = append(watchers, w)
	}
	for _, w := range watchers {
		go w.run(wctx)
	}
	for _, w := range watchers {
		select {
		case <-w.ready:
		case <-time.After(time.Minute):
			t.Fatalf("watch %s not established: %s", w.name, w.lastErr)
		}
	}

	// Load, faults and the crash monitor.
	t0 := time.Now()
	end := t0.Add(cfg.duration)
	lctx, stopLoad := context.WithDeadline(ctx, end)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		l.run(lctx)
		close(loadDone)
	}()

	var kmu sync.Mutex
	var kills []kill
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		perTier := map[string]int{}
		for k := 0; ; k++ {
			at := t0.Add(cfg.killInterval/2 + time.Duration(k)*cfg.killInterval)
			if !at.Before(end) {
				return
			}
			select {
			case <-lctx.Done():
				return
			case <-time.After(time.Until(at)):
			}
			tier := tiers[k%len(tiers)]
			kl := kill{n: k + 1, tier: tier}
			service := tier
			if tier == "etcd" {
				kl.container, _ = s.EtcdLeader(30 * time.Second)
				kl.note = "leader"
				all, _ := s.AllContainers()
				for n, svc := range all {
					if n == kl.container {
						service = svc
					}
				}
			} else if cs, _ := s.Containers(tier); len(cs) > 0 {
				kl.container = cs[perTier[tier]%len(cs)]
			}
			perTier[tier]++
			if kl.container == "" {
				kl.restartErr = "no container found"
				kmu.Lock()
				kills = append(kills, kl)
				kmu.Unlock()
				continue
			}
			cw.beginFault(kl.container)
			kl.at = time.Now()
			if _, err := s.Docker("kill", kl.container); err != nil {
				kl.restartErr = err.Error()
			}
			time.Sleep(cfg.restartDelay)
			if st, err := s.Inspect(kl.container); err == nil && st[kl.container].State.Running {
				kl.note = strings.TrimSpace(kl.note + " restarted by its restart policy")
			} else if _, err := s.Docker("start", kl.container); err != nil {
				kl.restartErr = err.Error()
			}
			kl.started = time.Now()
			if err := s.waitRecovered(kl.container, service, 3*time.Minute); err != nil {
				kl.restartErr = err.Error()
			} else {
				kl.recovered = time.Now()
			}
			cw.endFault(kl.container)
			t.Logf("kill %d at %s: %s %s %s, serving again %s after the kill %s", kl.n, kl.at.Sub(t0).Round(time.Second), tier, kl.container, kl.note,
				kl.recovered.Sub(kl.at).Round(100*time.Millisecond), kl.restartErr)
			kmu.Lock()
			kills = append(kills, kl)
			kmu.Unlock()
		}
	}()
	go func() {
		for {
			select {
			case <-loadDone:
				return
			case <-time.After(10 * time.Second):
			}
			for _, c := range cw.check() {
				t.Logf("unexpected: %s", c)
			}
		}
	}()
	// Progress, once a minute.
	go func() {
		for m := 1; ; m++ {
			select {
			case <-loadDone:
				return
			case <-time.After(time.Until(t0.Add(time.Duration(m) * time.Minute))):
			}
			l.mu.Lock()
			n, live, acked := len(l.recs), len(l.live), len(l.acks)
			l.mu.Unlock()
			t.Logf("minute %d: %d requests, %d acknowledged writes, %d live objects", m, n, acked, live)
		}
	}()

	<-loadDone
	<-faultsDone
	loadEnd := time.Now()
	t.Logf("load done: %d requests in %s", len(l.recs), loadEnd.Sub(t0).Round(time.Second))

	// Settle: everything serves, then a fence write every watch must see.
	if err := s.waitAllHealthy(3 * time.Minute); err != nil {
		t.Error(err)
	}
	waitReady(t, admin, 2*time.Minute)
	fenceRV := fence(t, admin, l.runID)
	for _, w := range watchers {
		deadline := time.Now().Add(2 * time.Minute)
		for w.last() < fenceRV && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if w.last() < fenceRV {
			t.Errorf("watch %s did not reach the fence (rv %d) in 2m: at %d, last error %s", w.name, fenceRV, w.last(), w.lastErr)
		}
	}
	stopWatches()

	final := finalRead(t, admin)
	for _, c := range cw.check() {
		t.Logf("unexpected: %s", c)
	}
	v := verify(t, admin, l, final)

	crashes, crashLogs := cw.all()
	rep := report{cfg: cfg, t0: t0, loadEnd: loadEnd, began: began, load: l, kills: kills, verify: v,
		crashes: crashes, crashLogs: crashLogs, watchers: watchers, final: final, loadAvgStart: loadAvgStart, loadAvgEnd: loadAvg()}
	md := rep.markdown()
	fmt.Println(md)
	if err := os.WriteFile(cfg.results, []byte(md), 0o644); err != nil {
		t.Errorf("write %s: %v", cfg.results, err)
	} else {
		t.Logf("summary written to %s", cfg.results)
	}
	for _, f := range rep.failures {
		t.Error(f)
	}
}

func waitReady(t *testing.T, a *api, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := a.do(context.Background(), 5*time.Second, http.MethodGet, "/readyz", "", nil)
		if r.err == nil && r.status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway is not ready: %d %v %s", r.status, r.err, r.body)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fence creates an object every watch sees and returns its revision.
func fence(t *testing.T, a *api, runID string) int64 {
	t.Helper()
	for i := 0; i < 60; i++ {
		name := fmt.Sprintf("soak-fence-%s-%d", runID, i)
		r := a.do(context.Background(), reqTimeout, http.MethodPost, collectionPath(storageVersion), "application/json",
			objectBody(storageVersion, name, "a", "fence", "fence:1", 1, ""))
		if r.status == http.StatusCreated {
			var m objMeta
			_ = json.Unmarshal(r.body, &m)
			return m.rv()
		}
		time.Sleep(time.Second)
	}
	t.Fatal("no fence object could be created")
	return 0
}

// finalRead lists every object (pages of 500, retried), by name.
func finalRead(t *testing.T, a *api) map[string]objMeta {
	t.Helper()
	for attempt := 0; ; attempt++ {
		out := map[string]objMeta{}
		cont := ""
		var err error
		for {
			q := url.Values{"limit": {"500"}}
			if cont != "" {
				q.Set("continue", cont)
			}
			r := a.do(context.Background(), time.Minute, http.MethodGet, collectionPath(storageVersion)+"?"+q.Encode(), "", nil)
			if r.err != nil || r.status != http.StatusOK {
				err = fmt.Errorf("final list: %d %v %.300s", r.status, r.err, r.body)
				break
			}
			var lst objList
			if err = json.Unmarshal(r.body, &lst); err != nil {
				break
			}
			for _, it := range lst.Items {
				out[it.Metadata.Name] = it
			}
			if cont = lst.Metadata.Continue; cont == "" {
				return out
			}
		}
		if attempt == 10 {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
}

// verdict of the final read.
type verdict struct {
	ackedByOp   map[string]int
	unknownByOp map[string]int // writes with no answer or a 5xx
	objects     int
	present     int
	lost        int
	lostByKind  map[string]int
	lostNotes   []string
	unknownSeen map[string]int // unknown writes: applied / not applied
}

// verify checks every object the load wrote against the final read (an
// object that does not match is read again on its own before it counts).
func verify(t *testing.T, a *api, l *load, final map[string]objMeta) verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := verdict{ackedByOp: map[string]int{}, unknownByOp: map[string]int{}, lostByKind: map[string]int{}, unknownSeen: map[string]int{},
		objects: len(l.objs)}
	for _, ak := range l.acks {
		v.ackedByOp[ak.op]++
	}
	for _, o := range l.objs {
		if o.pending != nil {
			v.unknownByOp[o.pending.op]++
		}
		got, present := final[o.name]
		kind := judge(o, got, present)
		if kind != "" {
			// Read it again, alone.
			r := a.do(context.Background(), reqTimeout, http.MethodGet, objectPath(storageVersion, o.name), "", nil)
			switch {
			case r.err == nil && r.status == http.StatusOK:
				var m objMeta
				if json.Unmarshal(r.body, &m) == nil {
					kind = judge(o, m, true)
					got, present = m, true
				}
			case r.err == nil && r.status == http.StatusNotFound:
				kind = judge(o, objMeta{}, false)
				present = false
			}
		}
		if present {
			v.present++
		}
		if o.pending != nil {
			applied := present == o.pending.exists && (!present || got.Spec.Image == o.pending.image)
			v.unknownSeen[fmt.Sprintf("%s, applied %v", o.pending.op, applied)]++
		}
		if kind != "" {
			v.lost++
			v.lostByKind[kind]++
			if len(v.lostNotes) < 10 {
				v.lostNotes = append(v.lostNotes, fmt.Sprintf("%s: %s (acknowledged: exists %v image %s rv %s uid %s; read: present %v image %s rv %s uid %s)",
					o.name, kind, o.exists, o.image, o.rv, o.uid, present, got.Spec.Image, got.Metadata.ResourceVersion, got.Metadata.UID))
			}
		}
	}
	return v
}

// judge is "" when the read state (present, got) is what o's acknowledged
// writes (or, for a retired object, its write of unknown outcome) allow;
// else the kind of loss.
func judge(o *obj, got objMeta, present bool) string {
	matches := func(exists bool, image string, uid string) bool {
		if !exists {
			return !present
		}
		return present && got.Spec.Image == image && (uid == "" || got.Metadata.UID == uid)
	}
	if matches(o.exists, o.image, o.uid) {
		return ""
	}
	if p := o.pending; p != nil && matches(p.exists, p.image, o.uid) {
		return ""
	}
	switch {
	case !o.acked && present:
		return "created without an acknowledgement or an unknown outcome"
	case o.deleted && present:
		return "acknowledged delete undone"
	case o.exists && !present:
		return "acknowledged object missing"
	case present && o.uid != "" && got.Metadata.UID != o.uid:
		return "uid changed"
	default:
		return "acknowledged content lost (older or other content)"
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// sortedKeys of a map with string keys.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
