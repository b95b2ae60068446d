// Package jsondec decodes JSON into untyped Go values exactly as
// k8s.io/apimachinery/pkg/util/json.Unmarshal does into an any (objects
// map[string]any, arrays []any, strings, bools, nil; numbers without a
// '.' that fit int64 as int64, other numbers float64; later duplicate keys
// win; invalid UTF-8 and lone surrogates become U+FFFD), in one pass
// without reflection. Malformed input is handed to utiljson.Unmarshal, so
// errors are worded as upstream's decoder words them.
package jsondec

import (
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// maxDepth is encoding/json's nesting limit (deeper input is an error).
const maxDepth = 10000

// Unmarshal decodes data (one JSON value, surrounded by whitespace only).
func Unmarshal(data []byte) (any, error) {
	if v, ok := Decode(data); ok {
		return v, nil
	}
	var out any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Decode is Unmarshal's own pass alone: ok is false, and nothing is said
// of why, for data that is not one well-formed JSON value surrounded by
// whitespace (a caller with its own wording of errors decodes such data
// its own way).
func Decode(data []byte) (v any, ok bool) {
	d := decoder{data: data}
	d.skipSpace()
	v, ok = d.value(0)
	if ok {
		d.skipSpace()
		ok = d.pos == len(d.data)
	}
	if !ok {
		return nil, false
	}
	return v, true
}

type decoder struct {
	data []byte
	pos  int
	buf  []byte // scratch for unquoting
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

func (d *decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return true
}

func (d *decoder) object(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.pos++ // {
	m := map[string]any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, true
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.skipSpace()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case '}':
			d.pos++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) array(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.pos++ // [
	l := []any{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return l, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, false
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case ']':
			d.pos++
			return l, true
		default:
			return nil, false
		}
	}
}

// number scans a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() (any, bool) {
	start := d.pos
	p := d.pos
	data := d.data
	if data[p] == '-' {
		p++
	}
	switch {
	case p < len(data) && data[p] == '0':
		p++
	case p < len(data) && data[p] >= '1' && data[p] <= '9':
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
	default:
		return nil, false
	}
	dot := false
	if p < len(data) && data[p] == '.' {
		dot = true
		p++
		if p >= len(data) || data[p] < '0' || data[p] > '9' {
			return nil, false
		}
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
	}
	if p < len(data) && (data[p] == 'e' || data[p] == 'E') {
		p++
		if p < len(data) && (data[p] == '+' || data[p] == '-') {
			p++
		}
		if p >= len(data) || data[p] < '0' || data[p] > '9' {
			return nil, false
		}
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
	}
	d.pos = p
	s := string(data[start:p])
	if !dot {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// str scans a string at d.pos (the opening quote) and unquotes it as
// encoding/json does.
func (d *decoder) str() (string, bool) {
	d.pos++ // "
	start := d.pos
	data := d.data
	// Fast path: printable ASCII without escapes.
	p := start
	for p < len(data) {
		c := data[p]
		if c == '"' {
			d.pos = p + 1
			return string(data[start:p]), true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p++
	}
	b := append(d.buf[:0], data[start:p]...)
	for p < len(data) {
		c := data[p]
		switch {
		case c == '"':
			d.pos = p + 1
			d.buf = b
			return string(b), true
		case c < 0x20:
			return "", false
		case c == '\\':
			p++
			if p >= len(data) {
				return "", false
			}
			switch data[p] {
			case '"', '\\', '/':
				b = append(b, data[p])
				p++
			case 'b':
				b = append(b, '\b')
				p++
			case 'f':
				b = append(b, '\f')
				p++
			case 'n':
				b = append(b, '\n')
				p++
			case 'r':
				b = append(b, '\r')
				p++
			case 't':
				b = append(b, '\t')
				p++
			case 'u':
				r := hex4(data, p+1)
				if r < 0 {
					return "", false
				}
				p += 5
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if p+1 < len(data) && data[p] == '\\' && data[p+1] == 'u' {
						r2 = hex4(data, p+2)
					}
					if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
						p += 6
						b = utf8.AppendRune(b, dec)
						break
					}
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p++
		default:
			r, size := utf8.DecodeRune(data[p:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, unicode.ReplacementChar)
			} else {
				b = append(b, data[p:p+size]...)
			}
			p += size
		}
	}
	return "", false
}

// hex4 decodes the four hex digits at data[p:], or returns -1.
func hex4(data []byte, p int) rune {
	if p+4 > len(data) {
		return -1
	}
	var r rune
	for _, c := range data[p : p+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
