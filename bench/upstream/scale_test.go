package upstream

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestScale is the scale benchmark of issue 17 (make bench-scale): for each
// count N of CRDPLANE_SCALE (e.g. "100,1000,3000") and each
// server of CRDPLANE_SCALE_SERVERS (default "crdplane,upstream"), a fresh
// server is started and measured alone:
//
//   - N distinct CRDs (10 per group, so N/10 groups) created by 8 workers;
//     the time until every create is answered and until a watch has seen
//     every one Established;
//   - the process's resident set (and its peak, VmHWM) and Go heap in use
//     (go_memstats_heap_inuse_bytes after a forced collection) when empty,
//     with the N CRDs idle, and after deleting them all;
//   - `kubectl api-resources` (kubectl 1.33) with a fresh cache directory;
//   - the time for one new CRD (a new group) to be listed in aggregated
//     discovery (/apis as APIGroupDiscoveryList) and in /openapi/v3.
//
// CRDPLANE_SCALE_DATA puts the servers' data directories (their etcd)
// under that directory instead of the test's temporary one: /dev/shm takes
// a shared disk's fsync latency out of the comparison. CRDPLANE_BASE_BIN
// adds the server "crdplane-base" to the list: that binary measured beside
// the current one.
//
// CRDPLANE_SCALE_PROFILE=dir writes crdplane's profiles there
// (<server>-<n>-cpu.pprof over the first CRDPLANE_SCALE_PROFILE_SECONDS
// (default 20) from the first create, -heap.pprof with the CRDs idle,
// -deleted-heap.pprof after deleting them).
//
// A server that has not established its N CRDs within CRDPLANE_SCALE_CAP
// (default 10m) is recorded as far as it got and not run at larger counts.
// The results go to CRDPLANE_SCALE_OUT (default ../scale/results) as
// <time>.json and <time>.csv; bench/scale/plot draws them.
func TestScale(t *testing.T) {
	spec := os.Getenv("CRDPLANE_SCALE")
	if spec == "" {
		t.Skip("CRDPLANE_SCALE is not set (make bench-scale sets it)")
	}
	var counts []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("CRDPLANE_SCALE=%q: %q is not a count", spec, f)
		}
		counts = append(counts, n)
	}
	servers := strings.Split(envOr("CRDPLANE_SCALE_SERVERS", "crdplane,upstream"), ",")
	if os.Getenv("CRDPLANE_BASE_BIN") != "" && !slices.Contains(servers, "crdplane-base") {
		servers = append([]string{"crdplane-base"}, servers...)
	}
	capDur, err := time.ParseDuration(envOr("CRDPLANE_SCALE_CAP", "10m"))
	if err != nil {
		t.Fatal(err)
	}
	out := envOr("CRDPLANE_SCALE_OUT", filepath.Join("..", "scale", "results"))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	ctx := context.Background()
	var results []ScaleResult
	capped := map[string]bool{}
	for _, n := range counts {
		for _, name := range servers {
			if capped[name] {
				t.Logf("%s: not run at %d (it did not reach a smaller count within %s)", name, n, capDur)
				continue
			}
			r, err := runScale(ctx, t, name, n, capDur)
			switch {
			case errors.Is(err, errCapped):
				t.Logf("%s at %d CRDs: %v", name, n, err) // a result: the largest count it reaches
			case err != nil:
				t.Errorf("%s at %d CRDs: %v", name, n, err)
			}
			if r.Established < n {
				capped[name] = true
			}
			results = append(results, r)
			t.Logf("%s", r.Summary())
			// Written after every point: a long run interrupted keeps
			// what it measured.
			if err := writeResults(filepath.Join(out, stamp), results); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("results: %s.{json,csv}", filepath.Join(out, stamp))
}

// ScaleResult is one server at one count. Durations are in seconds, memory
// in bytes; a negative duration is one not measured (the server did not
// get there).
type ScaleResult struct {
	Server      string    `json:"server"`
	N           int       `json:"n"`
	Time        time.Time `json:"time"`
	LoadStart   string    `json:"loadStart"` // /proc/loadavg before the run
	LoadEnd     string    `json:"loadEnd"`   // and after it
	Created     int       `json:"created"`
	Established int       `json:"established"`
	// CreateSeconds: until every create was answered;
	// EstablishedSeconds: until every CRD was seen Established.
	CreateSeconds      float64 `json:"createSeconds"`
	EstablishedSeconds float64 `json:"establishedSeconds"`
	// SettleSeconds: until the process was idle after establishing (its
	// background work: discovery and OpenAPI rebuilds).
	SettleSeconds float64 `json:"settleSeconds"`
	BaseRSS       int64   `json:"baseRSS"`
	BaseHeap      int64   `json:"baseHeap"`
	RSS           int64   `json:"rss"`     // N CRDs idle
	Heap          int64   `json:"heap"`    // N CRDs idle, after a collection
	PeakRSS       int64   `json:"peakRSS"` // VmHWM after establishing and measuring
	// APIResourcesSeconds: median of 3 `kubectl api-resources` with a
	// fresh cache directory each.
	APIResourcesSeconds float64   `json:"apiResourcesSeconds"`
	APIResourcesRuns    []float64 `json:"apiResourcesRuns"`
	// DiscoverySeconds, OpenAPISeconds: medians of 3 new CRDs (each in a
	// new group) from the create sent until the group is
	// listed.
	DiscoverySeconds float64   `json:"discoverySeconds"`
	OpenAPISeconds   float64   `json:"openapiSeconds"`
	DiscoveryRuns    []float64 `json:"discoveryRuns"`
	OpenAPIRuns      []float64 `json:"openapiRuns"`
	DeleteSeconds    float64   `json:"deleteSeconds"` // until the list of CRDs is empty
	// ProbedRSS and ProbedHeap are the memory once clients have read
	// discovery and the /openapi/v3 index (the probes above): a server
	// that renders every group-version's document for the index keeps
	// more than the idle figures show.
	ProbedRSS   int64  `json:"probedRSS"`
	ProbedHeap  int64  `json:"probedHeap"`
	DeletedRSS  int64  `json:"deletedRSS"`
	DeletedHeap int64  `json:"deletedHeap"`
	Error       string `json:"error,omitempty"`
}

// Summary is one line of the result.
func (r ScaleResult) Summary() string {
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	return fmt.Sprintf("%s N=%d: created %.2fs, established %d in %.2fs (settled %.1fs); RSS %s -> %s (peak %s), heap %s -> %s; api-resources %.2fs; discovery %.3fs, openapi/v3 %.3fs; probed RSS %s heap %s; deleted in %.2fs, RSS %s heap %s; load %s -> %s",
		r.Server, r.N, r.CreateSeconds, r.Established, r.EstablishedSeconds, r.SettleSeconds,
		mib(r.BaseRSS), mib(r.RSS), mib(r.PeakRSS), mib(r.BaseHeap), mib(r.Heap),
		r.APIResourcesSeconds, r.DiscoverySeconds, r.OpenAPISeconds, mib(r.ProbedRSS), mib(r.ProbedHeap), r.DeleteSeconds, mib(r.DeletedRSS), mib(r.DeletedHeap),
		r.LoadStart, r.LoadEnd)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// scaleGroup is the group of the i-th CRD: ten CRDs a group.
func scaleGroup(i int) string { return fmt.Sprintf("g%d.scale.example.com", i/10) }

func scaleName(i int) string { return fmt.Sprintf("widget%ds.%s", i, scaleGroup(i)) }

// scaleServer is one fresh server and what the benchmark needs to read it.
type scaleServer struct {
	*Target
	ops        string // crdplane's --ops-listen (http://host:port), else ""
	kubeconfig string
	dir        string
}

// startMeasured starts one server for a measurement, in a temporary data
// directory (under $dataEnv when it is set, e.g. /dev/shm), crdplane with
// its ops port and profiling (the forced collection of memory()), and
// waits until its CPU settles. stop stops it and removes the directory.
func startMeasured(ctx context.Context, t *testing.T, name, dataEnv, prefix string) (s *scaleServer, stop func(), err error) {
	dir := t.TempDir()
	cleanup := func() {}
	if root := os.Getenv(dataEnv); root != "" {
		if dir, err = os.MkdirTemp(root, prefix); err != nil {
			return nil, nil, err
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
	}
	var extra []string
	var ops string
	if name != "upstream" {
		addr, err := freeAddr()
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		extra = []string{"--ops-listen", addr, "--profiling"}
		ops = "http://" + addr
	}
	tg, stopServer, err := StartOne(ctx, name, filepath.Join(dir, name), extra...)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	stop = func() { stopServer(); cleanup() }
	s = &scaleServer{Target: tg, ops: ops, dir: dir}
	if _, err := s.Settle(ctx, 0.05, 2*time.Second, time.Minute); err != nil {
		stop()
		return nil, nil, err
	}
	return s, stop, nil
}

func runScale(ctx context.Context, t *testing.T, name string, n int, capDur time.Duration) (r ScaleResult, err error) {
	r = ScaleResult{Server: name, N: n, Time: time.Now().UTC(), LoadStart: loadavg(),
		EstablishedSeconds: -1, APIResourcesSeconds: -1, DiscoverySeconds: -1, OpenAPISeconds: -1, DeleteSeconds: -1}
	defer func() {
		r.LoadEnd = loadavg()
		if err != nil {
			r.Error = err.Error()
		}
	}()
	s, stop, err := startMeasured(ctx, t, name, "CRDPLANE_SCALE_DATA", "scale-")
	if err != nil {
		return r, err
	}
	defer stop()
	if s.kubeconfig, err = writeKubeconfig(s.dir, s.Target); err != nil {
		return r, err
	}
	if r.BaseRSS, r.BaseHeap, err = s.memory(ctx); err != nil {
		return r, err
	}

	// Create N CRDs, 8 workers, and wait for a watch to see them all
	// Established.
	names := make([]string, n)
	for i := range n {
		names[i] = scaleName(i)
	}
	phase, cancel := context.WithTimeout(ctx, capDur)
	defer cancel()
	est, err := s.watchEstablished(phase, names)
	if err != nil {
		return r, err
	}
	profDir := os.Getenv("CRDPLANE_SCALE_PROFILE")
	prof := func(kind, query string) {
		if profDir == "" || s.ops == "" {
			return
		}
		b, err := s.get(ctx, s.ops+"/debug/pprof/"+query, "")
		if err == nil {
			err = os.WriteFile(filepath.Join(profDir, fmt.Sprintf("%s-%d-%s.pprof", name, n, kind)), b, 0o644)
		}
		if err != nil {
			slog.Warn("profile", "server", name, "kind", kind, "err", err)
		}
	}
	var profiling sync.WaitGroup
	profiling.Go(func() { prof("cpu", "profile?seconds="+envOr("CRDPLANE_SCALE_PROFILE_SECONDS", "20")) })
	defer profiling.Wait()
	began := time.Now()
	created, err := s.createAll(phase, n, 8)
	r.Created = created
	r.CreateSeconds = time.Since(began).Seconds()
	if err != nil {
		return r, err
	}
	got := est.wait()
	r.Established = got
	if got < n {
		return r, fmt.Errorf("%d of %d CRDs Established within %s: %w", got, n, capDur, errCapped)
	}
	r.EstablishedSeconds = est.last.Sub(began).Seconds()
	settled, err := s.Settle(ctx, 0.05, 2*time.Second, capDur)
	if err != nil {
		return r, err
	}
	r.SettleSeconds = settled.Seconds()
	if r.RSS, r.Heap, err = s.memory(ctx); err != nil {
		return r, err
	}
	prof("heap", "heap")

	for range 3 {
		d, err := s.apiResources(ctx, n)
		if err != nil {
			return r, err
		}
		r.APIResourcesRuns = append(r.APIResourcesRuns, d.Seconds())
	}
	r.APIResourcesSeconds = median(r.APIResourcesRuns)

	probes := make([]string, 3)
	for k := range probes {
		group := fmt.Sprintf("probe%d.scale.example.com", k)
		probes[k] = "widget0s." + group
		disc, oa, err := s.probe(ctx, group)
		if err != nil {
			return r, err
		}
		r.DiscoveryRuns = append(r.DiscoveryRuns, disc.Seconds())
		r.OpenAPIRuns = append(r.OpenAPIRuns, oa.Seconds())
		if _, err := s.Settle(ctx, 0.05, time.Second, time.Minute); err != nil {
			return r, err
		}
	}
	r.DiscoverySeconds = median(r.DiscoveryRuns)
	r.OpenAPISeconds = median(r.OpenAPIRuns)
	if _, r.PeakRSS, err = s.Memory(); err != nil {
		return r, err
	}
	if r.ProbedRSS, r.ProbedHeap, err = s.memory(ctx); err != nil {
		return r, err
	}

	began = time.Now()
	if err := s.deleteAll(ctx, append(names, probes...), 8, capDur); err != nil {
		return r, err
	}
	r.DeleteSeconds = time.Since(began).Seconds()
	if _, err := s.Settle(ctx, 0.05, 2*time.Second, capDur); err != nil {
		return r, err
	}
	if r.DeletedRSS, r.DeletedHeap, err = s.memory(ctx); err != nil {
		return r, err
	}
	prof("deleted-heap", "heap")
	return r, nil
}

// errCapped: the server did not establish its CRDs within the cap.
var errCapped = errors.New("capped")

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func writeKubeconfig(dir string, t *Target) (string, error) {
	p := filepath.Join(dir, "kubeconfig-"+t.Name)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: s
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: %s
contexts:
- name: c
  context: {cluster: s, user: u}
current-context: c
`, t.URL, t.Token)
	return p, os.WriteFile(p, []byte(cfg), 0o600)
}

// memory forces a collection (pprof's heap profile with gc=1: crdplane's
// --profiling, upstream's default /debug/pprof) and reads the resident set
// and the heap in use.
func (s *scaleServer) memory(ctx context.Context) (rss, heap int64, err error) {
	base, token := s.URL, s.Token
	if s.ops != "" {
		base, token = s.ops, ""
	}
	if _, err := s.get(ctx, base+"/debug/pprof/heap?gc=1", token); err != nil {
		slog.Warn("forced collection", "server", s.Name, "err", err)
	}
	metrics, err := s.get(ctx, base+"/metrics", token)
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(metrics)) {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, 0, fmt.Errorf("go_memstats_heap_inuse_bytes %q: %w", v, err)
			}
			heap = int64(f)
		}
	}
	if heap == 0 {
		return 0, 0, fmt.Errorf("%s/metrics: no go_memstats_heap_inuse_bytes", base)
	}
	rss, _, err = s.Memory()
	return rss, heap, err
}

func (s *scaleServer) get(ctx context.Context, url, token string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %.200s", url, resp.StatusCode, b)
	}
	return b, err
}

// established follows a watch of the CRDs until every name of a set has
// been seen Established (or the watch's context ends).
type established struct {
	done  chan struct{}
	count atomic.Int64
	last  time.Time // when the last one was seen; read after done
}

func (e *established) wait() int {
	<-e.done
	return int(e.count.Load())
}

type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"object"`
}

func (s *scaleServer) watchEstablished(ctx context.Context, names []string) (*established, error) {
	list, err := s.Get(ctx, CRDCollection+"?limit=1", "application/json", true)
	if err != nil {
		return nil, err
	}
	var meta struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(list.Body, &meta); err != nil {
		return nil, fmt.Errorf("list CRDs: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		s.URL+CRDCollection+"?watch=1&resourceVersion="+meta.Metadata.ResourceVersion, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	// The watch outlives the harness client's 2-minute timeout.
	resp, err := (&http.Client{Transport: s.Client.Transport}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("watch CRDs: %d %s", resp.StatusCode, b)
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	e := &established{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer func() { _ = resp.Body.Close() }()
		dec := json.NewDecoder(resp.Body)
		for len(want) > 0 {
			var ev watchEvent
			if err := dec.Decode(&ev); err != nil {
				if ctx.Err() == nil {
					slog.Warn("watch of CRDs ended", "server", s.Name, "err", err)
				}
				return
			}
			name := ev.Object.Metadata.Name
			if !want[name] || ev.Type == "DELETED" {
				continue
			}
			for _, c := range ev.Object.Status.Conditions {
				if c.Type == "Established" && c.Status == "True" {
					delete(want, name)
					e.count.Add(1)
					e.last = time.Now()
					break
				}
			}
		}
	}()
	return e, nil
}

// createAll creates CRDs 0..n-1 with the given number of workers and
// returns how many were created.
func (s *scaleServer) createAll(ctx context.Context, n, workers int) (int, error) {
	work := make(chan int)
	var created atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				code, body, err := s.Post(ctx, CRDCollection, GroupCRD(scaleGroup(i), i))
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("create %s: %d %.300s", scaleName(i), code, body)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				created.Add(1)
			}
		})
	}
	for i := range n {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return int(created.Load()), fmt.Errorf("%d creates failed, first: %w", len(errs), errs[0])
	}
	return int(created.Load()), nil
}

// kubectl is kubectl 1.33 ($KUBECTL overrides it).
func kubectl() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	for _, p := range []string{"/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/local/bin/kubectl.1.33"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}

// apiResources times `kubectl api-resources` with a fresh cache directory
// and checks it listed at least n resources.
func (s *scaleServer) apiResources(ctx context.Context, n int) (time.Duration, error) {
	cache, err := os.MkdirTemp(s.dir, "kubectl-cache-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(cache) }()
	cmd := exec.CommandContext(ctx, kubectl(), "--kubeconfig", s.kubeconfig, "--cache-dir", cache, "api-resources", "--no-headers")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	err = cmd.Run()
	d := time.Since(began)
	if err != nil {
		return 0, fmt.Errorf("kubectl api-resources: %w: %s", err, errb.String())
	}
	if lines := bytes.Count(out.Bytes(), []byte("\n")); lines < n {
		return 0, fmt.Errorf("kubectl api-resources listed %d resources, want at least %d", lines, n)
	}
	return d, nil
}

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// probe creates one CRD in a new group and returns the time from sending
// the create until the group is in aggregated discovery and its
// group-version in /openapi/v3.
func (s *scaleServer) probe(ctx context.Context, group string) (disc, openapi time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	began := time.Now()
	var wg sync.WaitGroup
	poll := func(path, accept, marker string, d *time.Duration, perr *error) {
		defer wg.Done()
		for {
			r, err := s.Get(ctx, path, accept, true)
			if err != nil {
				*perr = fmt.Errorf("GET %s: %w", path, err)
				return
			}
			if r.Status == http.StatusOK && bytes.Contains(r.Body, []byte(marker)) {
				*d = time.Since(began)
				return
			}
			select {
			case <-ctx.Done():
				*perr = fmt.Errorf("GET %s: %s not listed: %w", path, marker, ctx.Err())
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	var discErr, oaErr error
	wg.Add(2)
	go poll("/apis", aggregatedAccept, `"`+group+`"`, &disc, &discErr)
	go poll("/openapi/v3", "application/json", `"apis/`+group+`/v1"`, &openapi, &oaErr)
	code, body, err := s.Post(ctx, CRDCollection, GroupCRD(group, 0))
	if err == nil && code != http.StatusCreated {
		err = fmt.Errorf("create probe CRD: %d %.300s", code, body)
	}
	if err != nil {
		cancel()
	}
	wg.Wait()
	return disc, openapi, errors.Join(err, discErr, oaErr)
}

// deleteAll deletes the named CRDs with the given number of workers and
// waits until the list of CRDs is empty.
func (s *scaleServer) deleteAll(ctx context.Context, names []string, workers int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	work := make(chan string)
	var failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for name := range work {
				code, body, err := s.Send(ctx, http.MethodDelete, CRDCollection+"/"+name, "", nil)
				if err == nil && code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound {
					err = fmt.Errorf("delete %s: %d %.300s", name, code, body)
				}
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d deletes failed, first: %w", failed.Load(), first.Load().(error))
	}
	for {
		r, err := s.Get(ctx, CRDCollection, "application/json", true)
		if err != nil {
			return err
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil {
			return fmt.Errorf("list CRDs: %w", err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d CRDs left after deleting all: %w", len(list.Items), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// csvHeader is the columns of the CSV the plot reads.
var csvHeader = []string{"server", "n", "established_s", "create_s", "settle_s", "base_rss", "rss", "peak_rss", "base_heap", "heap",
	"api_resources_s", "discovery_s", "openapi_s", "delete_s", "deleted_rss", "deleted_heap", "probed_rss", "probed_heap", "load_start", "load_end", "error"}

func writeResults(prefix string, results []ScaleResult) error {
	j, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(prefix+".json", append(j, '\n'), 0o644); err != nil {
		return err
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	for _, r := range results {
		_ = w.Write([]string{r.Server, strconv.Itoa(r.N), f(r.EstablishedSeconds), f(r.CreateSeconds), f(r.SettleSeconds),
			i(r.BaseRSS), i(r.RSS), i(r.PeakRSS), i(r.BaseHeap), i(r.Heap),
			f(r.APIResourcesSeconds), f(r.DiscoverySeconds), f(r.OpenAPISeconds), f(r.DeleteSeconds), i(r.DeletedRSS), i(r.DeletedHeap),
			i(r.ProbedRSS), i(r.ProbedHeap), r.LoadStart, r.LoadEnd, r.Error})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(prefix+".csv", b.Bytes(), 0o644)
}
