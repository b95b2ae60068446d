package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Result is the comparison of one request (or one read of watch events).
type Result struct {
	ID        string // file#index
	Name      string
	Upstream  string // normalised rendering
	Crdplane  string
	Identical bool
	// Skipped: a generated step whose variables were never captured (the
	// object it updates was not created); not counted.
	Skipped bool
}

// Diff is a line diff of the two renderings (- upstream, + crdplane).
func (r Result) Diff() string {
	return cmp.Diff(strings.Split(r.Upstream, "\n"), strings.Split(r.Crdplane, "\n"))
}

// Runner runs case files against the reference and crdplane.
type Runner struct {
	Upstream, Crdplane *Server
	// Dir is the conformance directory; bodyFile paths are relative to it.
	Dir string
	// Vars are set on both sides before each file (the conversion
	// webhook's URL and CA bundle).
	Vars map[string]string
	Now  func() time.Time
}

// side is one server's state while a file runs.
type side struct {
	srv     *Server
	norm    normalizer
	vars    map[string]string
	watches map[string]*watchStream
}

// RunFile runs one case file; errors are failures of the case itself (a
// server that does not answer, an expectation the reference does not meet),
// not differences.
func (r *Runner) RunFile(ctx context.Context, f *File) ([]Result, error) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	sides := [2]*side{
		{srv: r.Upstream, norm: normalizer{host: r.Upstream.Host(), now: now}, vars: map[string]string{}, watches: map[string]*watchStream{}},
		{srv: r.Crdplane, norm: normalizer{host: r.Crdplane.Host(), now: now}, vars: map[string]string{}, watches: map[string]*watchStream{}},
	}
	for _, s := range sides {
		for k, v := range r.Vars {
			s.vars[k] = v
		}
	}
	defer func() {
		for _, s := range sides {
			for _, w := range s.watches {
				w.close()
			}
		}
	}()
	crds := map[string]bool{}
	defer r.cleanup(ctx, sides, crds)

	var results []Result
	for i, st := range f.Steps {
		id := f.ID(i)
		switch st.Kind() {
		case "request":
			res, err := r.request(ctx, f, id, st, sides, crds)
			if err != nil {
				return results, fmt.Errorf("%s (%s): %w", id, st.Name, err)
			}
			if !res.Skipped {
				results = append(results, res)
			}
		case "waitEstablished":
			for _, s := range sides {
				if err := waitEstablished(ctx, s.srv, st.WaitEstablished); err != nil {
					return results, fmt.Errorf("%s: %s: %w", id, s.srv.Name, err)
				}
			}
		case "waitGone":
			for _, s := range sides {
				if err := waitGone(ctx, s.srv, st.WaitGone); err != nil {
					return results, fmt.Errorf("%s: %s: %w", id, s.srv.Name, err)
				}
			}
		case "watch":
			for _, s := range sides {
				w, err := startWatch(ctx, s.srv, s.subst(st.Watch.Path), st.Watch.Accept)
				if err != nil {
					return results, fmt.Errorf("%s: %s: %w", id, s.srv.Name, err)
				}
				s.watches[st.Watch.ID] = w
			}
		case "watchEvents":
			res, err := readWatches(id, st, sides)
			if err != nil {
				return results, err
			}
			results = append(results, res)
		case "sleep":
			d, err := time.ParseDuration(st.Sleep)
			if err != nil {
				return results, fmt.Errorf("%s: %w", id, err)
			}
			time.Sleep(d)
		}
	}
	return results, nil
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

