package registry

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
)

// knownStringFormats are the string formats CRD schemas validate (with "-"
// removed, as go-openapi normalises format names).
var knownStringFormats = map[string]bool{}

func init() {
	for _, f := range []string{"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac",
		"uuid", "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor",
		"rgbcolor", "byte", "password", "date", "duration", "datetime", "k8s-short-name", "k8s-long-name"} {
		knownStringFormats[strings.ReplaceAll(f, "-", "")] = true
	}
}

// schemaWarnings are the warnings upstream attaches to a CRD write:
// unrecognized formats and set lists of non-scalar items.
func schemaWarnings(spec *apiextensions.CustomResourceDefinitionSpec) []string {
	var formats []string
	setWarnings := map[string]bool{}
	visit := func(s *schemaProps) bool {
		if s.Format != "" && !formatRecognized(s.Type, s.Format) {
			formats = append(formats, s.Format)
		}
		if s.XListType != nil && *s.XListType == "set" && s.Items != nil && s.Items.Schema != nil {
			if t := s.Items.Schema.Type; t == "object" || t == "array" {
				setWarnings[fmt.Sprintf("x-kubernetes-list-type: set for items of type %q is not supported by server-side apply or CEL validation rules", t)] = true
			}
		}
		return false
	}
	specHas(spec, func(s *schemaProps) bool { return schemaHas(s, visit) })
	var out []string
	for _, f := range formats {
		out = append(out, fmt.Sprintf("unrecognized format %q", f))
	}
	sets := make([]string, 0, len(setWarnings))
	for w := range setWarnings {
		sets = append(sets, w)
	}
	sort.Strings(sets)
	return append(out, sets...)
}

func formatRecognized(typ, format string) bool {
	switch typ {
	case "", "string":
		return knownStringFormats[strings.ReplaceAll(format, "-", "")]
	case "integer":
		return format == "int32" || format == "int64"
	case "number":
		return format == "float" || format == "double"
	}
	return false
}

// newWarnings returns the warnings of crd that old did not have.
func newWarnings(crd, old *apiextensions.CustomResourceDefinitionSpec) []string {
	had := map[string]bool{}
	for _, w := range schemaWarnings(old) {
		had[w] = true
	}
	var out []string
	for _, w := range schemaWarnings(crd) {
		if !had[w] {
			out = append(out, w)
		}
	}
	return out
}
