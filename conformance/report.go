package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Listed is a step whose difference is known: in the allowlist (deliberate,
// with a reason a reviewer accepts) or in the pending list (a crdplane bug
// not fixed yet, with the issue that tracks it).
type Listed struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Issue  int    `json:"issue,omitempty"`
}

// List is an allowlist or pending file.
type List struct {
	Entries []Listed `json:"entries"`
}

// LoadList reads a list; a missing file is an empty list. Every entry needs
// an id and a reason.
func LoadList(path string) (map[string]Listed, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]Listed{}, nil
	}
	if err != nil {
		return nil, err
	}
	var l List
	if err := yaml.UnmarshalStrict(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]Listed{}
	for _, e := range l.Entries {
		if e.ID == "" || strings.TrimSpace(e.Reason) == "" {
			return nil, fmt.Errorf("%s: every entry needs an id and a reason: %+v", path, e)
		}
		if _, dup := out[e.ID]; dup {
			return nil, fmt.Errorf("%s: %s listed twice", path, e.ID)
		}
		out[e.ID] = e
	}
	return out, nil
}

// Summary is what a run found.
type Summary struct {
	Requests, Identical int
	Allowed, Pending    []Result
	Unexpected          []Result
	// Stale are listed ids whose answers are now identical (or that no
	// case has): the list must shrink with the fixes.
	Stale []string
}

// Summarise sorts results against the allowlist and the pending list.
func Summarise(results []Result, allow, pending map[string]Listed) Summary {
	var s Summary
	seen := map[string]bool{}
	for _, r := range results {
		s.Requests++
		seen[r.ID] = true
		_, allowed := allow[r.ID]
		_, isPending := pending[r.ID]
		switch {
		case r.Identical:
			s.Identical++
			if allowed || isPending {
				s.Stale = append(s.Stale, r.ID)
			}
		case allowed:
			s.Allowed = append(s.Allowed, r)
		case isPending:
			s.Pending = append(s.Pending, r)
		default:
			s.Unexpected = append(s.Unexpected, r)
		}
	}
	for _, l := range []map[string]Listed{allow, pending} {
		for id := range l {
			if !seen[id] {
				s.Stale = append(s.Stale, id)
			}
		}
	}
	sort.Strings(s.Stale)
	return s
}

// Line is the one-line summary.
func (s Summary) Line() string {
	return fmt.Sprintf("%d requests, %d identical (%d allowed, %d pending, %d unexpected differences)",
		s.Requests, s.Identical, len(s.Allowed), len(s.Pending), len(s.Unexpected))
}

// WriteDiffs writes one file per difference into dir (emptied first), and
// with all set one file per identical answer too (<id>.same).
func WriteDiffs(dir string, results []Result, all bool) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, r := range results {
		base := strings.NewReplacer("#", "-", "/", "_").Replace(r.ID)
		if r.Identical {
			if all {
				text := fmt.Sprintf("%s %s\n%s\n", r.ID, r.Name, r.Upstream)
				if err := os.WriteFile(filepath.Join(dir, base+".same"), []byte(text), 0o644); err != nil {
					return err
				}
			}
			continue
		}
		name := base + ".diff"
		text := fmt.Sprintf("%s %s\n(- upstream, + crdplane)\n%s\n--- upstream\n%s\n--- crdplane\n%s\n", r.ID, r.Name, r.Diff(), r.Upstream, r.Crdplane)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