func (s *side) subst(in string) string {
	return varRE.ReplaceAllStringFunc(in, func(m string) string {
		if v, ok := s.vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

const crdCollection = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

func (r *Runner) body(req *Request) ([]byte, string, error) {
	ct := req.ContentType
	switch {
	case req.RawBody != nil:
		return []byte(*req.RawBody), ct, nil
	case len(req.Body) > 0:
		if ct == "" {
			ct = "application/json"
		}
		if strings.Contains(ct, "yaml") {
			b, err := yaml.JSONToYAML(req.Body)
			return b, ct, err
		}
		return []byte(req.Body), ct, nil
	case req.BodyFile != "":
		b, err := os.ReadFile(filepath.Join(r.Dir, req.BodyFile))
		if err != nil {
			return nil, "", err
		}
		if ct == "" {
			ct = "application/json"
		}
		if strings.Contains(ct, "yaml") || strings.HasSuffix(req.BodyFile, ".json") {
			return b, ct, nil
		}
		j, err := yaml.YAMLToJSON(b)
		return j, ct, err
	}
	return nil, ct, nil
}

func (r *Runner) request(ctx context.Context, f *File, id string, st Step, sides [2]*side, crds map[string]bool) (Result, error) {
	req := st.Request
	body, ct, err := r.body(req)
	if err != nil {
		return Result{}, err
	}
	res := Result{ID: id, Name: st.Name}
	for _, s := range sides {
		if m := varRE.FindString(s.subst(req.Path) + s.subst(string(body))); m != "" {
			if req.SkipUnresolved {
				return Result{Skipped: true}, nil
			}
			return res, fmt.Errorf("%s: %s was never captured", s.srv.Name, m)
		}
	}
	var codes [2]int
	for i, s := range sides {
		h := http.Header{}
		if ct != "" && body != nil {
			h.Set("Content-Type", ct)
		}
		if req.Accept != "" {
			h.Set("Accept", req.Accept)
		}
		for k, v := range req.Headers {
			h.Set(k, s.subst(v))
		}
		var b []byte
		if body != nil {
			b = []byte(s.subst(string(body)))
		}
		normBody := b
		if req.Protobuf && b != nil {
			if b, err = protobufBody(b, req.Mangle); err != nil {
				return res, fmt.Errorf("%s: %w", id, err)
			}
			if req.ContentType == "" {
				h.Set("Content-Type", contentTypeProtobuf)
			}
		}
		path := s.subst(req.Path)
		resp, err := s.srv.Do(ctx, req.Method, path, h, b)
		if err != nil {
			if ctx.Err() != nil {
				return res, fmt.Errorf("%s: %w", s.srv.Name, err)
			}
			// No HTTP answer (a handler that panicked resets its stream):
			// that is the answer compared; the next request shows whether
			// the server still serves.
			text := "(no HTTP answer: the connection or stream was reset)"
			if i == 0 {
				res.Upstream = text
			} else {
				res.Crdplane = text
			}
			continue
		}
		rb, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return res, fmt.Errorf("%s: reading the answer: %w", s.srv.Name, err)
		}
		codes[i] = resp.StatusCode
		jb := rb
		if isProtobuf(resp.Header.Get("Content-Type")) {
			if j, ok := protobufToJSON(rb); ok {
				jb = j
			}
		}
		text := s.render(resp, rb, req, normBody)
		if i == 0 {
			res.Upstream = text
		} else {
			res.Crdplane = text
		}
		if len(req.Capture) > 0 {
			v, _ := decodeJSON(jb)
			for name, p := range req.Capture {
				// A failed request keeps the value captured before.
				if val := lookup(v, p); val != "" {
					s.vars[name] = val
				}
			}
		}
		if req.Method == http.MethodPost && path == crdCollection && resp.StatusCode < 300 {
			v, _ := decodeJSON(jb)
			if name := lookup(v, "metadata.name"); name != "" {
				crds[name] = true
			}
		}
	}
	if req.Status != 0 && codes[0] != req.Status {
		return res, fmt.Errorf("the reference answered %d, the case expects %d:\n%s", codes[0], req.Status, res.Upstream)
	}
	res.Identical = res.Upstream == res.Crdplane
	return res, nil
}

// headersCompared are the response headers clients read.
var headersCompared = []string{"Content-Type", "Warning", "Location", "Retry-After", "Vary", "Cache-Control", "Accept-Ranges", "Content-Range"}

func (s *side) render(resp *http.Response, b []byte, req *Request, reqBody []byte) string {
	norm := s.norm.forRequest(reqBody)
	var sb strings.Builder
	fmt.Fprintf(&sb, "HTTP %d\n", resp.StatusCode)
	if resp.Uncompressed {
		// the Go client asked for gzip and decompressed the body
		sb.WriteString("Content-Encoding: gzip\n")
	}
	for _, h := range headersCompared {
		vs := resp.Header.Values(h)
		if h == "Warning" {
			sort.Strings(vs)
		}
		for _, v := range vs {
			fmt.Fprintf(&sb, "%s: %s\n", h, norm.String(h, v))
		}
	}
	if req.CompareStatusOnly {
		return sb.String()
	}
	sb.WriteString("\n")
	if isProtobuf(resp.Header.Get("Content-Type")) {
		if j, ok := protobufToJSON(b); ok {
			b = j
			sb.WriteString("(protobuf)\n")
		} else {
			fmt.Fprintf(&sb, "(%d bytes that are not an enveloped protobuf message)\n", len(b))
		}
	}
	if j, ok := norm.JSON(b, req.Ignore, req.UnorderedErrors); ok {
		// The body is compared decoded; its layout (kube-apiserver indents
		// for curl, Wget and browsers) is compared here.
		if layout := jsonLayout(b); layout != "" {
			sb.WriteString("(" + layout + ")\n")
		}
		sb.WriteString(j)
	} else if y, ok := norm.YAML(b, req.Ignore, req.UnorderedErrors); ok && strings.Contains(resp.Header.Get("Content-Type"), "yaml") {
		sb.WriteString(y)
	} else {
		sb.WriteString(norm.String("", string(b)))
	}
	return sb.String()
}

// lookup reads a dotted path (a.b[0].c) from a decoded JSON value as a string.
func lookup(v any, path string) string {
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if i := strings.Index(part, "["); i >= 0 && strings.HasSuffix(part, "]") {
			n, err := strconv.Atoi(part[i+1 : len(part)-1])
			if err == nil {
				name, idx = part[:i], n
			}
		}
		if name != "" {
			m, ok := v.(map[string]any)
			if !ok {
				return ""
			}
			v = m[name]
		}
		if idx >= 0 {
			l, ok := v.([]any)
			if !ok || idx >= len(l) {
				return ""
			}
			v = l[idx]
		}
	}
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case json.Number:
		return t.String()
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

func getJSON(ctx context.Context, s *Server, path string) (int, any, error) {
	resp, err := s.Do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	v, _ := decodeJSON(b)
	return resp.StatusCode, v, nil
}

// waitEstablished waits until the CRD is Established and each served
// version's resource answers a list.
func waitEstablished(ctx context.Context, s *Server, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, v, err := getJSON(ctx, s, crdCollection+"/"+name)
		if err == nil && code == http.StatusOK && established(v) && servesAll(ctx, s, v) {
			if lookup(v, "metadata.generation") != "1" {
				// An updated CRD stays Established: nothing says when each
				// server's handlers have the new generation (both learn it
				// from a watch, within milliseconds). Give them a moment.
				time.Sleep(time.Second)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not established and served after 30s (last %d %v)", name, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func established(v any) bool {
	m, _ := v.(map[string]any)
	st, _ := m["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] == "Established" && cm["status"] == "True" {
			return true
		}
	}
	return false
}

func servesAll(ctx context.Context, s *Server, crd any) bool {
	group := lookup(crd, "spec.group")
	plural := lookup(crd, "status.acceptedNames.plural")
	m, _ := crd.(map[string]any)
	spec, _ := m["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, ver := range versions {
		vm, _ := ver.(map[string]any)
		if served, _ := vm["served"].(bool); !served {
			continue
		}
		code, _, err := getJSON(ctx, s, fmt.Sprintf("/apis/%s/%s/%s", group, vm["name"], plural))
		if err != nil || code != http.StatusOK {
			return false
		}
	}
	return true
}

func waitGone(ctx context.Context, s *Server, name string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, err := getJSON(ctx, s, crdCollection+"/"+name)
		if err == nil && code == http.StatusNotFound {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s still there after 60s (last %d %v)", name, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cleanup deletes the CRDs a file created (with their objects) on both
// servers so that the next file starts clean.
func (r *Runner) cleanup(ctx context.Context, sides [2]*side, crds map[string]bool) {
	for name := range crds {
		for _, s := range sides {
			// Finalizers a case left on objects would keep the CRD: clear
			// them first.
			r.clearFinalizers(ctx, s.srv, name)
			if resp, err := s.srv.Do(ctx, http.MethodDelete, crdCollection+"/"+name, nil, nil); err == nil {
				resp.Body.Close()
			}
		}
	}
	for name := range crds {
		for _, s := range sides {
			_ = waitGone(ctx, s.srv, name)
		}
	}
}

func (r *Runner) clearFinalizers(ctx context.Context, s *Server, crd string) {
	code, v, err := getJSON(ctx, s, crdCollection+"/"+crd)
	if err != nil || code != http.StatusOK {
		return
	}
	group, plural := lookup(v, "spec.group"), lookup(v, "status.acceptedNames.plural")
	ver := lookup(v, "status.storedVersions[0]")
	if ver == "" {
		ver = lookup(v, "spec.versions[0].name")
	}
	code, list, err := getJSON(ctx, s, fmt.Sprintf("/apis/%s/%s/%s", group, ver, plural))
	if err != nil || code != http.StatusOK {
		return
	}
	m, _ := list.(map[string]any)
	items, _ := m["items"].([]any)
	for _, it := range items {
		if lookup(it, "metadata.finalizers") == "" {
			continue
		}
		ns, name := lookup(it, "metadata.namespace"), lookup(it, "metadata.name")
		p := fmt.Sprintf("/apis/%s/%s/%s/%s", group, ver, plural, name)
		if ns != "" {
			p = fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s", group, ver, ns, plural, name)
		}
		h := http.Header{"Content-Type": {"application/merge-patch+json"}}
		if resp, err := s.Do(ctx, http.MethodPatch, p, h, []byte(`{"metadata":{"finalizers":null}}`)); err == nil {
			resp.Body.Close()
		}
	}
}

// watchStream is one open watch: its events arrive on a channel.
type watchStream struct {
	status int
	header http.Header
	events chan []byte
	cancel context.CancelFunc
}

func startWatch(ctx context.Context, s *Server, path, accept string) (*watchStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	h := http.Header{}
	if accept != "" {
		h.Set("Accept", accept)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header = h
	req.Header.Set("Authorization", "Bearer "+s.Token)
	// Watches outlive the client's request timeout.
	c := &http.Client{Transport: s.client.Transport}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &watchStream{status: resp.StatusCode, header: resp.Header, events: make(chan []byte, 1024), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(w.events)
		if isProtobuf(resp.Header.Get("Content-Type")) {
			readProtobufFrames(bufio.NewReader(resp.Body), w.events)
			return
		}
		dec := json.NewDecoder(bufio.NewReader(resp.Body))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return
			}
			w.events <- raw
		}
	}()
	return w, nil
}

func (w *watchStream) close() { w.cancel() }

func readWatches(id string, st Step, sides [2]*side) (Result, error) {
	rd := st.WatchEvents
	count := rd.Count
	if count == 0 {
		count = 1
	}
	timeout := 10 * time.Second
	if rd.Timeout != "" {
		d, err := time.ParseDuration(rd.Timeout)
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", id, err)
		}
		timeout = d
	}
	res := Result{ID: id, Name: st.Name}
	for i, s := range sides {
		w, ok := s.watches[rd.ID]
		if !ok {
			return res, fmt.Errorf("%s: no watch %q", id, rd.ID)
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "HTTP %d\nContent-Type: %s\n", w.status, w.header.Get("Content-Type"))
		timer := time.NewTimer(timeout)
	read:
		for n := 0; n < count; n++ {
			select {
			case ev, ok := <-w.events:
				if !ok {
					sb.WriteString("\n(watch ended)")
					break read
				}
				j, ok := s.norm.JSON(ev, nil, false)
				if !ok {
					j = string(ev)
				}
				sb.WriteString("\n" + j)
			case <-timer.C:
				sb.WriteString("\n(no more events within " + timeout.String() + ")")
				break read
			}
		}
		timer.Stop()
		if rd.Close {
			w.close()
			delete(s.watches, rd.ID)
		}
		if i == 0 {
			res.Upstream = sb.String()
		} else {
			res.Crdplane = sb.String()
		}
	}
	if strings.HasSuffix(res.Upstream, ")") && strings.Contains(res.Upstream, "(no more events") {
		return res, errors.New(id + ": the reference sent fewer events than the case reads:\n" + res.Upstream)
	}
	res.Identical = res.Upstream == res.Crdplane
	return res, nil
}

// jsonLayout tells an indented JSON document from a compact one (a
// document of one line is compact; "" for a body that is not a JSON
// object or array).
func jsonLayout(b []byte) string {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return ""
	}
	if bytes.Contains(t, []byte("\n  ")) {
		return "indented"
	}
	return ""
}
