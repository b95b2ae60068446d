// Package upstream is the side-by-side benchmark harness: upstream
// apiextensions-apiserver v1.33 (the conformance oracle's reference build,
// bin/apiextensions-upstream, with its embedded etcd) and crdplane's
// all-in-one binary, each started as a process on loopback with its own data
// directory, measured by the same client in the same run.
//
// Start gives both; Target.Get reads as client-go does (HTTP/2, gzip
// accepted) and reports the bytes that crossed the wire. The benchmarks in
// this package use it; later ones (server-side apply, scale) add theirs
// beside them.
package upstream

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crdplane/crdplane/conformance"
)

// Target is one server under measurement.
type Target struct {
	Name   string // "upstream" or "crdplane"
	URL    string
	Token  string
	Client *http.Client
	server *conformance.Server
}

// binary is $env, or the file under the repository's bin/ that make builds.
func binary(env, name string) (string, error) {
	if b := os.Getenv(env); b != "" {
		return b, nil
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: build it first (make bench-upstream builds both binaries) or set %s", p, env)
	}
	return p, nil
}

// Start runs upstream and crdplane (UPSTREAM_BIN and CRDPLANE_BIN, default
// bin/apiextensions-upstream and bin/crdplane) with their data under dir;
// stop ends both.
func Start(ctx context.Context, dir string) (targets []*Target, stop func(), err error) {
	upBin, err := binary("UPSTREAM_BIN", "apiextensions-upstream")
	if err != nil {
		return nil, nil, err
	}
	cpBin, err := binary("CRDPLANE_BIN", "crdplane")
	if err != nil {
		return nil, nil, err
	}
	up, err := conformance.StartUpstream(ctx, upBin, filepath.Join(dir, "upstream"))
	if err != nil {
		return nil, nil, err
	}
	cp, err := conformance.StartCrdplane(ctx, cpBin, filepath.Join(dir, "crdplane"), runFlags()...)
	if err != nil {
		up.Stop()
		return nil, nil, err
	}
	return []*Target{newTarget(up), newTarget(cp)}, func() { cp.Stop(); up.Stop() }, nil
}

// runFlags are CRDPLANE_RUN_FLAGS, split at spaces: flags added to every
// `crdplane run` of the harness (to measure a setting, e.g.
// "--batch-window=1ms", against the default in consecutive runs).
func runFlags() []string {
	return strings.Fields(os.Getenv("CRDPLANE_RUN_FLAGS"))
}

// StartOne runs one server, "upstream", "crdplane" or "crdplane-base" (a
// second crdplane binary, CRDPLANE_BASE_BIN, to measure a change before
// and after in one run), with its data under dir; extra flags go to
// crdplane run (upstream takes none). The scale
// benchmark starts a fresh one per count, so that each count is measured
// alone.
func StartOne(ctx context.Context, name, dir string, extra ...string) (*Target, func(), error) {
	var s *conformance.Server
	switch name {
	case "upstream":
		bin, err := binary("UPSTREAM_BIN", "apiextensions-upstream")
		if err != nil {
			return nil, nil, err
		}
		if s, err = conformance.StartUpstream(ctx, bin, dir); err != nil {
			return nil, nil, err
		}
	case "crdplane", "crdplane-base":
		env := "CRDPLANE_BIN"
		if name == "crdplane-base" {
			env = "CRDPLANE_BASE_BIN"
		}
		bin, err := binary(env, "crdplane")
		if err != nil {
			return nil, nil, err
		}
		if s, err = conformance.StartCrdplane(ctx, bin, dir, append(runFlags(), extra...)...); err != nil {
			return nil, nil, err
		}
		s.Name = name
	default:
		return nil, nil, fmt.Errorf("unknown server %q (upstream or crdplane)", name)
	}
	return newTarget(s), s.Stop, nil
}

// Memory is the server process's resident set now and at its peak
// (VmRSS and VmHWM of /proc/<pid>/status), in bytes.
func (t *Target) Memory() (rss, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", t.server.Pid()))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", t.server.Pid())
	}
	return rss, peak, nil
}

func newTarget(s *conformance.Server) *Target {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback benchmark servers only
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		// The body is read as it arrives, so its size on the wire is
		// known; Get asks for gzip itself, as Go's transport (and so
		// client-go) does by default.
		DisableCompression: true,
	}
	return &Target{Name: s.Name, URL: s.URL, Token: s.Token, server: s,
		Client: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// Response is what one read returned.
type Response struct {
	Status      int
	ContentType string
	// WireBytes is the size of the body as sent (compressed when the
	// server compressed it).
	WireBytes int
	// Body is the body, decompressed when decode was asked for.
	Body []byte
}

// Get reads path with the given Accept, accepting gzip as client-go does.
// With decode, a compressed body is decompressed into Body.
func (t *Target) Get(ctx context.Context, path, accept string, decode bool) (Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL+path, nil)
	if err != nil {
		return Response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	req.Header.Set("Accept-Encoding", "gzip")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, err
	}
	r := Response{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), WireBytes: len(raw), Body: raw}
	if decode && resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return r, err
		}
		if r.Body, err = io.ReadAll(zr); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Post sends a JSON body and returns the status and body.
