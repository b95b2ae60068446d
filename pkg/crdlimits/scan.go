package crdlimits

import (
	"bytes"
	"errors"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// maxJSONDepth is the nesting depth at which the decoders Kubernetes uses
// (encoding/json, sigs.k8s.io/json) give up: "exceeded max depth".
const maxJSONDepth = 10000

// VersionSchema is what VersionSchemaDepths finds of one entry of
// spec.versions.
type VersionSchema struct {
	// Depth is SchemaDepth of its schema.openAPIV3Schema; -1 when it has
	// none.
	Depth int
	// Raw is the schema's JSON (a slice of the document), nil when none.
	Raw []byte
}

// VersionSchemaDepths reads a CustomResourceDefinition's JSON (as sent:
// apiextensions.k8s.io/v1) without decoding it, in one pass, and returns
// the depth (SchemaDepth) of every spec.versions[i].schema.openAPIV3Schema.
// Keys are matched as the Kubernetes decoder matches fields (after
// unescaping, case-sensitively). When a key repeats, the deepest of its
// values counts: the decoder decodes each, and merges a repeated object or
// array into what the first one decoded (so the depth found is never less
// than the decoded schema's). ok is false when the document is not
// well-formed JSON where the scan looked, or nests deeper than the decoder
// allows: decoding it reports the problem.
//
// It lets a server refuse a schema that nests too deep before decoding it
// into Go types, which costs ~50 times the size of the JSON for a deep
// schema. It allocates only the result.
func VersionSchemaDepths(doc []byte) (versions []VersionSchema, ok bool) {
	s := &depthScanner{b: doc}
	i := jsonscan.SkipSpace(doc, 0)
	end, err := s.object(i, 0, func(key []byte, j, level int) (int, error) {
		if !keyIs(key, "spec") {
			return jsonscan.SkipValue(doc, j)
		}
		return s.objectOrSkip(j, level, func(key []byte, j, level int) (int, error) {
			if !keyIs(key, "versions") {
				return jsonscan.SkipValue(doc, j)
			}
			index := 0
			return s.arrayOrSkip(j, level, func(j, level int) (int, error) {
				found := VersionSchema{Depth: -1}
				end, err := s.objectOrSkip(j, level, func(key []byte, j, level int) (int, error) {
					if !keyIs(key, "schema") {
						return jsonscan.SkipValue(doc, j)
					}
					return s.objectOrSkip(j, level, func(key []byte, j, level int) (int, error) {
						if !keyIs(key, "openAPIV3Schema") {
							return jsonscan.SkipValue(doc, j)
						}
						if doc[j] != '{' {
							return jsonscan.SkipValue(doc, j)
						}
						s.max = 0
						end, err := s.schema(j, level, 0)
						if err == nil && s.max > found.Depth {
							found = VersionSchema{Depth: s.max, Raw: doc[j:end]}
						}
						return end, err
					})
				})
				// A repeated "versions" decodes into the elements the first
				// one decoded (encoding/json merges into them): keep the
				// deepest of each index.
				if index < len(versions) {
					if found.Depth < versions[index].Depth {
						found.Depth = versions[index].Depth
					}
					if found.Raw == nil {
						found.Raw = versions[index].Raw
					}
					versions[index] = found
				} else {
					versions = append(versions, found)
				}
				index++
				return end, err
			})
		})
	})
	if err != nil || end < 0 {
		return nil, false
	}
	return versions, true
}

// depthScanner walks the JSON of a CRD, descending only into the members
// that hold schemas; everything else is skipped (jsonscan.SkipValue, one
// linear pass over its bytes).
type depthScanner struct {
	b   []byte
	max int // deepest schema level seen in the current openAPIV3Schema
}

var errMalformed = errors.New("malformed or too deeply nested JSON")

// object calls member for every member of the object at b[i] with the key
// (quotes included) and the offset of its value; member returns the offset
// after the value. level is the JSON nesting depth of the object.
func (s *depthScanner) object(i, level int, member func(key []byte, j, level int) (int, error)) (int, error) {
	b := s.b
	j, done, err := s.enter(i, level, '{', '}')
	for err == nil && !done {
		var ke int
		if ke, err = jsonscan.SkipString(b, j); err != nil {
			break
		}
		key := b[j:ke]
		j = jsonscan.SkipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return 0, errMalformed
		}
		j = jsonscan.SkipSpace(b, j+1)
		if j >= len(b) {
			return 0, errMalformed
		}
		if j, err = member(key, j, level+1); err == nil {
			j, done, err = s.next(j, '}')
		}
	}
	if err != nil {
		return 0, err
	}
	return j, nil
}

