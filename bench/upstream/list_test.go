package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLargeList is issue 17's large-object-count benchmark (make
// bench-list): for each server of CRDPLANE_LIST_SERVERS (default
// "crdplane,upstream"), a fresh server alone, one namespaced CRD and
// CRDPLANE_LIST_OBJECTS custom resources of about 1 KiB each (default
// 100,000) created by 32 workers; then
//
//   - the resident set (VmRSS) and Go heap in use (after a forced
//     collection) when empty and with the objects idle;
//   - LIST by pages of 500 (limit/continue), end to end, three times: the
//     whole walk's time, each page's latency, and the largest resident set
//     sampled every 20 ms during the walks;
//   - one LIST with resourceVersion=0 (an informer's first list: upstream
//     serves it whole from its watch cache, ignoring limit), its time,
//     bytes and the largest resident set during it;
//   - a watch from the last list's resourceVersion: the latency of the
//     event of one more create.
//
// CRDPLANE_LIST_DATA puts the data directories there (/dev/shm takes the
// disk's fsync out). Results go to CRDPLANE_SCALE_OUT (default
// ../scale/results) as list-<time>.json.
func TestLargeList(t *testing.T) {
	spec := os.Getenv("CRDPLANE_LIST_OBJECTS")
	if spec == "" {
		t.Skip("CRDPLANE_LIST_OBJECTS is not set (make bench-list sets it)")
	}
	n, err := strconv.Atoi(spec)
	if err != nil || n <= 0 {
		t.Fatalf("CRDPLANE_LIST_OBJECTS=%q is not a count", spec)
	}
	out := envOr("CRDPLANE_SCALE_OUT", filepath.Join("..", "scale", "results"))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, "list-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	var results []ListResult
	for _, name := range strings.Split(envOr("CRDPLANE_LIST_SERVERS", "crdplane,upstream"), ",") {
		r, err := runLargeList(context.Background(), t, name, n)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		results = append(results, r)
		t.Logf("%s", r.Summary())
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(results) == 2 && results[0].IdleRSS > 0 && results[1].IdleRSS > 0 {
		a, b := results[0], results[1]
		t.Logf("%s/%s: idle RSS beyond empty %.2f×, paged-walk peak RSS %.2f×, paged walk time %.2f×, RV=0 list time %.2f×",
			a.Server, b.Server,
			float64(a.IdleRSS-a.BaseRSS)/float64(b.IdleRSS-b.BaseRSS), float64(a.WalkPeakRSS)/float64(b.WalkPeakRSS),
			a.WalkSeconds/b.WalkSeconds, a.RV0Seconds/b.RV0Seconds)
	}
	t.Logf("results: %s", file)
}

// ListResult is one server's run; memory in bytes, durations in seconds.
type ListResult struct {
	Server       string    `json:"server"`
	Objects      int       `json:"objects"`
	ObjectBytes  int       `json:"objectBytes"` // one object as served (JSON)
	Time         time.Time `json:"time"`
	CreatePerSec float64   `json:"createPerSec"`
	BaseRSS      int64     `json:"baseRSS"`
	BaseHeap     int64     `json:"baseHeap"`
	IdleRSS      int64     `json:"idleRSS"` // the objects stored, idle
	IdleHeap     int64     `json:"idleHeap"`
	WalkSeconds  float64   `json:"walkSeconds"` // median of the walks
	WalkRuns     []float64 `json:"walkRuns"`
	PageP50Ms    float64   `json:"pageP50Ms"`
	PageP99Ms    float64   `json:"pageP99Ms"`
	WalkPeakRSS  int64     `json:"walkPeakRSS"`
	RV0Seconds   float64   `json:"rv0Seconds"`
	RV0Bytes     int       `json:"rv0Bytes"`
	RV0PeakRSS   int64     `json:"rv0PeakRSS"`
	WatchMs      float64   `json:"watchMs"`
	AfterRSS     int64     `json:"afterRSS"`
	AfterHeap    int64     `json:"afterHeap"`
	LoadStart    string    `json:"loadStart"`
	LoadEnd      string    `json:"loadEnd"`
	Error        string    `json:"error,omitempty"`
}

func (r ListResult) Summary() string {
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf("%s, %d objects of %d B: %.0f creates/s; RSS empty %s, idle %s (heap %s), paged walk peak %s, RV=0 peak %s, after %s; "+
		"walk by 500 %.2fs (runs %v; page p50 %.1f ms, p99 %.1f ms); RV=0 list %.2fs (%d B); watch event %.1f ms",
		r.Server, r.Objects, r.ObjectBytes, r.CreatePerSec, mib(r.BaseRSS), mib(r.IdleRSS), mib(r.IdleHeap), mib(r.WalkPeakRSS), mib(r.RV0PeakRSS), mib(r.AfterRSS),
		r.WalkSeconds, r.WalkRuns, r.PageP50Ms, r.PageP99Ms, r.RV0Seconds, r.RV0Bytes, r.WatchMs)
}

const listCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"items.list.example.com"},
"spec":{"group":"list.example.com","scope":"Namespaced","names":{"plural":"items","singular":"item","kind":"Item","listKind":"ItemList"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"data":{"type":"string"},"n":{"type":"integer"}}}}}}}]}}`

const itemsPath = "/apis/list.example.com/v1/namespaces/default/items"

// listItem is object i: about 1 KiB as served (metadata and managedFields
// included).
func listItem(i int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"list.example.com/v1","kind":"Item","metadata":{"name":"item-%07d","labels":{"bench":"list"}},"spec":{"n":%d,"data":%q}}`,
		i, i, strings.Repeat("abcdefghij", 64))
}

