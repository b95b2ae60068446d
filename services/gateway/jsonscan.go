package gateway

import "bytes"

// A minimal scanner over the top level of a JSON object, for the hot read
// path: objects from storage are valid JSON (storage checks every write),
// so values are skipped by tracking strings and nesting only.

// topMember is one member of a JSON object: the key (raw, between the
// quotes) and the value's byte range.
type topMember struct {
	key              []byte
	valStart, valEnd int
	keyHasEscape     bool
}

// topMembers lists the members of the JSON object in data; ok is false
// when data does not look like a JSON object.
func topMembers(data []byte) (members []topMember, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, false
		}
		if data[i] == '}' {
			return members, true
		}
		if data[i] == ',' {
			i++
			continue
		}
		if data[i] != '"' {
			return nil, false
		}
		end := scanString(data, i)
		if end < 0 {
			return nil, false
		}
		key := data[i+1 : end-1]
		m := topMember{key: key, keyHasEscape: bytes.IndexByte(key, '\\') >= 0}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		m.valStart = i
		if i = skipValue(data, i); i < 0 {
			return nil, false
		}
		m.valEnd = i
		members = append(members, m)
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index after the string starting at data[i] (a
// quote); -1 when unterminated.
func scanString(data []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// Escaped when preceded by an odd number of backslashes.
		n := 0
		for p := j - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipValue returns the index after the JSON value starting at data[i]
// (-1 when malformed).
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return scanString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end := scanString(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

var apiVersionPrefix = []byte(`{"apiVersion":"`)

// setAPIVersion returns obj with its top-level apiVersion set to want,
// without decoding it: as is when it already says so, else with the value
// spliced in. ok is false when the fast path does not apply (no single
// plain apiVersion member); the caller then converts the slow way.
func setAPIVersion(obj []byte, want string) (out []byte, ok bool) {
	// Fastest path, the usual stored object: written by crdplane (a JSON
	// encoding of a map: sorted keys, no duplicates, no whitespace), it
	// starts with its apiVersion.
	if len(obj) > len(apiVersionPrefix)+len(want)+2 && bytes.HasPrefix(obj, apiVersionPrefix) {
		v := obj[len(apiVersionPrefix):]
		if string(v[:len(want)]) == want && v[len(want)] == '"' && v[len(want)+1] == ',' {
			return obj, true
		}
	}
	members, ok := topMembers(obj)
	if !ok {
		return nil, false
	}
	found := -1
	for i, m := range members {
		if m.keyHasEscape {
			return nil, false
		}
		if string(m.key) == "apiVersion" {
			if found >= 0 {
				return nil, false
			}
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	m := members[found]
	val := obj[m.valStart:m.valEnd]
	if len(val) == len(want)+2 && val[0] == '"' && string(val[1:len(val)-1]) == want {
		return obj, true
	}
	if bytes.IndexByte([]byte(want), '"') >= 0 || bytes.IndexByte([]byte(want), '\\') >= 0 {
		return nil, false
	}
	out = make([]byte, 0, len(obj)+len(want))
	out = append(out, obj[:m.valStart]...)
	out = append(out, '"')
	out = append(out, want...)
	out = append(out, '"')
	out = append(out, obj[m.valEnd:]...)
	return out, true
}
