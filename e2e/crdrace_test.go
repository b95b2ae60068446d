package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestConcurrentCRDCreates is issue 17's item 5 at a small scale:
// CRDPLANE_RACE_OPS (default 300) CRD operations from 32 concurrent
// clients, among them duplicate creates, CRDs whose singular is another's
// plural in the same group (a names conflict) and deletes in the middle.
// The final state must equal a sequential replay, on a fresh server, of the
// operations that succeeded, in the order they were committed (their
// resourceVersions): the same CRDs, each with the same NamesAccepted and
// Established conditions, none stuck without them. After deleting every
// CRD, etcd holds exactly the keys it held before the first operation.
// bench-scale raises the count.
func TestConcurrentCRDCreates(t *testing.T) {
	nops := 300
	if v := os.Getenv("CRDPLANE_RACE_OPS"); v != "" {
		var err error
		if nops, err = strconv.Atoi(v); err != nil {
			t.Fatalf("CRDPLANE_RACE_OPS=%q: %v", v, err)
		}
	}
	ops := raceOps(nops, 17)
	ctx := context.Background()

	conc := startRaceServer(t)
	baseline := conc.etcdKeys(ctx, t)
	done := make([]raceResult, len(ops))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				done[i] = conc.apply(ctx, t, ops[i])
			}
		})
	}
	for i := range ops {
		work <- i
	}
	close(work)
	wg.Wait()
	var committed []int
	counts := map[int]int{}
	for i, r := range done {
		counts[r.code]++
		if r.rv > 0 {
			committed = append(committed, i)
		}
	}
	t.Logf("%d operations from 32 clients: status codes %v", len(ops), counts)
	if counts[http.StatusConflict] == 0 || counts[http.StatusCreated] == 0 {
		t.Fatalf("the operations did not race as meant (status codes %v)", counts)
	}
	slices.SortFunc(committed, func(a, b int) int { return done[a].rv - done[b].rv })
	// A second delete of a CRD being deleted answers 200 with the object
	// as it is (its finalizer at work) and commits nothing: not replayed.
	deleting := map[string]bool{}
	committed = slices.DeleteFunc(committed, func(i int) bool {
		op := ops[i]
		if op.kind == "create" {
			deleting[op.name] = false
			return false
		}
		again := deleting[op.name]
		deleting[op.name] = true
		return again
	})
	got := conc.settled(ctx, t)

	seq := startRaceServer(t)
	for _, i := range committed {
		r := seq.apply(ctx, t, ops[i])
		if r.code != done[i].code {
			t.Errorf("replay of %s: %d, concurrently %d", ops[i], r.code, done[i].code)
		}
		seq.waitOp(ctx, t, ops[i])
	}
	want := seq.settled(ctx, t)
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: missing after the concurrent run; sequentially %s", name, w)
		} else if g != w {
			t.Errorf("%s: concurrently %s, sequentially %s", name, g, w)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s after the concurrent run, absent sequentially", name, g)
		}
	}
	t.Logf("%d CRDs left by %d committed operations, %d of them with conflicting names", len(got), len(committed), countNot(got, "NamesAccepted=True"))

	// Delete everything: the storage holds what it held when empty.
	var names []string
	for name := range got {
		names = append(names, name)
	}
	work = make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				conc.apply(ctx, t, raceOp{kind: "delete", name: names[i]})
			}
		})
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	if left := conc.settled(ctx, t); len(left) > 0 {
		t.Fatalf("%d CRDs left after deleting all", len(left))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		keys := conc.etcdKeys(ctx, t)
		extra, missing := diffKeys(keys, baseline)
		if len(extra) == 0 && len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting every CRD etcd holds %d keys it did not hold when empty (%.10q) and lacks %d (%.10q)", len(extra), extra, len(missing), missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func countNot(m map[string]string, sub string) int {
	n := 0
	for _, v := range m {
		if !strings.Contains(v, sub) {
			n++
		}
	}
	return n
}

