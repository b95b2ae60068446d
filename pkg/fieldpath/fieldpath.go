// Package fieldpath parses the relative JSON paths of CRD schemas — a
// validation rule's fieldPath, a selectable field's jsonPath — as upstream's
// ValidFieldPath reads them: field accessors (`.a.b`) and, where allowed,
// single-quoted map or field accessors (`.m['a.b']`, with the escapes
// \a \b \f \n \r \t \v \' \\). Resolving the names against a schema is the
// caller's (Walk's step), so one parser serves every schema type.
package fieldpath

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Walk parses jsonPath and calls step with each accessor's name, in
// order; it stops at step's first error and returns it. allowArrays
// permits the bracket notation. Errors are worded as upstream's.
func Walk(jsonPath string, allowArrays bool, step func(name string) error) error {
	toks := tokenize(jsonPath)
	for i := 0; i < len(toks); i++ {
		switch tok := toks[i]; tok {
		case "[":
			if !allowArrays {
				return errors.New("array notation is not allowed")
			}
			if i+1 >= len(toks) {
				return errors.New("unexpected end of JSON path")
			}
			i++
			q := toks[i]
			if len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' {
				return fmt.Errorf("expected single quoted string but got %s", q)
			}
			name, err := unescape(q[1 : len(q)-1])
			if err != nil {
				return fmt.Errorf("invalid string literal: %w", err)
			}
			if err := step(name); err != nil {
				return err
			}
			if i+1 >= len(toks) {
				return errors.New("unexpected end of JSON path")
			}
			i++
			if toks[i] != "]" {
				return fmt.Errorf("expected ] but got %s", toks[i])
			}
		case ".":
			if i+1 >= len(toks) {
				return errors.New("unexpected end of JSON path")
			}
			i++
			if err := step(toks[i]); err != nil {
				return err
			}
		default:
			return fmt.Errorf("expected [ or . but got: %s", tok)
		}
	}
	return nil
}

// tokenize splits a path into the delimiters '.', '[' and ']', single
// quoted strings (delimiters inside are kept, \' does not end one, an
// unterminated one runs to the end) and the names between delimiters.
func tokenize(s string) []string {
	var toks []string
	for len(s) > 0 {
		switch s[0] {
		case '\'':
			end := -1
			for i := 1; i < len(s); i++ {
				if s[i] == '\'' && s[i-1] != '\\' {
					end = i
					break
				}
			}
			if end < 0 {
				return append(toks, s)
			}
			toks, s = append(toks, s[:end+1]), s[end+1:]
		case '.', '[', ']':
			toks, s = append(toks, s[:1]), s[1:]
		default:
			i := strings.IndexAny(s, ".[]")
			if i < 0 {
				i = len(s)
			}
			toks, s = append(toks, s[:i]), s[i:]
		}
	}
	return toks
}

// unescape resolves the escapes of a single-quoted string. A backslash
// that ends the string is kept, as upstream keeps it.
func unescape(s string) (string, error) {
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
			r, _ := utf8.DecodeRuneInString(s[i:])
			return "", fmt.Errorf("invalid escape char \\%c", r)
		}
	}
	return b.String(), nil
}
