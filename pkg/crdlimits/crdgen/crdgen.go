// Package crdgen writes synthetic CustomResourceDefinitions of a chosen
// shape and size (wide schemas, CEL rules, list maps, patterns, many
// versions), for the tests and benchmarks of the compiled-size bound
// (pkg/crdlimits).
package crdgen

import (
	"fmt"
	"strings"
)

// Shape says what each version's openAPIV3Schema holds below .spec.
type Shape struct {
	// Name is the plural; the CRD is <Name>.gen.example.com (default "gens").
	Name string
	// Versions is how many versions (v1, v2, ...; at least 1), each with
	// the same schema (Distinct: a differing description per version).
	Versions int
	Distinct bool
	// Strings is how many string properties .spec has.
	Strings int
	// Objects is how many object properties .spec has, each with Fields
	// string properties.
	Objects, Fields int
	// Rules is how many string properties carry an x-kubernetes-validations
	// rule (with maxLength, so the rule's cost stays small).
	Rules int
	// ListMaps is how many x-kubernetes-list-type=map arrays (key "name",
	// maxItems 16) .spec has.
	ListMaps int
	// Patterns is how many string properties carry a distinct pattern.
	Patterns int
	// Description, when non-zero, gives every property a description of
	// that many bytes.
	Description int
}

// JSON returns the CRD as JSON.
func (s Shape) JSON() []byte {
	if s.Name == "" {
		s.Name = "gens"
	}
	if s.Versions < 1 {
		s.Versions = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"%s.gen.example.com"},"spec":{"group":"gen.example.com","scope":"Namespaced","names":{"plural":"%s","singular":"%s","kind":"Gen","listKind":"GenList"},"versions":[`,
		s.Name, s.Name, strings.TrimSuffix(s.Name, "s")+"x")
	for v := 1; v <= s.Versions; v++ {
		if v > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"v%d","served":true,"storage":%t,"subresources":{"status":{}},"schema":{"openAPIV3Schema":`, v, v == 1)
		s.schema(&b, v)
		b.WriteString(`}}`)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// Schema returns one version's openAPIV3Schema as JSON.
func (s Shape) Schema() []byte {
	var b strings.Builder
	s.schema(&b, 1)
	return []byte(b.String())
}

func (s Shape) schema(b *strings.Builder, version int) {
	desc := func() string {
		if s.Description == 0 {
			return ""
		}
		return `"description":"` + strings.Repeat("d", s.Description) + `",`
	}
	rootDesc := ""
	if s.Distinct {
		rootDesc = fmt.Sprintf(`"description":"version %d",`, version)
	}
	fmt.Fprintf(b, `{%s"type":"object","properties":{"status":{"type":"object","x-kubernetes-preserve-unknown-fields":true},"spec":{"type":"object","properties":{`, rootDesc)
	n := 0
	sep := func() {
		if n > 0 {
			b.WriteString(",")
		}
		n++
	}
	for i := range s.Strings {
		sep()
		fmt.Fprintf(b, `"s%d":{%s"type":"string"}`, i, desc())
	}
	for i := range s.Objects {
		sep()
		fmt.Fprintf(b, `"o%d":{%s"type":"object","properties":{`, i, desc())
		for j := range s.Fields {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, `"f%d":{%s"type":"string"}`, j, desc())
		}
		b.WriteString(`}}`)
	}
	for i := range s.Rules {
		sep()
		fmt.Fprintf(b, `"r%d":{%s"type":"string","maxLength":64,"x-kubernetes-validations":[{"rule":"self.startsWith('r%d')","message":"must start with r%d"}]}`, i, desc(), i, i)
	}
	for i := range s.ListMaps {
		sep()
		fmt.Fprintf(b, `"l%d":{%s"type":"array","maxItems":16,"x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"value":{"type":"string"}}}}`, i, desc())
	}
	for i := range s.Patterns {
		sep()
		fmt.Fprintf(b, `"p%d":{%s"type":"string","pattern":"^p%d-[a-z]+[0-9]*$"}`, i, desc(), i)
	}
	b.WriteString(`}}}}`)
}

// Measured are the shapes the benchmarks of compiled sizes measure
// (services/validator BenchmarkCompiledSize, services/gateway/cr
// BenchmarkCompiledSchemaSize), by name.
var Measured = []struct {
	Name  string
	Shape Shape
}{
	{"strings=100", Shape{Strings: 100}},
	{"strings=1000", Shape{Strings: 1000}},
	{"strings=10000", Shape{Strings: 10000}},
	{"objects=100x10", Shape{Objects: 100, Fields: 10}},
	{"rules=100", Shape{Rules: 100}},
	{"rules=1000", Shape{Rules: 1000}},
	{"listmaps=1000", Shape{ListMaps: 1000}},
	{"patterns=1000", Shape{Patterns: 1000}},
	{"patterns=6000", Shape{Patterns: 6000}},
	{"descriptions=1000x100B", Shape{Strings: 1000, Description: 100}},
	{"versions=10xstrings=1000", Shape{Versions: 10, Strings: 1000, Distinct: true}},
}
