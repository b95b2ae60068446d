package celconv

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// RoundTripWarnings checks, for every version pair with a rule in either
// direction, that each field of one version's schema survives a
// conversion to the other version and back, and returns a warning for
// each field that may not. A field survives when the other version has it
// at the same path and the rule there does not overwrite it (it is carried
// along), or when the rule there reads it and the rule back sets it (or an
// object holding it). The check is static: an expression that reads a
// field but loses information (a substring) is not found, and a field
// that an expression reads only under a condition counts as read.
func RoundTripWarnings(crd *apiextensionsv1.CustomResourceDefinition, r *Rules) []string {
	if r == nil {
		return nil
	}
	schemas := map[string]*schema.Structural{}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if s, err := structuralOf(v.Schema.OpenAPIV3Schema); err == nil {
			schemas[v.Name] = s
		}
	}
	seen := map[[2]string]bool{}
	var keys [][2]string
	for k := range r.pairs {
		for _, kk := range [][2]string{k, {k[1], k[0]}} {
			if !seen[kk] {
				seen[kk] = true
				keys = append(keys, kk)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	var out []string
	for _, k := range keys {
		a, b := k[0], k[1]
		sa, sb := schemas[a], schemas[b]
		if sa == nil || sb == nil {
			continue
		}
		there, back := r.pairs[[2]string{a, b}], r.pairs[[2]string{b, a}]
		for _, leaf := range leaves(sa, nil) {
			if reason := lost(leaf, b, sb, there, back); reason != "" {
				out = append(out, fmt.Sprintf("%s: %s field %s does not round-trip through %s: %s", Annotation, a, strings.Join(leaf, "."), b, reason))
			}
		}
	}
	return out
}

// lost says why leaf (a field of version a) may not come back from a
// conversion a → b → a ("" when it does).
func lost(leaf []string, b string, sb *schema.Structural, there, back *pair) string {
	overwritten := there != nil && there.sets(leaf)
	if !overwritten && has(sb, leaf) {
		// carried to b as it is; back, carried again or recomputed
		return ""
	}
	if there == nil || !there.reads(leaf) {
		if there == nil {
			return fmt.Sprintf("%s has no such field and no rule converts to %s", b, b)
		}
		return fmt.Sprintf("the rule to %s does not read it", there.to)
	}
	if back == nil {
		return fmt.Sprintf("no rule converts %s back to %s", there.to, there.from)
	}
	if !back.setsOrAbove(leaf) {
		return fmt.Sprintf("the rule from %s back to %s does not set it", back.from, back.to)
	}
	return ""
}

// sets: a field of p is leaf, above it or below it (leaf's value changes).
func (p *pair) sets(leaf []string) bool {
	for _, f := range p.fields {
		if prefix(f.path, leaf) || prefix(leaf, f.path) {
			return true
		}
	}
	return false
}

// setsOrAbove: a field of p is leaf or holds it.
func (p *pair) setsOrAbove(leaf []string) bool {
	for _, f := range p.fields {
		if prefix(f.path, leaf) {
			return true
		}
	}
	return false
}

// reads: an expression of p selects leaf, something holding it, or
// something below it.
func (p *pair) reads(leaf []string) bool {
	for _, f := range p.fields {
		for _, r := range f.reads {
			if prefix(r, leaf) || prefix(leaf, r) {
				return true
			}
		}
	}
	return false
}

// prefix reports whether a is a prefix of b (or equal).
func prefix(a, b []string) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}

// has reports whether s has a property at path.
func has(s *schema.Structural, path []string) bool {
	cur := s
	for _, name := range path {
		if cur.XPreserveUnknownFields {
			return true
		}
		p, ok := cur.Properties[name]
		if !ok {
			return false
		}
		cur = &p
	}
	return true
}

// leaves are the property paths of s that have no properties below them
// (objects with properties are walked into; arrays and maps are leaves),
// apiVersion, kind and metadata left out at the root.
func leaves(s *schema.Structural, path []string) [][]string {
	if len(s.Properties) == 0 {
		if path == nil {
			return nil
		}
		return [][]string{slices.Clone(path)}
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		if path == nil && (n == "apiVersion" || n == "kind" || n == "metadata") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var out [][]string
	for _, n := range names {
		p := s.Properties[n]
		out = append(out, leaves(&p, append(path, n))...)
	}
	return out
}