func (t *Target) Post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Send sends method to path with a body of contentType (none when empty)
// and returns the status and body.
func (t *Target) Send(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// CPU is the CPU time (user + system) the target's server process has
// used so far, from /proc/<pid>/stat (Linux; clock ticks of 10 ms). Each
// server runs its storage in the same process (crdplane run's embedded
// etcd, the reference's), so this is all of a request's server-side work.
func (t *Target) CPU() (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", t.server.Pid())) //nolint:gosec // G703: the pid of the server process this harness started
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields counted are those after its closing parenthesis.
	rest := data[bytes.LastIndexByte(data, ')')+2:]
	fields := strings.Fields(string(rest))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", t.server.Pid(), len(fields))
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64) // field 14
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err != nil {
		return 0, err
	}
	const tick = 10 * time.Millisecond // USER_HZ 100
	return time.Duration(utime+stime) * tick, nil
}

// CRDCollection is the path of the CustomResourceDefinitions.
const CRDCollection = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// BenchCRD is the i-th CRD of a seeded set: group bench.example.com, a
// namespaced kind with a spec/status schema of a dozen fields and a
// printer column, about 2 KiB of JSON.
func BenchCRD(i int) []byte { return GroupCRD("bench.example.com", i) }

// GroupCRD is BenchCRD's i-th CRD in the given group.
func GroupCRD(group string, i int) []byte {
	kind := fmt.Sprintf("Widget%d", i)
	plural := fmt.Sprintf("widget%ds", i)
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group, "labels": map[string]string{"bench": "crds"}},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": fmt.Sprintf("widget%d", i), "kind": kind, "shortNames": []string{fmt.Sprintf("wg%d", i)}, "categories": []string{"bench"}},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"additionalPrinterColumns": []any{
					map[string]any{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
					map[string]any{"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
				},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "description": "The desired state of the widget.", "properties": map[string]any{
							"replicas": map[string]any{"type": "integer", "minimum": 0, "default": 1},
							"image":    map[string]any{"type": "string", "maxLength": 256},
							"mode":     map[string]any{"type": "string", "enum": []string{"Fast", "Safe", "Off"}},
							"ports": map[string]any{"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []string{"name"}, "items": map[string]any{
								"type": "object", "required": []string{"name"}, "properties": map[string]any{
									"name": map[string]any{"type": "string"}, "port": map[string]any{"type": "integer", "maximum": 65535},
								}}},
							"labels":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
							"schedule": map[string]any{"type": "string", "pattern": "^[0-9*/, -]+$"},
						}},
						"status": map[string]any{"type": "object", "properties": map[string]any{
							"phase":              map[string]any{"type": "string"},
							"observedGeneration": map[string]any{"type": "integer"},
							"conditions": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
								"type": map[string]any{"type": "string"}, "status": map[string]any{"type": "string"}, "reason": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"},
							}}},
						}},
					},
				}},
			}},
		},
	}
	b, _ := json.Marshal(crd)
	return b
}

// SeedCRDs creates n CRDs (BenchCRD 0..n-1) on every target, 16 at a time.
func SeedCRDs(ctx context.Context, targets []*Target, n int) error {
	for _, t := range targets {
		var wg sync.WaitGroup
		work := make(chan int)
		var mu sync.Mutex
		var firstErr error
		for range 16 {
			wg.Go(func() {
				for i := range work {
					code, body, err := t.Post(ctx, CRDCollection, BenchCRD(i))
					if err == nil && code != http.StatusCreated && code != http.StatusConflict {
						err = fmt.Errorf("%s: create CRD %d: %d %s", t.Name, i, code, body)
					}
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
	}
	return nil
}

// Settle waits until t's process is idle: under idle of one core (0.05 is
// 5 %) over a window, or until max has passed. Seeding a thousand CRDs
// leaves a server busy after its answers (crdplane's registry establishing
// them and rebuilding discovery, upstream's controllers and OpenAPI): a
// benchmark started before would count that work in its CPU per op. It
// returns how long it waited.
func (t *Target) Settle(ctx context.Context, idle float64, window, maxWait time.Duration) (time.Duration, error) {
	began := time.Now()
	for time.Since(began) < maxWait {
		c0, err := t.CPU()
		if err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		c1, err := t.CPU()
		if err != nil {
			return 0, err
		}
		if float64(c1-c0) < idle*float64(window) {
			return time.Since(began), nil
		}
	}
	return time.Since(began), nil
}
