package celrules

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// resolveFieldPath resolves a rule's fieldPath (a relative JSON path of
// field and map accessors: `.a.b`, `.m['key']`, `['a.b']`) against the
// node the rule is scoped to. It returns the path as a field.Path
// (`a.b`, `m[key]`) and the schema it refers to. Every step must name a
// declared property, or a key of a map (additionalProperties).
func resolveFieldPath(jsonPath string, n *node) (*field.Path, *node, error) {
	var out *field.Path
	s := n
	step := func(name string) error {
		if s == nil {
			return errors.New("does not refer to a valid field")
		}
		switch {
		case s.properties != nil:
			out = out.Child(name)
			p := s.prop(name)
			if p == nil {
				return errors.New("does not refer to a valid field")
			}
			s = p
		case s.additional != nil:
			out = out.Key(name)
			s = s.additional.schema
		default:
			return errors.New("does not refer to a valid field")
		}
		return nil
	}
	toks, err := tokenize(jsonPath)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "[":
			if i+1 >= len(toks) {
				return nil, nil, errors.New("unexpected end of JSON path")
			}
			i++
			tok := toks[i]
			if len(tok) < 2 || tok[0] != '\'' || tok[len(tok)-1] != '\'' {
				return nil, nil, fmt.Errorf("expected single quoted string but got %s", tok)
			}
			key, err := unescapeSingleQuoted(tok[1 : len(tok)-1])
			if err != nil {
				return nil, nil, fmt.Errorf("invalid string literal: %w", err)
			}
			if err := step(key); err != nil {
				return nil, nil, err
			}
			if i+1 >= len(toks) {
				return nil, nil, errors.New("unexpected end of JSON path")
			}
			i++
			if toks[i] != "]" {
				return nil, nil, fmt.Errorf("expected ] but got %s", toks[i])
			}
		case ".":
			if i+1 >= len(toks) {
				return nil, nil, errors.New("unexpected end of JSON path")
			}
			i++
			if err := step(toks[i]); err != nil {
				return nil, nil, err
			}
		default:
			return nil, nil, fmt.Errorf("expected [ or . but got: %s", toks[i])
		}
	}
	return out, s, nil
}

// tokenize splits a JSON path into the delimiters '.', '[' and ']', single
// quoted strings (delimiters inside are kept, \' does not end them) and
// the names between delimiters.
func tokenize(p string) ([]string, error) {
	var toks []string
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case c == '.' || c == '[' || c == ']':
			toks = append(toks, p[i:i+1])
			i++
		case c == '\'':
			j := i + 1
			for j < len(p) && (p[j] != '\'' || p[j-1] == '\\') {
				j++
			}
			if j >= len(p) {
				// An unterminated string runs to the end.
				toks = append(toks, p[i:])
				return toks, nil
			}
			toks = append(toks, p[i:j+1])
			i = j + 1
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' && p[j] != ']' {
				j++
			}
			toks = append(toks, p[i:j])
			i = j
		}
	}
	return toks, nil
}

// unescapeSingleQuoted resolves the escapes of a single-quoted JSON path
// string: \a \b \f \n \r \t \v \' \\.
func unescapeSingleQuoted(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\'':
			b.WriteByte('\'')
		case '\\':
			b.WriteByte('\\')
		default:
			return "", fmt.Errorf("invalid escape char \\%c", s[i])
		}
	}
	return b.String(), nil
}
