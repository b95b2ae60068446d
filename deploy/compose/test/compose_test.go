// Package composetest runs the docker compose deployment (deploy/compose)
// end to end: a kubectl scenario, then a steady create load during which one
// validator replica is stopped and the etcd leader is killed. It checks that
// the gateway spreads admission over every validator replica, that errors stop
// within a few seconds of each fault, and that every acknowledged (201)
// create is readable afterwards.
//
// `make test-compose` runs it through run.sh (which also removes the compose
// project on any exit); without CRDPLANE_COMPOSE_TEST=1 it is skipped. The
// images must exist (`make images`).
package composetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crdplane/crdplane/deploy/composestack"
)

// Bounds the test enforces.
const (
	// validatorRecovery: requests started this long after a validator
	// replica is stopped all succeed (its stop is graceful: expect none to
	// fail at all).
	validatorRecovery = 3 * time.Second
	// etcdRecovery: requests started this long after the etcd leader is
	// killed all succeed (a new leader is elected within ~1-2s).
	etcdRecovery = 6 * time.Second
	// Each load phase lasts this long.
	warmup    = 6 * time.Second
	faultTime = 12 * time.Second
	afterTime = 6 * time.Second
	workers   = 6
)

func TestCompose(t *testing.T) {
	if os.Getenv("CRDPLANE_COMPOSE_TEST") != "1" {
		t.Skip("set CRDPLANE_COMPOSE_TEST=1 (make test-compose) to run the docker compose test")
	}
	began := time.Now()
	s := newStack(t)
	s.up()
	t.Logf("stack up in %s", time.Since(began).Round(100*time.Millisecond))

	s.kubectlScenario()
	s.mtlsRefusals()
	s.groupIsolation()

	l := newLoad(t, s.Kubeconfig)
	l.start(workers)
	defer l.stop()

	// Warm-up: everything healthy, admission spread over the validators.
	validators := s.MustContainers("validator")
	if len(validators) != 3 {
		t.Fatalf("validator replicas: %v", validators)
	}
	before := s.admitCounts(validators)
	t0 := time.Now()
	time.Sleep(warmup)
	after := s.admitCounts(validators)
	var total float64
	shares := make([]float64, len(validators))
	for i := range validators {
		shares[i] = after[i] - before[i]
		total += shares[i]
	}
	for i := range shares {
		shares[i] /= total
	}
	t.Logf("warm-up: %d creates acknowledged, validator shares of %v admissions: %.2f", l.acked(t0, time.Now()), total, shares)
	if total < 50 {
		t.Fatalf("too little load reached the validators: %v admissions in %s", total, warmup)
	}
	for i, sh := range shares {
		if sh < 0.2 {
			t.Errorf("validator %s got %.0f%% of the admissions: the gateway does not balance over the replicas", validators[i], 100*sh)
		}
	}
	if errs := l.failures(t0, time.Now()); len(errs) > 0 {
		t.Fatalf("errors under load before any fault: %d, first: %v", len(errs), errs[0].err)
	}

	// Fault 1: a validator replica stops (SIGTERM: it drains).
	stopped := validators[1]
	tStop := time.Now()
	s.MustDocker("stop", stopped)
	t.Logf("stopped validator %s in %s", stopped, time.Since(tStop).Round(10*time.Millisecond))
	time.Sleep(faultTime)
	s.checkRecovery(l, "validator stop", tStop, validatorRecovery)

	// Fault 2: the etcd leader dies (SIGKILL).
	leader := s.etcdLeader()
	tKill := time.Now()
	s.MustDocker("kill", leader)
	t.Logf("killed the etcd leader %s", leader)
	time.Sleep(faultTime)
	s.checkRecovery(l, "etcd leader kill", tKill, etcdRecovery)
	if newLeader := s.etcdLeader(); newLeader == leader {
		t.Errorf("no new etcd leader: %s", newLeader)
	}

	// Both come back.
	tBack := time.Now()
	s.MustDocker("start", stopped, leader)
	if err := s.WaitHealthy(stopped, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitEtcdHealthy(leader, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("validator and etcd member back in %s", time.Since(tBack).Round(100*time.Millisecond))
	tRestored := time.Now()
	time.Sleep(afterTime)
	if n := l.acked(tRestored, time.Now()); n == 0 {
		t.Errorf("no create acknowledged after the members came back")
	}
	// The gateway re-resolves the validators' name periodically
	// (grpcx.DNSRefreshInterval, 30s): the restarted replica gets admissions
	// again without any connection failing.
	for deadline := tBack.Add(60 * time.Second); ; {
		if n := s.admitCounts([]string{stopped})[0]; n > 0 {
			t.Logf("the restarted validator admits again %s after its restart", time.Since(tBack).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the restarted validator %s got no admissions in 60s", stopped)
			break
		}
		time.Sleep(time.Second)
	}
	if errs := l.failures(tBack, time.Now()); len(errs) > 0 {
		t.Errorf("%d errors after the members came back, first: %v", len(errs), errs[0].err)
	}
	l.stop()

	l.verifyReadable(t)
	t.Logf("compose test done in %s", time.Since(began).Round(100*time.Millisecond))
}

// stack is the compose project under test, with kubectl.
type stack struct {
	*composestack.Stack
	t          *testing.T
	kubectlBin string
	cacheDir   string
}

func newStack(t *testing.T) *stack {
	return &stack{
		Stack: composestack.New(t, composestack.Config{
			Root:            "../../..",
			ProjectPrefix:   "crdplanetest",
			Files:           []string{"deploy/compose/docker-compose.yaml", "deploy/compose/test/docker-compose.test.yaml"},
			UpTimeout:       4 * time.Minute,
			DownTimeout:     2 * time.Minute,
			FailureLogLines: 60,
		}),
		t:          t,
		kubectlBin: kubectlBinary(),
		cacheDir:   t.TempDir(),
	}
}

// up starts the project and waits until the gateway's /readyz answers ok
// through kubectl (TLS and the token of the kubeconfig the pki step wrote).
func (s *stack) up() {
	s.t.Helper()
	s.MustUp()
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := s.kubectlRun("get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) == "ok" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the gateway never became ready: %v %s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

var admitLine = regexp.MustCompile(`(?m)^crdplane_grpc_server_handled_total\{[^}]*grpc_method="Admit"[^}]*\} (\S+)$`)

// admitCounts reads each validator's count of Admit calls from /metrics.
func (s *stack) admitCounts(validators []string) []float64 {
	s.t.Helper()
	counts := make([]float64, len(validators))
	for i, v := range validators {
		code, body, err := composestack.HTTPGet("http://" + s.MustHostAddr(v, "7103") + "/metrics")
		if err != nil || code != http.StatusOK {
			s.t.Fatalf("%s /metrics: %d %v", v, code, err)
		}
		for _, m := range admitLine.FindAllStringSubmatch(body, -1) {
			f, _ := strconv.ParseFloat(m[1], 64)
			counts[i] += f
		}
	}
	return counts
}

// etcdLeader is the container of the etcd leader.
func (s *stack) etcdLeader() string {
	s.t.Helper()
	leader, err := s.EtcdLeader(30 * time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	return leader
}

// checkRecovery checks that requests started recovery after a fault at
// tFault all succeeded, and that creates went on.
func (s *stack) checkRecovery(l *load, fault string, tFault time.Time, recovery time.Duration) {
	s.t.Helper()
	now := time.Now()
	errs := l.failedBetween(tFault, now)
	var last time.Duration
	for _, r := range errs {
		last = max(last, r.start.Sub(tFault))
	}
	msg := fmt.Sprintf("%s: %d creates acknowledged, %d failed", fault, l.acked(tFault, now), len(errs))
	if len(errs) > 0 {
		msg += fmt.Sprintf(" (in flight at the fault or started at most %s after it; first error: %v)", last.Round(10*time.Millisecond), errs[0].err)
	}
	s.t.Log(msg)
	if late := l.failures(tFault.Add(recovery), now); len(late) > 0 {
		s.t.Errorf("%s: %d requests started more than %s after the fault failed, first: %v", fault, len(late), recovery, late[0].err)
	}
	if l.acked(tFault.Add(recovery), now) == 0 {
		s.t.Errorf("%s: no create acknowledged from %s after the fault on", fault, recovery)
	}
}

func (s *stack) kubectlRun(args ...string) (string, error) {
	return s.Run(time.Minute, s.kubectlBin, append([]string{"--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir}, args...)...)
}

func (s *stack) kubectl(args ...string) string {
	s.t.Helper()
	out, err := s.kubectlRun(args...)
	if err != nil {
		s.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kubectlScenario is the README's quick start, through TLS and a token.
func (s *stack) kubectlScenario() {
	s.t.Helper()
	testdata := func(name string) string { return filepath.Join("../../../e2e/testdata", name) }
	s.kubectl("apply", "-f", testdata("crontab-crd.yaml"))
	s.kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/crontabs.stable.example.com")
	s.kubectl("apply", "-f", testdata("crontab-valid.yaml"))
	out, err := s.kubectlRun("apply", "-f", testdata("crontab-invalid.yaml"))
	if err == nil || !strings.Contains(out, "spec.replicas: Invalid value: 15") {
		s.t.Fatalf("an invalid CronTab: %v\n%s", err, out)
	}
	if out := s.kubectl("get", "crontabs", "-o", "name"); strings.TrimSpace(out) != "crontab.stable.example.com/my-new-cron-object" {
		s.t.Fatalf("kubectl get crontabs: %q", out)
	}
	s.kubectl("delete", "crontab", "my-new-cron-object")
	if out := s.kubectl("get", "ct"); !strings.Contains(out, "No resources found") {
		s.t.Fatalf("kubectl get ct after the delete: %q", out)
	}
	// The registry checks CRD writes with the validators (its
	// --validator-addr): a CEL rule that does not compile is a 422 (-v=6
	// logs the response's status).
	out, err = s.kubectlRun("create", "-f", testdata("registry-cel-crd.yaml"), "-v=6")
	if err == nil || !strings.Contains(out, "422 Unprocessable Entity") ||
		!strings.Contains(out, `The CustomResourceDefinition "rules.registry.example.com" is invalid`) ||
		!strings.Contains(out, "compilation failed: ERROR: <input>:1:16: Syntax error") {
		s.t.Fatalf("a CRD whose CEL rule does not compile: %v\n%s", err, out)
	}
	if out, err := s.kubectlRun("get", "crd", "rules.registry.example.com"); err == nil || !strings.Contains(out, "NotFound") {
		s.t.Fatalf("the CRD with a rule that does not compile was stored: %v\n%s", err, out)
	}
	s.t.Log("kubectl scenario passed")
}

// load creates CronTabs from several workers until stopped, recording every
// attempt.
type load struct {
	t      *testing.T
	client *http.Client
	url    string

	mu      sync.Mutex
	results []result

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

type result struct {
	start time.Time
	end   time.Time
	name  string
	uid   string
	err   error // nil: 201 Created
}

// kubeClient is an HTTP client with kubeconfig's credentials, and the
// server's URL without a trailing slash.
func kubeClient(t testing.TB, kubeconfig string) (*http.Client, string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, strings.TrimSuffix(cfg.Host, "/")
}

func newLoad(t *testing.T, kubeconfig string) *load {
	client, host := kubeClient(t, kubeconfig)
	return &load{t: t, client: client, url: host + "/apis/stable.example.com/v1/namespaces/default/crontabs"}
}

func (l *load) start(workers int) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	run := rand.Uint32()
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("load-%x-%d-%d", run, w, i)
				start := time.Now()
				uid, err := l.create(ctx, name)
				if ctx.Err() != nil && err != nil {
					return // stopping
				}
				l.mu.Lock()
				l.results = append(l.results, result{start: start, end: time.Now(), name: name, uid: uid, err: err})
				l.mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
}

func (l *load) stop() {
	l.once.Do(func() {
		l.cancel()
		l.wg.Wait()
	})
}

func (l *load) create(ctx context.Context, name string) (string, error) {
	body := fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":%q},"spec":{"cronSpec":"*/5 * * * *","image":"load","replicas":1}}`, name)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create %s: %s: %s", name, resp.Status, bytes.TrimSpace(b))
	}
	var obj struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &obj); err != nil || obj.Metadata.UID == "" {
		return "", fmt.Errorf("create %s: 201 without a uid: %v %s", name, err, b)
	}
	return obj.Metadata.UID, nil
}

func (l *load) between(from, to time.Time, ok bool) []result {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []result
	for _, r := range l.results {
		if !r.start.Before(from) && r.start.Before(to) && (r.err == nil) == ok {
			out = append(out, r)
		}
	}
	return out
}

// failedBetween are the failed attempts that ended in [from, to), in
// flight at from included.
func (l *load) failedBetween(from, to time.Time) []result {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []result
	for _, r := range l.results {
		if r.err != nil && !r.end.Before(from) && r.end.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// failures are the attempts started in [from, to) that failed.
func (l *load) failures(from, to time.Time) []result { return l.between(from, to, false) }

// acked counts the attempts started in [from, to) that got a 201.
func (l *load) acked(from, to time.Time) int { return len(l.between(from, to, true)) }

// verifyReadable GETs every acknowledged object: it must exist with the uid
// its create returned.
func (l *load) verifyReadable(t *testing.T) {
	all := l.between(time.Time{}, time.Now().Add(time.Hour), true)
	failed := len(l.between(time.Time{}, time.Now().Add(time.Hour), false))
	jobs := make(chan result)
	var mu sync.Mutex
	var lost []string
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				if err := l.get(r); err != nil {
					mu.Lock()
					lost = append(lost, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range all {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d creates acknowledged (%d attempts failed); %d of them not readable", len(all), failed, len(lost))
	if len(lost) > 0 {
		t.Errorf("acknowledged writes lost: %d, e.g. %s", len(lost), strings.Join(lost[:min(5, len(lost))], "; "))
	}
}

func (l *load) get(r result) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.url+"/"+r.name, nil)
		resp, err := l.client.Do(req)
		if err != nil {
			cancel()
			lastErr = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s: 404", r.name)
		}
		if resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("%s: %s: %s", r.name, resp.Status, b)
			continue
		}
		var obj struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: %v", r.name, err)
		}
		if obj.Metadata.UID != r.uid {
			return fmt.Errorf("%s: uid %s, created as %s", r.name, obj.Metadata.UID, r.uid)
		}
		return nil
	}
	return lastErr
}

// kubectlBinary is the pinned kubectl 1.33 (KUBECTL overrides it).
func kubectlBinary() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	for _, p := range []string{"/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/local/bin/kubectl.1.33", "/usr/bin/kubectl.1.33"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}
