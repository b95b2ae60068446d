package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// This file edits objects as raw JSON bytes: it finds the top-level
// "metadata" member and its "resourceVersion" without decoding the object, so
// that reads and writes cost one linear scan instead of a full
// unmarshal/marshal. Where an object has duplicate keys, the last one wins,
// as it does for encoding/json.

var (
	errMalformed = errors.New("malformed JSON")
	errNotObject = errors.New("not a JSON object")
)

// member is one "key": value pair of a JSON object, as offsets into the
// document: the key from its opening quote to after its closing quote, the
// value from its first to after its last byte.
type member struct {
	keyStart, keyEnd int
	valStart, valEnd int
	escaped          bool // the key contains an escape sequence
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString skips the string starting at b[i] == '"'; it returns the offset
// after the closing quote and whether the string holds escapes.
func skipString(b []byte, i int) (int, bool, error) {
	// Fast path: the closing quote with no escape before it.
	if q := bytes.IndexByte(b[i+1:], '"'); q >= 0 && bytes.IndexByte(b[i+1:i+1+q], '\\') < 0 {
		return i + 1 + q + 1, false, nil
	}
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc, nil
		}
	}
	return 0, false, errMalformed
}

// skipValue skips the value starting at b[i] and returns the offset after it.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errMalformed
	}
	switch b[i] {
	case '"':
		end, _, err := skipString(b, i)
		return end, err
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errMalformed
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, nil
			}
			j++
		}
		if j == i {
			return 0, errMalformed
		}
		return j, nil
	}
}

// scanObject calls fn for every member of the object starting at b[i] == '{'
// and returns the offset after the object.
func scanObject(b []byte, i int, fn func(m member)) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return 0, errNotObject
	}
	j := skipWS(b, i+1)
	if j < len(b) && b[j] == '}' {
		return j + 1, nil
	}
	for {
		if j >= len(b) || b[j] != '"' {
			return 0, errMalformed
		}
		var m member
		var err error
		m.keyStart = j
		if m.keyEnd, m.escaped, err = skipString(b, j); err != nil {
			return 0, err
		}
		j = skipWS(b, m.keyEnd)
		if j >= len(b) || b[j] != ':' {
			return 0, errMalformed
		}
		m.valStart = skipWS(b, j+1)
		if m.valEnd, err = skipValue(b, m.valStart); err != nil {
			return 0, err
		}
		fn(m)
		j = skipWS(b, m.valEnd)
		if j >= len(b) {
			return 0, errMalformed
		}
		switch b[j] {
		case ',':
			j = skipWS(b, j+1)
		case '}':
			return j + 1, nil
		default:
			return 0, errMalformed
		}
	}
}

// keyIs reports whether m's key equals name.
func (m member) keyIs(b []byte, name string) bool {
	raw := b[m.keyStart+1 : m.keyEnd-1]
	if !m.escaped {
		return string(raw) == name
	}
	var k string
	if err := json.Unmarshal(b[m.keyStart:m.keyEnd], &k); err != nil {
		return false
	}
	return k == name
}

// findMember returns the last member named name of the object at b[i].
func findMember(b []byte, i int, name string) (member, bool, error) {
	var found member
	ok := false
	_, err := scanObject(b, i, func(m member) {
		if m.keyIs(b, name) {
			found, ok = m, true
		}
	})
	return found, ok, err
}

// edit replaces b[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// applyEdits applies non-overlapping edits sorted by start.
func applyEdits(b []byte, edits []edit) []byte {
	n := len(b)
	for _, e := range edits {
		n += len(e.repl) - (e.end - e.start)
	}
	return appendEdits(make([]byte, 0, n), b, edits)
}

// appendEdits appends b with the edits applied to dst.
func appendEdits(dst, b []byte, edits []edit) []byte {
	pos := 0
	for _, e := range edits {
		dst = append(dst, b[pos:e.start]...)
		dst = append(dst, e.repl...)
		pos = e.end
	}
	return append(dst, b[pos:]...)
}