func diffKeys(a, b map[string]bool) (extra, missing []string) {
	for k := range a {
		if !b[k] {
			extra = append(extra, k)
		}
	}
	for k := range b {
		if !a[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	return extra, missing
}

// raceOp is one operation: create the CRD of plural/singular in group, or
// delete the CRD name.
type raceOp struct {
	kind             string // "create" or "delete"
	name             string
	group            string
	plural, singular string
}

func (o raceOp) String() string { return o.kind + " " + o.name }

// raceOps is a seeded mix: 70% new CRDs (in 4 groups), 10% duplicates of
// an earlier create, 10% CRDs whose singular is an earlier CRD's plural,
// 10% deletes of an earlier CRD.
func raceOps(n int, seed uint64) []raceOp {
	rnd := rand.New(rand.NewPCG(seed, seed))
	var ops, creates []raceOp
	for i := range n {
		var op raceOp
		switch p := rnd.IntN(10); {
		case p == 7 && len(creates) > 0:
			op = creates[rnd.IntN(len(creates))]
		case p == 8 && len(creates) > 0:
			other := creates[rnd.IntN(len(creates))]
			plural := fmt.Sprintf("c%ds", i)
			op = raceOp{kind: "create", group: other.group, plural: plural, singular: other.plural, name: plural + "." + other.group}
			creates = append(creates, op)
		case p == 9 && len(creates) > 0:
			op = raceOp{kind: "delete", name: creates[rnd.IntN(len(creates))].name}
		default:
			group := fmt.Sprintf("g%d.race.example.com", i%4)
			plural := fmt.Sprintf("c%ds", i)
			op = raceOp{kind: "create", group: group, plural: plural, singular: fmt.Sprintf("c%d", i), name: plural + "." + group}
			creates = append(creates, op)
		}
		ops = append(ops, op)
	}
	return ops
}

func (o raceOp) body() []byte {
	kind := "K" + strings.TrimSuffix(o.plural, "s")
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": o.name},
		"spec": map[string]any{
			"group": o.group, "scope": "Namespaced",
			"names": map[string]any{"plural": o.plural, "singular": o.singular, "kind": kind},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}
	b, _ := json.Marshal(crd)
	return b
}

type raceServer struct {
	*server
	dataDir string
	client  *http.Client
}

const raceToken = "race-token"

func startRaceServer(t *testing.T) *raceServer {
	dataDir := filepath.Join(t.TempDir(), "etcd")
	s := startServer(t, dataDir, "--token", raceToken, "--log-level", "warn")
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 32} //nolint:gosec // loopback test server
	rs := &raceServer{server: s, dataDir: dataDir, client: &http.Client{Transport: tr, Timeout: time.Minute}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if code, _ := rs.do(context.Background(), t, http.MethodGet, "/readyz", nil); code == http.StatusOK {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatal("crdplane not ready in 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *raceServer) do(ctx context.Context, t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+raceToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

const raceCRDs = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// raceResult is an operation's status code and, when it was committed,
// the resourceVersion it was committed at.
type raceResult struct {
	code int
	rv   int
}

func (s *raceServer) apply(ctx context.Context, t *testing.T, op raceOp) raceResult {
	var code int
	var body []byte
	if op.kind == "create" {
		code, body = s.do(ctx, t, http.MethodPost, raceCRDs, op.body())
	} else {
		code, body = s.do(ctx, t, http.MethodDelete, raceCRDs+"/"+op.name, nil)
	}
	r := raceResult{code: code}
	switch code {
	case http.StatusCreated, http.StatusOK:
		var obj struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		r.rv, _ = strconv.Atoi(obj.Metadata.ResourceVersion)
		if r.rv == 0 {
			t.Errorf("%s: %d without a resourceVersion: %.300s", op, code, body)
		}
	case http.StatusConflict, http.StatusNotFound:
	default:
		t.Errorf("%s: %d %.300s", op, code, body)
	}
	return r
}

type raceCRD struct {
	Metadata struct {
		Name              string  `json:"name"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"conditions"`
	} `json:"status"`
}

// state is the CRD's NamesAccepted and Established conditions ("" while
// either is missing or it is being deleted).
func (c raceCRD) state() string {
	if c.Metadata.DeletionTimestamp != nil {
		return ""
	}
	var names, est string
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case "NamesAccepted":
			names = "NamesAccepted=" + cond.Status + "(" + cond.Reason + ")"
		case "Established":
			est = "Established=" + cond.Status + "(" + cond.Reason + ")"
		}
	}
	if names == "" || est == "" {
		return ""
	}
	return names + " " + est
}

func (s *raceServer) list(ctx context.Context, t *testing.T) []raceCRD {
	code, body := s.do(ctx, t, http.MethodGet, raceCRDs, nil)
	if code != http.StatusOK {
		t.Fatalf("list CRDs: %d %.300s", code, body)
	}
	var list struct{ Items []raceCRD }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// settled waits until no CRD is being deleted and every one has both
// conditions, and the same answer twice in a row, then returns each CRD's
// conditions. A CRD stuck without them fails the test after 60s.
func (s *raceServer) settled(ctx context.Context, t *testing.T) map[string]string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var prev map[string]string
	for {
		cur := map[string]string{}
		var unsettled []string
		for _, c := range s.list(ctx, t) {
			st := c.state()
			if st == "" {
				unsettled = append(unsettled, c.Metadata.Name)
			}
			cur[c.Metadata.Name] = st
		}
		if len(unsettled) == 0 && prev != nil && fmt.Sprint(prev) == fmt.Sprint(cur) {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d CRDs still without NamesAccepted and Established or being deleted after 60s: %.10q", len(unsettled), unsettled)
		}
		prev = cur
		time.Sleep(300 * time.Millisecond)
	}
}

// waitOp waits until op's effect is complete: a created CRD has both
// conditions, a deleted one is gone.
func (s *raceServer) waitOp(ctx context.Context, t *testing.T, op raceOp) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := s.do(ctx, t, http.MethodGet, raceCRDs+"/"+op.name, nil)
		if op.kind == "delete" && code == http.StatusNotFound {
			return
		}
		if op.kind == "create" && code == http.StatusOK {
			var c raceCRD
			if err := json.Unmarshal(body, &c); err != nil {
				t.Fatal(err)
			}
			if c.state() != "" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replay of %s: not done after 30s (%d %.300s)", op, code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// etcdKeys reads every key of the server's embedded etcd through its unix
// socket in the data directory, but the namespaces'.
func (s *raceServer) etcdKeys(ctx context.Context, t *testing.T) map[string]bool {
	t.Helper()
	sock, err := filepath.Abs(filepath.Join(s.dataDir, "etcd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + sock}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("etcd keys: %v", err)
	}
	keys := map[string]bool{}
	for _, kv := range resp.Kvs {
		// The server creates its built-in namespaces and its RBAC
		// bootstrap policy after it is ready; the test creates neither.
		k := string(kv.Key)
		if !strings.HasPrefix(k, "/registry/namespaces/") && !strings.HasPrefix(k, "/registry/clusterroles/") && !strings.HasPrefix(k, "/registry/clusterrolebindings/") {
			keys[k] = true
		}
	}
	return keys
}