// array calls elem for every element of the array at b[i].
func (s *depthScanner) array(i, level int, elem func(j, level int) (int, error)) (int, error) {
	j, done, err := s.enter(i, level, '[', ']')
	for err == nil && !done {
		if j, err = elem(j, level+1); err == nil {
			j, done, err = s.next(j, ']')
		}
	}
	if err != nil {
		return 0, err
	}
	return j, nil
}

// enter checks the object or array that opens at b[i] (open is '{' or '[',
// end its closing bracket) at nesting depth level. It returns the offset of
// its first member or element, or, with done, the offset after it when it
// is empty.
func (s *depthScanner) enter(i, level int, open, end byte) (j int, done bool, err error) {
	b := s.b
	if level >= maxJSONDepth || i >= len(b) || b[i] != open {
		return 0, false, errMalformed
	}
	j = jsonscan.SkipSpace(b, i+1)
	if j < len(b) && b[j] == end {
		return j + 1, true, nil
	}
	return j, false, nil
}

// next reads what follows a member or element that ends at b[j]: a comma
// (it returns the offset of the next one) or the closing bracket end (it
// returns the offset after it, and done).
func (s *depthScanner) next(j int, end byte) (int, bool, error) {
	b := s.b
	j = jsonscan.SkipSpace(b, j)
	if j >= len(b) {
		return 0, false, errMalformed
	}
	switch b[j] {
	case ',':
		return jsonscan.SkipSpace(b, j+1), false, nil
	case end:
		return j + 1, true, nil
	}
	return 0, false, errMalformed
}

// objectOrSkip is object when b[i] starts one, else it skips the value (a
// null, or something the decoder rejects).
func (s *depthScanner) objectOrSkip(i, level int, member func(key []byte, j, level int) (int, error)) (int, error) {
	if i < len(s.b) && s.b[i] == '{' {
		return s.object(i, level, member)
	}
	return jsonscan.SkipValue(s.b, i)
}

// arrayOrSkip is array when b[i] starts one, else it skips the value.
func (s *depthScanner) arrayOrSkip(i, level int, elem func(j, level int) (int, error)) (int, error) {
	if i < len(s.b) && s.b[i] == '[' {
		return s.array(i, level, elem)
	}
	return jsonscan.SkipValue(s.b, i)
}

// schema walks the schema at b[i], depth levels below the root.
func (s *depthScanner) schema(i, level, depth int) (int, error) {
	if i >= len(s.b) || s.b[i] != '{' {
		// true/false (additionalProperties), null, or a type error the
		// decoder reports
		return jsonscan.SkipValue(s.b, i)
	}
	if depth > s.max {
		s.max = depth
	}
	b := s.b
	sub := func(j, level int) (int, error) { return s.schema(j, level, depth+1) }
	return s.object(i, level, func(key []byte, j, level int) (int, error) {
		switch schemaKey(key) {
		case keyOne: // not, additionalProperties, additionalItems
			return s.schema(j, level, depth+1)
		case keyMap: // properties, patternProperties, definitions, dependencies
			return s.objectOrSkip(j, level, func(_ []byte, j, level int) (int, error) {
				return s.schema(j, level, depth+1)
			})
		case keyList: // allOf, anyOf, oneOf
			return s.arrayOrSkip(j, level, sub)
		case keyItems: // a schema or a list of them
			if j < len(b) && b[j] == '[' {
				return s.array(j, level, sub)
			}
			return s.schema(j, level, depth+1)
		}
		return jsonscan.SkipValue(b, j)
	})
}

type keyKind int

const (
	keyOther keyKind = iota
	keyOne
	keyMap
	keyList
	keyItems
)

var schemaKeys = map[string]keyKind{
	"not": keyOne, "additionalProperties": keyOne, "additionalItems": keyOne,
	"properties": keyMap, "patternProperties": keyMap, "definitions": keyMap, "dependencies": keyMap,
	"allOf": keyList, "anyOf": keyList, "oneOf": keyList,
	"items": keyItems,
}

func schemaKey(key []byte) keyKind {
	inner := key[1 : len(key)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return schemaKeys[string(inner)]
	}
	name, ok := jsonscan.String(key)
	if !ok {
		return keyOther
	}
	return schemaKeys[name]
}

// keyIs reports whether the raw key (quotes included) is name, unescaped.
func keyIs(key []byte, name string) bool {
	inner := key[1 : len(key)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == name
	}
	k, ok := jsonscan.String(key)
	return ok && k == name
}
