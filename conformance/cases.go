package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// File is one case file: a sequence of steps run in order against both
// servers. A file starts from an empty server as far as its own objects go:
// the CRDs it creates are deleted when it ends.
type File struct {
	Path        string `json:"-"`
	Description string `json:"description"`
	Steps       []Step `json:"steps"`
}

// Step is one thing to do on both servers. Exactly one of Request,
// WaitEstablished, WaitGone, Watch, WatchEvents and Sleep is set.
type Step struct {
	Name string `json:"name,omitempty"`

	// Request is sent to both servers and the answers compared.
	*Request

	// WaitEstablished names a CRD: wait until it is Established on both
	// servers and its resources answer a list (nothing is compared).
	WaitEstablished string `json:"waitEstablished,omitempty"`
	// WaitGone names a CRD: wait until both servers answer 404 for it.
	WaitGone string `json:"waitGone,omitempty"`
	// Watch starts a watch on both servers under an id.
	Watch *WatchStart `json:"watch,omitempty"`
	// WatchEvents reads events from a watch started earlier and compares them.
	WatchEvents *WatchRead `json:"watchEvents,omitempty"`
	// Sleep pauses, e.g. "500ms".
	Sleep string `json:"sleep,omitempty"`
}

// Request is an HTTP request and how to compare its answers.
type Request struct {
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Body is any YAML value, sent as JSON (compact).
	Body json.RawMessage `json:"body,omitempty"`
	// RawBody is sent as written.
	RawBody *string `json:"rawBody,omitempty"`
	// BodyFile is a file (relative to the conformance directory) sent as
	// JSON, or as is when ContentType is YAML or the file is JSON.
	BodyFile    string `json:"bodyFile,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	// Protobuf sends the body (a built-in kind, with apiVersion and kind)
	// in the protobuf encoding client-go uses; ContentType defaults to
	// application/vnd.kubernetes.protobuf. Mangle spoils it afterwards:
	// truncate, badMagic, unknownField or noEnvelope.
	Protobuf bool              `json:"protobuf,omitempty"`
	Mangle   string            `json:"mangle,omitempty"`
	Accept   string            `json:"accept,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`

	// Status is the status code the case author expects from upstream; a
	// different one is an error in the case, not a difference.
	Status int `json:"status,omitempty"`
	// Capture takes values out of each server's own JSON answer, by dotted
	// path (items[0].metadata.name), for ${name} in later paths and bodies.
	Capture map[string]string `json:"capture,omitempty"`
	// Ignore lists dotted paths dropped from both bodies before comparing
	// (each needs a comment in the case saying why).
	Ignore []string `json:"ignore,omitempty"`
	// UnorderedErrors: the order of a Status's causes (and of the list in
	// its message) is not compared, for errors upstream reports in map order.
	UnorderedErrors bool `json:"unorderedErrors,omitempty"`
	// SkipUnresolved skips the step when a ${variable} it uses was never
	// captured (generated updates of objects whose create failed).
	SkipUnresolved bool `json:"skipUnresolved,omitempty"`
	// CompareStatusOnly compares status code and headers only.
	CompareStatusOnly bool `json:"compareStatusOnly,omitempty"`
}

// WatchStart opens a watch.
type WatchStart struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	Accept string `json:"accept,omitempty"`
}

// WatchRead reads Count events (default 1) within Timeout (default 10s).
type WatchRead struct {
	ID      string `json:"id"`
	Count   int    `json:"count,omitempty"`
	Timeout string `json:"timeout,omitempty"`
	// Close ends the watch after reading.
	Close bool `json:"close,omitempty"`
}

// Kind names what a step does.
func (s Step) Kind() string {
	switch {
	case s.Request != nil && s.Request.Path != "":
		return "request"
	case s.WaitEstablished != "":
		return "waitEstablished"
	case s.WaitGone != "":
		return "waitGone"
	case s.Watch != nil:
		return "watch"
	case s.WatchEvents != nil:
		return "watchEvents"
	case s.Sleep != "":
		return "sleep"
	}
	return ""
}

// ID is how a step is named in reports and in the allowlist:
// "<file base name>#<index>" plus its name when it has one.
func (f *File) ID(i int) string {
	base := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	return fmt.Sprintf("%s#%d", base, i)
}

// LoadFiles reads every *.yaml under dir (recursively), sorted by path.
func LoadFiles(dir string) ([]*File, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var files []*File
	for _, p := range paths {
		f, err := LoadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// LoadFile reads and checks one case file.
func LoadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Path = path
	if len(f.Steps) == 0 {
		return nil, fmt.Errorf("%s: no steps", path)
	}
	for i, s := range f.Steps {
		if s.Kind() == "" {
			return nil, fmt.Errorf("%s: step %d (%s) does nothing: set path, waitEstablished, waitGone, watch, watchEvents or sleep", path, i, s.Name)
		}
		if s.Request != nil && s.Request.Path != "" {
			if s.Method == "" {
				return nil, fmt.Errorf("%s: step %d (%s): method is required", path, i, s.Name)
			}
			n := 0
			if len(s.Body) > 0 {
				n++
			}
			if s.RawBody != nil {
				n++
			}
			if s.BodyFile != "" {
				n++
			}
			if n > 1 {
				return nil, fmt.Errorf("%s: step %d (%s): set one of body, rawBody, bodyFile", path, i, s.Name)
			}
			if (s.Protobuf && s.RawBody != nil) || (s.Mangle != "" && !s.Protobuf) {
				return nil, fmt.Errorf("%s: step %d (%s): protobuf takes body or bodyFile; mangle needs protobuf", path, i, s.Name)
			}
		}
	}
	return &f, nil
}

// Requests counts the request steps of the files.
func Requests(files []*File) int {
	n := 0
	for _, f := range files {
		for _, s := range f.Steps {
			if s.Kind() == "request" {
				n++
			}
		}
	}
	return n
}
