package cr

import (
	"bytes"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// readMemo remembers which stored objects reading leaves byte for byte as
// they are: an object whose version's schema has defaults is decoded,
// normalised (metadata, pruning), defaulted and encoded again on every
// read (readDefaults), as upstream's storage decoder does; for an object
// written by crdplane with that very schema the result is its stored
// bytes (the storage service puts metadata.resourceVersion where
// encoding/json puts it in such objects; where it puts it first,
// sortResourceVersion moves it). Once the slow path has shown that (its
// output compared byte for byte with its input, resourceVersion moved if
// first), later reads of the same bytes with the same compiled schema
// skip it and splice the stored bytes as they are.
//
// An entry is the compiled schema's id (one per CRD uid, generation and
// version: a changed CRD compiles anew, so its entries never match) and
// two independent 64-bit hashes (randomly seeded per process) and the
// length of the stored bytes. Objects that reading changes (stored before
// a default existed, with fields a schema since prunes, in another JSON
// form) are never remembered: they take the slow path every time.
//
// The memo is bounded: two generations of at most readMemoMax entries
// each; when the current one is full it becomes the previous one and the
// oldest is dropped (an entry found in the previous generation moves to
// the current one), so about 2*readMemoMax entries of 32 bytes at most.
type readMemo struct {
	seed1, seed2 maphash.Seed
	mu           sync.RWMutex
	cur, prev    map[memoKey]struct{}
	max          int
}

// readMemoMax bounds each generation of the memo: about 4 MiB in all.
const readMemoMax = 1 << 16

type memoKey struct {
	schema uint64
	h1, h2 uint64
	n      int
}

// schemaIDs numbers compiled schemas (memoKey.schema).
var schemaIDs atomic.Uint64

func newReadMemo(max int) *readMemo {
	return &readMemo{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), cur: map[memoKey]struct{}{}, max: max}
}

func (m *readMemo) key(schema uint64, data []byte) memoKey {
	return memoKey{schema: schema, h1: maphash.Bytes(m.seed1, data), h2: maphash.Bytes(m.seed2, data), n: len(data)}
}

// unchanged reports whether reading k's bytes is known to leave them as
// they are.
func (m *readMemo) unchanged(k memoKey) bool {
	m.mu.RLock()
	_, inCur := m.cur[k]
	_, inPrev := m.prev[k]
	m.mu.RUnlock()
	if inPrev && !inCur {
		m.add(k)
	}
	return inCur || inPrev
}

// add remembers that reading k's bytes leaves them as they are.
func (m *readMemo) add(k memoKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.cur) >= m.max {
		m.prev, m.cur = m.cur, make(map[memoKey]struct{}, m.max/4)
	}
	m.cur[k] = struct{}{}
}

// size is the number of entries remembered (both generations).
func (m *readMemo) size() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.cur) + len(m.prev)
}

var (
	kindMember     = []byte(`","kind":"`)
	metadataMember = []byte(`","metadata":{`)
	rvMemberPrefix = []byte(`"resourceVersion":`)
)

// resourceVersionFirst reports, for an object in encoding/json's form
// whose first members are apiVersion, kind and metadata
// (`{"apiVersion":"…","kind":"…","metadata":{…`, values without escapes),
// whether metadata.resourceVersion is metadata's first member, reading no
// further; known is false for any other form. Of a remembered object
// (one metadata member) that is what sortResourceVersion needs to know:
// it moves resourceVersion only from first place, and the storage
// service puts it in its key-order place in such objects. lead is the
// apiVersion obj starts with, as leadingAPIVersion read it.
func resourceVersionFirst(obj []byte, lead string) (first, known bool) {
	rest := obj[len(apiVersionPrefix)+len(lead):]
	if !bytes.HasPrefix(rest, kindMember) {
		return false, false
	}
	rest = rest[len(kindMember):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 || !bytes.HasPrefix(rest[end:], metadataMember) {
		return false, false
	}
	return bytes.HasPrefix(rest[end+len(metadataMember):], rvMemberPrefix), true
}

// leadingAPIVersion is the apiVersion an object starts with, as
// encoding/json writes a map (`{"apiVersion":"...",`), when its value
// has no escapes; ok is false otherwise. It reads no further: a later
// duplicate apiVersion member is not seen.
func leadingAPIVersion(obj []byte) (string, bool) {
	if !bytes.HasPrefix(obj, apiVersionPrefix) {
		return "", false
	}
	rest := obj[len(apiVersionPrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || bytes.IndexByte(rest[:end], '\\') >= 0 || len(rest) <= end+1 || rest[end+1] != ',' {
		return "", false
	}
	return string(rest[:end]), true
}

// sortResourceVersion returns obj with metadata.resourceVersion, when it
// is metadata's first member (as the storage service sets it in objects
// whose metadata keys are not plain and in order), moved
// before the first member whose key sorts after it (encoding/json's order
// of a map's keys); obj itself when there is nothing to move or its form
// is not the one expected (keys with escapes, spaces between members).
func sortResourceVersion(obj []byte) []byte {
	meta, ok, err := jsonscan.Find(obj, jsonscan.SkipSpace(obj, 0), "metadata")
	if err != nil || !ok || obj[meta.ValStart] != '{' {
		return obj
	}
	const rvKey = `"resourceVersion"`
	var rv, next, greater, last jsonscan.Member
	n, plain := 0, true
	if _, err := jsonscan.ScanObject(obj, meta.ValStart, func(m jsonscan.Member) {
		plain = plain && m.Plain
		n++
		switch n {
		case 1:
			rv = m
		case 2:
			next = m
		}
		if n > 1 && greater.KeyEnd == 0 && string(obj[m.KeyStart:m.KeyEnd]) > rvKey {
			greater = m
		}
		last = m
	}); err != nil || !plain || n < 2 || string(obj[rv.KeyStart:rv.KeyEnd]) != rvKey ||
		obj[rv.ValEnd] != ',' || next.KeyStart != rv.ValEnd+1 || greater.KeyStart == next.KeyStart {
		return obj
	}
	member := obj[rv.KeyStart:rv.ValEnd]
	out := make([]byte, 0, len(obj))
	out = append(out, obj[:rv.KeyStart]...)
	if greater.KeyEnd != 0 {
		out = append(out, obj[next.KeyStart:greater.KeyStart]...)
		out = append(out, member...)
		out = append(out, ',')
		return append(out, obj[greater.KeyStart:]...)
	}
	out = append(out, obj[next.KeyStart:last.ValEnd]...)
	out = append(out, ',')
	out = append(out, member...)
	return append(out, obj[last.ValEnd:]...)
}
