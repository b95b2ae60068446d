package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// This file edits objects as raw JSON bytes (with package jsonscan): it finds
// the top-level "metadata" member and its "resourceVersion" without decoding
// the object, so that reads and writes cost one linear scan instead of a full
// unmarshal/marshal. Where an object has duplicate keys, the last one wins,
// as it does for encoding/json.

// stripResourceVersion validates that obj is a JSON object and returns it
// without metadata.resourceVersion (obj itself when it has none).
func stripResourceVersion(obj []byte) ([]byte, error) {
	if !json.Valid(obj) {
		return nil, jsonscan.ErrMalformed
	}
	start := jsonscan.SkipSpace(obj, 0)
	if start >= len(obj) || obj[start] != '{' {
		return nil, jsonscan.ErrNotObject
	}
	var edits []jsonscan.Edit
	var scanErr error
	_, err := jsonscan.ScanObject(obj, start, func(m jsonscan.Member) {
		if scanErr != nil || !m.KeyIs(obj, "metadata") || obj[m.ValStart] != '{' {
			return
		}
		var kept [][]byte
		removed := false
		if _, err := jsonscan.ScanObject(obj, m.ValStart, func(mm jsonscan.Member) {
			if mm.KeyIs(obj, "resourceVersion") {
				removed = true
				return
			}
			kept = append(kept, obj[mm.KeyStart:mm.ValEnd])
		}); err != nil {
			scanErr = err
			return
		}
		if removed {
			repl := append([]byte{'{'}, bytes.Join(kept, []byte{','})...)
			edits = append(edits, jsonscan.Edit{Start: m.ValStart, End: m.ValEnd, Repl: append(repl, '}')})
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
	return jsonscan.ApplyEdits(obj, edits...), nil
}

// withResourceVersion returns a copy of the stored object with
// metadata.resourceVersion set to rev.
func withResourceVersion(stored []byte, rev int64) ([]byte, error) {
	e, err := resourceVersionEdit(stored, rev)
	if err != nil {
		return nil, err
	}
	return jsonscan.ApplyEdits(stored, e), nil
}

// resourceVersionEdit is the edit setting metadata.resourceVersion.
func resourceVersionEdit(stored []byte, rev int64) (jsonscan.Edit, error) {
	start := jsonscan.SkipSpace(stored, 0)
	meta, ok, err := jsonscan.Find(stored, start, "metadata")
	if err != nil {
		return jsonscan.Edit{}, err
	}
	return metadataEdit(stored, start, meta, ok, rev)
}

// metadataEdit is the edit setting metadata.resourceVersion in the object
// at stored[start], whose metadata member is meta (when found).
func metadataEdit(stored []byte, start int, meta jsonscan.Member, found bool, rev int64) (jsonscan.Edit, error) {
	var num [24]byte
	quoted := strconv.AppendInt(append(num[:0], '"'), rev, 10)
	quoted = append(quoted, '"')

	switch {
	case !found:
		// No metadata at all: add one.
		repl := append([]byte(`"metadata":{"resourceVersion":`), quoted...)
		return insertMember(stored, start, append(repl, '}')), nil
	case stored[meta.ValStart] != '{':
		// metadata is null (or not an object): replace it.
		repl := append([]byte(`{"resourceVersion":`), quoted...)
		return jsonscan.Edit{Start: meta.ValStart, End: meta.ValEnd, Repl: append(repl, '}')}, nil
	}
	// One scan of metadata's members: a resourceVersion already there (the
	// last, as a decoder keeps) is replaced; otherwise the member goes
	// where encoding/json puts it when metadata's keys are plain and in
	// order (what crdplane and upstream write), so that a read hands the
	// object on in upstream's bytes; first when they are not.
	var rv, greater, last jsonscan.Member
	found, sorted, n := false, true, 0
	var prev []byte
	if _, err := jsonscan.ScanObject(stored, meta.ValStart, func(m jsonscan.Member) {
		if m.KeyIs(stored, "resourceVersion") {
			rv, found = m, true
		}
		n++
		last = m
		if !m.Plain {
			sorted = false
			return
		}
		key := stored[m.KeyStart+1 : m.KeyEnd-1]
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			sorted = false
		}
		prev = key
		if greater.KeyEnd == 0 && string(key) > "resourceVersion" {
			greater = m
		}
	}); err != nil {
		return jsonscan.Edit{}, err
	}
	member := append([]byte(`"resourceVersion":`), quoted...)
	switch {
	case found:
		return jsonscan.Edit{Start: rv.ValStart, End: rv.ValEnd, Repl: quoted}, nil
	case !sorted || n == 0 || greater.KeyStart == jsonscan.SkipSpace(stored, meta.ValStart+1):
		return insertMember(stored, meta.ValStart, member), nil
	case greater.KeyEnd != 0:
		return jsonscan.Edit{Start: greater.KeyStart, End: greater.KeyStart, Repl: append(member, ',')}, nil
	default:
		return jsonscan.Edit{Start: last.ValEnd, End: last.ValEnd, Repl: append([]byte{','}, member...)}, nil
	}
}

// readMembers are the top-level members readEdit checks (distinct).
var readMembers = []string{"apiVersion", "kind", "metadata"}

// readEdit is resourceVersionEdit for a value read back from etcd, which
// it first checks as upstream's storage decoder would read it (in the same
// scans): a JSON object and nothing after it, a non-empty string kind, an
// apiVersion (if any) that is a string naming a group version, a metadata
// (if any) that is an object or null. Anything else is a corrupt object
// (errCorrupt): upstream fails to decode it. The value is not validated
// deeper than the scanner goes (see package jsonscan): every write was
// checked whole.
func readEdit(stored []byte, rev int64) (jsonscan.Edit, error) {
	start := jsonscan.SkipSpace(stored, 0)
	var m [3]jsonscan.Member
	end, err := jsonscan.ScanObject(stored, start, func(mm jsonscan.Member) {
		for k, name := range readMembers {
			if mm.KeyIs(stored, name) {
				m[k] = mm
				return
			}
		}
	})
	if err != nil {
		return jsonscan.Edit{}, corrupt(err)
	}
	// What follows the object: only white space.
	if jsonscan.SkipSpace(stored, end) != len(stored) {
		return jsonscan.Edit{}, corrupt(jsonscan.ErrMalformed)
	}
	apiVersion, kind, meta := m[0].Value(stored), m[1].Value(stored), m[2].Value(stored)
	// (A JSON string of more than its quotes is not empty.)
	if len(kind) <= 2 || kind[0] != '"' {
		return jsonscan.Edit{}, corrupt(errors.New("kind is not a non-empty string"))
	}
	if len(apiVersion) > 0 {
		if apiVersion[0] != '"' {
			return jsonscan.Edit{}, corrupt(errors.New("apiVersion is not a string"))
		}
		// A group version has at most one "/" (schema.ParseGroupVersion);
		// escapes are rare enough to decode.
		if bytes.Count(apiVersion, []byte{'/'}) > 1 || bytes.IndexByte(apiVersion, '\\') >= 0 {
			v, _ := jsonscan.String(apiVersion)
			if _, err := schema.ParseGroupVersion(v); err != nil {
				return jsonscan.Edit{}, corrupt(err)
			}
		}
	}
	if len(meta) > 0 && meta[0] != '{' && string(meta) != "null" {
		return jsonscan.Edit{}, corrupt(errors.New("metadata is not an object"))
	}
	e, err := metadataEdit(stored, start, m[2], len(meta) > 0, rev)
	if err != nil {
		return jsonscan.Edit{}, corrupt(err)
	}
	return e, nil
}

// readObject returns a stored value as readers get it, with
// metadata.resourceVersion set to rev; errCorrupt when upstream could not
// decode it.
func readObject(stored []byte, rev int64) ([]byte, error) {
	e, err := readEdit(stored, rev)
	if err != nil {
		return nil, err
	}
	return jsonscan.ApplyEdits(stored, e), nil
}

// appendWithResourceVersion appends to dst what withResourceVersion
// returns, without a copy of its own (lists build every item in one
// buffer).
func appendWithResourceVersion(dst, stored []byte, rev int64) ([]byte, error) {
	e, err := resourceVersionEdit(stored, rev)
	if err != nil {
		return dst, err
	}
	return jsonscan.AppendEdits(dst, stored, e), nil
}

// insertMember returns the edit inserting the member text m first into the
// object at b[obj].
func insertMember(b []byte, obj int, m []byte) jsonscan.Edit {
	at := obj + 1
	if j := jsonscan.SkipSpace(b, at); j < len(b) && b[j] != '}' {
		m = append(m, ',')
	}
	return jsonscan.Edit{Start: at, End: at, Repl: m}
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
		s, _ := jsonscan.String(raw)
		return s
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
