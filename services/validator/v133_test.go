package validator

import (
	"regexp"
	"slices"
)

// The upstream library this module builds with (k8s.io/apiextensions-
// apiserver v0.37) reports a failed CEL rule's failing value (omitted for
// objects and arrays); upstream v1.33, the specification, reports the
// schema's type name ("object", "string", ...) as the value. The
// differential tests compare the rest with the library; asV133 makes a
// library error comparable with ours where ours carries a type name.

// ruleValueRE splits an Invalid or Duplicate error into its head, its
// value (a quoted string, a number, a boolean or null; none when omitted)
// and the rest.
var ruleValueRE = regexp.MustCompile(`^(.*?: (?:Invalid|Duplicate) value)(?:: ("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null))?(: .*|)$`)

var typeNames = []string{`"object"`, `"array"`, `"string"`, `"integer"`, `"number"`, `"boolean"`, `""`}

// asV133 returns got and up with the values dropped from the errors of got
// whose value is a type name and from the errors of up that then read the
// same.
func asV133(got, up []string) ([]string, []string) {
	keys := map[string]bool{}
	g := slices.Clone(got)
	for i, s := range g {
		if m := ruleValueRE.FindStringSubmatch(s); m != nil && slices.Contains(typeNames, m[2]) {
			g[i] = m[1] + m[3]
			keys[g[i]] = true
		}
	}
	u := slices.Clone(up)
	for i, s := range u {
		if m := ruleValueRE.FindStringSubmatch(s); m != nil && keys[m[1]+m[3]] {
			u[i] = m[1] + m[3]
		}
	}
	return g, u
}
