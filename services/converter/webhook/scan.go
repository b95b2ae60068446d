package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Objects are handled as JSON bytes: the checks of a converted object read
// a few top-level members and splice the original metadata in, without
// decoding (and re-encoding) the rest. The scanner trusts its input to be
// valid JSON (objects from storage, and a webhook response that decoded).

var errNotObject = errors.New("not a JSON object")

// member is one top-level member of an object: the raw value at
// obj[start:end].
type member struct {
	start, end int
	found      bool
}

func (m member) raw(obj []byte) []byte {
	if !m.found {
		return nil
	}
	return obj[m.start:m.end]
}

// Top-level members the checks read, of an object and of its metadata.
var (
	headKeys = []string{"apiVersion", "kind", "metadata"}
	metaKeys = []string{"name", "namespace", "uid", "labels", "annotations"}
)

// scanMembers finds the top-level members of obj named keys (the last
// occurrence, as a decoder keeps), into out (len(keys) long).
func scanMembers(obj []byte, keys []string, out []member) error {
	clear(out)
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return errNotObject
		}
		if obj[i] == '}' {
			return nil
		}
		if obj[i] == ',' {
			i++
			continue
		}
		if obj[i] != '"' {
			return errNotObject
		}
		kStart, kEnd := i, skipString(obj, i)
		key := obj[kStart+1 : kEnd-1]
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return errNotObject
		}
		vStart := skipSpace(obj, i+1)
		vEnd := skipValue(obj, vStart)
		if vEnd <= vStart {
			return errNotObject
		}
		name := ""
		if bytes.IndexByte(key, '\\') >= 0 {
			name = unquoteKey(obj[kStart:kEnd])
		}
		for k, want := range keys {
			if string(key) == want || (name != "" && name == want) {
				out[k] = member{vStart, vEnd, true}
			}
		}
		i = vEnd
	}
}

func unquoteKey(q []byte) string {
	var s string
	_ = json.Unmarshal(q, &s)
	return s
}

// stringValue reads a raw JSON string ("" for anything else, as
// unstructured accessors do).
func stringValue(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