// stripResourceVersion validates that obj is a JSON object and returns it
// without metadata.resourceVersion (obj itself when it has none).
func stripResourceVersion(obj []byte) ([]byte, error) {
	if !json.Valid(obj) {
		return nil, errMalformed
	}
	start := skipWS(obj, 0)
	if start >= len(obj) || obj[start] != '{' {
		return nil, errNotObject
	}
	var edits []edit
	var scanErr error
	_, err := scanObject(obj, start, func(m member) {
		if scanErr != nil || !m.keyIs(obj, "metadata") || obj[m.valStart] != '{' {
			return
		}
		var kept [][]byte
		removed := false
		if _, err := scanObject(obj, m.valStart, func(mm member) {
			if mm.keyIs(obj, "resourceVersion") {
				removed = true
				return
			}
			kept = append(kept, obj[mm.keyStart:mm.valEnd])
		}); err != nil {
			scanErr = err
			return
		}
		if removed {
			repl := append([]byte{'{'}, bytes.Join(kept, []byte{','})...)
			edits = append(edits, edit{m.valStart, m.valEnd, append(repl, '}')})
		}
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return nil, err
	}
	if len(edits) == 0 {
		return obj, nil
	}
	return applyEdits(obj, edits), nil
}

// withResourceVersion returns a copy of the stored object with
// metadata.resourceVersion set to rev.
func withResourceVersion(stored []byte, rev int64) ([]byte, error) {
	e, err := resourceVersionEdit(stored, rev)
	if err != nil {
		return nil, err
	}
	return applyEdits(stored, []edit{e}), nil
}

// resourceVersionEdit is the edit setting metadata.resourceVersion.
func resourceVersionEdit(stored []byte, rev int64) (edit, error) {
	start := skipWS(stored, 0)
	meta, ok, err := findMember(stored, start, "metadata")
	if err != nil {
		return edit{}, err
	}
	var num [24]byte
	quoted := strconv.AppendInt(append(num[:0], '"'), rev, 10)
	quoted = append(quoted, '"')

	var e edit
	switch {
	case !ok:
		// No metadata at all: add one.
		repl := append([]byte(`"metadata":{"resourceVersion":`), quoted...)
		repl = append(repl, '}')
		e = insertMember(stored, start, repl)
	case stored[meta.valStart] != '{':
		// metadata is null (or not an object): replace it.
		repl := append([]byte(`{"resourceVersion":`), quoted...)
		e = edit{meta.valStart, meta.valEnd, append(repl, '}')}
	default:
		rv, found, err := findMember(stored, meta.valStart, "resourceVersion")
		if err != nil {
			return edit{}, err
		}
		if found {
			e = edit{rv.valStart, rv.valEnd, quoted}
		} else {
			e = insertMember(stored, meta.valStart, append([]byte(`"resourceVersion":`), quoted...))
		}
	}
	return e, nil
}

// appendWithResourceVersion appends to dst what withResourceVersion
// returns, without a copy of its own (lists build every item in one
// buffer).
func appendWithResourceVersion(dst, stored []byte, rev int64) ([]byte, error) {
	e, err := resourceVersionEdit(stored, rev)
	if err != nil {
		return dst, err
	}
	return appendEdits(dst, stored, []edit{e}), nil
}

// insertMember returns the edit inserting the member text m first into the
// object at b[obj].
func insertMember(b []byte, obj int, m []byte) edit {
	at := obj + 1
	if j := skipWS(b, at); j < len(b) && b[j] != '}' {
		m = append(m, ',')
	}
	return edit{at, at, m}
}

// lookup returns the raw JSON value at path (a chain of object members) in
// the object doc.
func lookup(doc []byte, path ...string) ([]byte, bool, error) {
	i := skipWS(doc, 0)
	for n, name := range path {
		if i >= len(doc) || doc[i] != '{' {
			return nil, false, nil
		}
		m, ok, err := findMember(doc, i, name)
		if err != nil || !ok {
			return nil, false, err
		}
		if n == len(path)-1 {
			return doc[m.valStart:m.valEnd], true, nil
		}
		i = m.valStart
	}
	return nil, false, nil
}

// jsonString decodes a raw JSON string value ("" for anything else).
func jsonString(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return ""
	}
	return s
}

// fieldValue renders a raw JSON value the way upstream renders a custom
// resource's selectable field: strings as they are, integers in decimal,
// other numbers and booleans with fmt.Sprint, null or absent as "".
func fieldValue(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return jsonString(raw)
	case 'n':
		return ""
	case 't':
		return "true"
	case 'f':
		return "false"
	case '{', '[':
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return ""
		}
		return fmt.Sprint(v)
	default:
		s := string(raw)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return fmt.Sprint(f)
		}
		return s
	}
}
