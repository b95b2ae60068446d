package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOracle runs every case file against upstream apiextensions-apiserver
// and crdplane and fails on any difference that is neither allowed nor
// pending. CONFORMANCE_CASES (a substring of file names) narrows the run;
// CONFORMANCE_OUT is where the diffs go (default out/); CONFORMANCE_DUMP=1
// writes the identical answers there too. CONFORMANCE_SELF=1 runs upstream
// on both sides: the check of a new case file and of the normalisation.
func TestOracle(t *testing.T) {
	if os.Getenv("CRDPLANE_CONFORMANCE") == "" {
		t.Skip("the oracle starts two API servers: run it with make conformance (CRDPLANE_CONFORMANCE=1)")
	}
	ctx := context.Background()
	files, err := LoadFiles("cases")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := operatorFiles()
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, ops...)
	if only := os.Getenv("CONFORMANCE_CASES"); only != "" {
		var kept []*File
		for _, f := range files {
			for _, part := range strings.Split(only, ",") {
				if strings.Contains(f.Path, part) {
					kept = append(kept, f)
					break
				}
			}
		}
		files = kept
	}
	allow, err := LoadList("allowlist.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pending, err := LoadList("pending.yaml")
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	up, err := StartUpstream(ctx, binary(t, "UPSTREAM_BIN", "upstream"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer up.Stop()
	var cp *Server
	if os.Getenv("CONFORMANCE_SELF") != "" {
		// The oracle's own check: upstream on both sides must come out
		// identical (normalisation, new cases' expectations).
		cp, err = StartUpstream(ctx, binary(t, "UPSTREAM_BIN", "upstream"), t.TempDir())
	} else {
		cp, err = StartCrdplane(ctx, binary(t, "CRDPLANE_BIN", "crdplane"), t.TempDir())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	t.Logf("servers ready in %s: upstream %s, crdplane %s", time.Since(start).Round(time.Millisecond), up.URL, cp.URL)

	hook := StartConversionWebhook()
	defer hook.Close()
	r := &Runner{Upstream: up, Crdplane: cp, Dir: ".", Vars: hook.Vars()}
	var results []Result
	// Files use their own groups and clean up after themselves, so several
	// run at once (CONFORMANCE_PARALLEL, default 4; 1 runs them in order).
	parallel := 4
	if v := os.Getenv("CONFORMANCE_PARALLEL"); v != "" {
		if parallel, err = strconv.Atoi(v); err != nil || parallel < 1 {
			t.Fatalf("CONFORMANCE_PARALLEL=%q", v)
		}
	}
	perFile := make([][]Result, len(files))
	errs := make([]error, len(files))
	took := make([]time.Duration, len(files))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			begin := time.Now()
			perFile[i], errs[i] = r.RunFile(ctx, f)
			took[i] = time.Since(begin)
		}()
	}
	wg.Wait()
	for i, f := range files {
		results = append(results, perFile[i]...)
		if errs[i] != nil {
			t.Errorf("%s: %v", f.Path, errs[i])
		}
		if took[i] > 20*time.Second {
			t.Logf("%s took %s", f.Path, took[i].Round(time.Millisecond))
		}
	}
	out := os.Getenv("CONFORMANCE_OUT")
	if out == "" {
		out = "out"
	}
	if err := WriteDiffs(out, results, os.Getenv("CONFORMANCE_DUMP") != ""); err != nil {
		t.Fatal(err)
	}
	s := Summarise(results, allow, pending)
	if len(s.Unexpected) > 0 {
		// A difference must reproduce: the files it came from run again,
		// one at a time, and a step that answers identically then is
		// reported as flaky (a race in a case or in a server), not failed.
		var flaky []string
		results, flaky = rerun(ctx, t, r, files, results, s.Unexpected)
		if len(flaky) > 0 {
			t.Logf("flaky (differed once, identical on a second run): %s", strings.Join(flaky, ", "))
		}
		if err := WriteDiffs(out, results, os.Getenv("CONFORMANCE_DUMP") != ""); err != nil {
			t.Fatal(err)
		}
		s = Summarise(results, allow, pending)
	}
	if os.Getenv("CONFORMANCE_CASES") != "" {
		s.Stale = nil // a partial run cannot tell
	}
	t.Logf("%d files in %s", len(files), time.Since(start).Round(time.Millisecond))
	t.Log(s.Line())
	for _, r := range s.Unexpected {
		t.Errorf("%s (%s) differs (%s/%s.diff):\n%s", r.ID, r.Name, out, strings.ReplaceAll(r.ID, "#", "-"), r.Diff())
	}
	for _, id := range s.Stale {
		t.Errorf("%s is listed in allowlist.yaml or pending.yaml but answers identically (or no longer exists): remove it", id)
	}
	if t.Failed() {
		t.Logf("upstream logs:\n%s\ncrdplane logs:\n%s", up.Logs(), cp.Logs())
	}
}

// rerun runs again, in order, the files that unexpected results came from,
// and returns the results with those files' replaced, and the ids that
// differed the first time and not the second.
func rerun(ctx context.Context, t *testing.T, r *Runner, files []*File, results []Result, unexpected []Result) ([]Result, []string) {
	differed := map[string]bool{}
	again := map[int]bool{}
	for _, u := range unexpected {
		differed[u.ID] = true
		for i, f := range files {
			if strings.HasPrefix(u.ID, strings.TrimSuffix(f.ID(0), "0")) {
				again[i] = true
			}
		}
	}
	replaced := map[string]Result{}
	for i := range files {
		if !again[i] {
			continue
		}
		res, err := r.RunFile(ctx, files[i])
		if err != nil {
			t.Errorf("%s (second run): %v", files[i].Path, err)
		}
		for _, x := range res {
			replaced[x.ID] = x
		}
	}
	var flaky []string
	for i, x := range results {
		if y, ok := replaced[x.ID]; ok {
			if differed[x.ID] && y.Identical {
				flaky = append(flaky, x.ID)
			}
			results[i] = y
		}
	}
	return results, flaky
}

// operatorFiles builds the case files of the operators in operators.yaml.
// CONFORMANCE_SEED (default 1) seeds the variants, CONFORMANCE_VARIANTS
// (default 3) says how many of each object: a larger number with a new seed
// each time is the oracle's fuzz mode (make conformance-fuzz).
func operatorFiles() ([]*File, error) {
	ops, err := LoadOperators("operators.yaml")
	if err != nil {
		return nil, err
	}
	seed, variants := int64(1), 3
	if v := os.Getenv("CONFORMANCE_SEED"); v != "" {
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("CONFORMANCE_SEED: %w", err)
		}
	}
	if v := os.Getenv("CONFORMANCE_VARIANTS"); v != "" {
		if variants, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("CONFORMANCE_VARIANTS: %w", err)
		}
	}
	var files []*File
	for _, o := range ops {
		dir, err := o.ModuleDir()
		if err != nil {
			return nil, err
		}
		f, err := OperatorFile(o, dir, seed, variants)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Name, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// binary returns $env, or builds the named binary into the test's temp dir.
func binary(t *testing.T, env, which string) string {
	if b := os.Getenv(env); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), which)
	var cmd *exec.Cmd
	if which == "upstream" {
		cmd = exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = "upstream"
		cmd.Env = append(os.Environ(), "GOWORK=off")
	} else {
		cmd = exec.Command("go", "build", "-o", out, "github.com/crdplane/crdplane/cmd/crdplane")
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("build %s: %v", which, err)
	}
	return out
}