func runLargeList(ctx context.Context, t *testing.T, name string, n int) (r ListResult, err error) {
	r = ListResult{Server: name, Objects: n, Time: time.Now().UTC(), LoadStart: loadavg()}
	defer func() {
		r.LoadEnd = loadavg()
		if err != nil {
			r.Error = err.Error()
		}
	}()
	s, stop, err := startMeasured(ctx, t, name, "CRDPLANE_LIST_DATA", "list-")
	if err != nil {
		return r, err
	}
	defer stop()
	if r.BaseRSS, r.BaseHeap, err = s.memory(ctx); err != nil {
		return r, err
	}
	if code, body, err := s.Post(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", []byte(listCRD)); err != nil || code != http.StatusCreated {
		return r, fmt.Errorf("create the CRD: %d %s %v", code, body, err)
	}
	// Established: the first create that the server accepts.
	for deadline := time.Now().Add(time.Minute); ; {
		code, body, err := s.Post(ctx, itemsPath, listItem(0))
		if err == nil && code == http.StatusCreated {
			r.ObjectBytes = len(body)
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the CRD serves no create within a minute: %d %.200s %v", code, body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	began := time.Now()
	var next atomic.Int64
	next.Store(1)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				code, body, err := s.Post(ctx, itemsPath, listItem(i))
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("create item %d: %d %.200s", i, code, body)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return r, firstErr
	}
	r.CreatePerSec = float64(n-1) / time.Since(began).Seconds()
	t.Logf("%s: %d objects created in %s", name, n, time.Since(began).Round(time.Second))
	if _, err := s.Settle(ctx, 0.05, 2*time.Second, 5*time.Minute); err != nil {
		return r, err
	}
	if r.IdleRSS, r.IdleHeap, err = s.memory(ctx); err != nil {
		return r, err
	}

	// Paged walks, the resident set sampled meanwhile.
	var pages []float64
	var lastRV string
	peak := s.samplePeak()
	for range 3 {
		began := time.Now()
		count, rv, lat, err := s.walk(ctx, 500)
		if err != nil {
			return r, err
		}
		if count != n {
			return r, fmt.Errorf("a walk by pages listed %d objects, want %d", count, n)
		}
		r.WalkRuns = append(r.WalkRuns, time.Since(began).Seconds())
		pages = append(pages, lat...)
		lastRV = rv
	}
	r.WalkPeakRSS = peak()
	r.WalkSeconds = median(r.WalkRuns)
	slices.Sort(pages)
	r.PageP50Ms = pages[len(pages)/2]
	r.PageP99Ms = pages[len(pages)*99/100]

	if _, err := s.Settle(ctx, 0.05, 2*time.Second, time.Minute); err != nil {
		return r, err
	}
	peak = s.samplePeak()
	began = time.Now()
	resp, err := s.Get(ctx, itemsPath+"?resourceVersion=0&limit=500", "application/json", false)
	if err != nil || resp.Status != http.StatusOK {
		return r, fmt.Errorf("LIST resourceVersion=0: %d %v", resp.Status, err)
	}
	r.RV0Seconds = time.Since(began).Seconds()
	r.RV0Bytes = resp.WireBytes
	r.RV0PeakRSS = peak()

	if r.WatchMs, err = s.watchOne(ctx, lastRV, n); err != nil {
		return r, err
	}
	if _, err := s.Settle(ctx, 0.05, 2*time.Second, time.Minute); err != nil {
		return r, err
	}
	r.AfterRSS, r.AfterHeap, err = s.memory(ctx)
	return r, err
}

// samplePeak samples the resident set every 20 ms until the returned
// function is called, which returns the largest sample.
func (s *scaleServer) samplePeak() func() int64 {
	stop := make(chan struct{})
	var peak atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, _, err := s.Memory(); err == nil && rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	return func() int64 {
		close(stop)
		wg.Wait()
		return peak.Load()
	}
}

// walk lists every object by pages of limit and returns the count, the
// first page's resourceVersion and each page's latency in milliseconds.
func (s *scaleServer) walk(ctx context.Context, limit int) (int, string, []float64, error) {
	var lat []float64
	count := 0
	cont := ""
	rv := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cont != "" {
			q.Set("continue", cont)
		}
		began := time.Now()
		resp, err := s.Get(ctx, itemsPath+"?"+q.Encode(), "application/json", true)
		if err != nil {
			return 0, "", nil, err
		}
		lat = append(lat, float64(time.Since(began).Microseconds())/1000)
		if resp.Status != http.StatusOK {
			return 0, "", nil, fmt.Errorf("LIST page %d: %d %.300s", len(lat), resp.Status, resp.Body)
		}
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return 0, "", nil, err
		}
		count += len(page.Items)
		if rv == "" {
			rv = page.Metadata.ResourceVersion
		}
		if page.Metadata.Continue == "" {
			return count, rv, lat, nil
		}
		cont = page.Metadata.Continue
	}
}

// watchOne watches from rv, creates one more object and returns how long
// its ADDED event took to arrive.
func (s *scaleServer) watchOne(ctx context.Context, rv string, i int) (float64, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(wctx, http.MethodGet, s.URL+itemsPath+"?watch=1&resourceVersion="+rv+"&allowWatchBookmarks=false", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("watch: %d", resp.StatusCode)
	}
	want := fmt.Sprintf("item-%07d", i)
	seen := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"name":"`+want+`"`) {
				seen <- time.Now()
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // the watch is established
	began := time.Now()
	if code, body, err := s.Post(ctx, itemsPath, listItem(i)); err != nil || code != http.StatusCreated {
		return 0, fmt.Errorf("create for the watch: %d %.200s %v", code, body, err)
	}
	select {
	case at := <-seen:
		return float64(at.Sub(began).Microseconds()) / 1000, nil
	case <-wctx.Done():
		return 0, errors.New("no watch event within a minute")
	}
}
