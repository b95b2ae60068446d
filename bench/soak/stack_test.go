package soak

// The compose project under test (deploy/composestack) and what the soak
// adds to it: the conversion webhook's certificate, recovery and health
// waits, and the crash watch.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crdplane/crdplane/deploy/composestack"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

type stack struct {
	*composestack.Stack
	t *testing.T
}

// newStack prepares the soak's compose project: the deployment plus the
// conversion webhook (docker-compose.soak.yaml), whose certificate goes to
// SOAK_WEBHOOK_PKI; SOAK_KEEP=1 leaves it running after the test.
func newStack(t *testing.T) *stack {
	return &stack{
		Stack: composestack.New(t, composestack.Config{
			Root:          "../..",
			ProjectPrefix: "crdplanesoak",
			Files:         []string{"deploy/compose/docker-compose.yaml", "bench/soak/docker-compose.soak.yaml"},
			DirEnv:        []string{"SOAK_WEBHOOK_PKI"},
			KeepUp:        os.Getenv("SOAK_KEEP") == "1",
			UpTimeout:     6 * time.Minute,
			DownTimeout:   3 * time.Minute,
		}),
		t: t,
	}
}

// webhookPKI writes the conversion webhook's serving certificate (for the
// name soak-webhook) into SOAK_WEBHOOK_PKI and returns its CA.
func (s *stack) webhookPKI() []byte {
	s.t.Helper()
	dir := s.Getenv("SOAK_WEBHOOK_PKI")
	p, err := localpki.Generate([]string{"soak-webhook"}, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	// The webhook runs as 65532 without capabilities: readable by all
	// (a throw-away key of a test).
	if err := os.Chmod(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": p.ServingCertPEM, "tls.key": p.ServingKeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	return p.CACertPEM
}

// waitRecovered waits until a restarted container serves again: healthy
// for the crdplane services (their compose health check), /health true
// for an etcd member.
func (s *stack) waitRecovered(container, service string, timeout time.Duration) error {
	if strings.HasPrefix(service, "etcd-") {
		return s.WaitEtcdHealthy(container, timeout)
	}
	return s.WaitHealthy(container, timeout)
}

// waitAllHealthy waits until every long-running container of the project
// runs (and is healthy where it has a health check).
func (s *stack) waitAllHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		names, st, err := s.InspectAll()
		var bad []string
		if err != nil {
			bad = append(bad, err.Error())
		}
		services := 0
		for n, c := range st {
			if names[n] == "pki" { // an init step: it exits
				continue
			}
			services++
			if !c.Healthy() {
				h := ""
				if c.State.Health != nil {
					h = c.State.Health.Status
				}
				bad = append(bad, n+" "+c.State.Status+" "+h)
			}
		}
		if len(bad) == 0 && services > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(bad)
			return fmt.Errorf("not healthy after %s: %s", timeout, strings.Join(bad, ", "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// crashWatch tells crashes from kills: after every start (the first up
// and each restart the fault injector does) it records the container's
// StartedAt; a container that started again, was restarted by its restart
// policy (RestartCount), or is not running when nobody killed it crashed.
type crashWatch struct {
	s  *stack
	mu sync.Mutex
	// started: StartedAt as of the last start this test knows of.
	started map[string]string
	// restarts: RestartCount at that point.
	restarts map[string]int
	// busy: containers the fault injector is killing or restarting now.
	busy map[string]bool
	// crashes found by polling, container → description (first seen).
	crashes  map[string][]string
	reported map[string]string
	// logs: the container's last log lines when its first crash was seen.
	logs map[string]string
}

func newCrashWatch(s *stack) *crashWatch {
	return &crashWatch{s: s, started: map[string]string{}, restarts: map[string]int{}, busy: map[string]bool{},
		crashes: map[string][]string{}, reported: map[string]string{}, logs: map[string]string{}}
}

// baseline records every container's current start.
func (w *crashWatch) baseline() error {
	_, st, err := w.s.InspectAll()
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, c := range st {
		w.started[n] = c.State.StartedAt
		w.restarts[n] = c.RestartCount
	}
	return nil
}

func (w *crashWatch) beginFault(c string) {
	w.mu.Lock()
	w.busy[c] = true
	w.mu.Unlock()
}

// endFault records the start the fault injector did.
func (w *crashWatch) endFault(c string) {
	st, err := w.s.Inspect(c)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.started[c] = st[c].State.StartedAt
		w.restarts[c] = st[c].RestartCount
	}
	delete(w.busy, c)
}

// check polls every container once; it returns the crashes newly found.
func (w *crashWatch) check() []string {
	names, st, err := w.s.InspectAll()
	if err != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var found []string
	for n, c := range st {
		if w.busy[n] {
			continue
		}
		svc := names[n]
		var why string
		switch {
		case svc == "pki":
			if c.State.Running || c.State.ExitCode == 0 {
				continue
			}
			why = fmt.Sprintf("pki exited %d", c.State.ExitCode)
		case c.State.OOMKilled:
			why = "OOM-killed"
		case c.RestartCount > w.restarts[n]:
			why = fmt.Sprintf("restarted by its restart policy (RestartCount %d → %d)", w.restarts[n], c.RestartCount)
		case w.started[n] != "" && c.State.StartedAt != w.started[n]:
			why = fmt.Sprintf("started again at %s (last known start %s)", c.State.StartedAt, w.started[n])
		case w.started[n] == "":
			why = "a container that did not exist at the start"
		case !c.State.Running:
			why = fmt.Sprintf("%s, exit code %d at %s", c.State.Status, c.State.ExitCode, c.State.FinishedAt)
		default:
			continue
		}
		key := why
		if w.reported[n] == key {
			continue
		}
		w.reported[n] = key
		w.crashes[n] = append(w.crashes[n], why)
		found = append(found, n+": "+why)
		if _, ok := w.logs[n]; !ok {
			out, _ := w.s.Docker("logs", "--tail", "40", n)
			w.logs[n] = out
		}
		// Later polls compare with what is seen now.
		w.started[n] = c.State.StartedAt
		w.restarts[n] = c.RestartCount
	}
	return found
}

func (w *crashWatch) all() (map[string][]string, map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := map[string][]string{}
	for k, v := range w.crashes {
		m[k] = slices.Clone(v)
	}
	logs := map[string]string{}
	for k, v := range w.logs {
		logs[k] = v
	}
	return m, logs
}
