// Package jsonscan reads the members of a raw JSON object without decoding
// it: it finds a member's key and value as byte ranges, so that hot paths
// (reading an object's apiVersion or metadata, splicing a resourceVersion
// in) cost one linear scan instead of a full unmarshal and marshal.
//
// Offsets are indexes into the document given. A function that scans
// reports malformed input (ErrMalformed, ErrNotObject or ok=false); it
// never panics on any input, and never reads outside the slice.
//
// # What is validated
//
// The scanner checks the structure it walks: the braces, quotes, colons and
// commas of the object it iterates, and every scalar (number, true, false,
// null) that is a member's value. It does not validate what it skips:
//
//   - the contents of a string: it looks for the closing quote, skipping a
//     backslash and the byte after it, so control characters and invalid
//     escape sequences pass (String and Member.KeyIs, which decode, do
//     check them);
//   - the inside of an object or array that is a member's value: it only
//     counts brackets outside strings until they balance, so a missing
//     comma, a bad scalar or a ']' closing a '{' inside it pass.
//   - what follows the object: ScanObject returns the offset after it for
//     the caller to check; Find and Lookup do not look.
//
// Whatever passes is a well-formed object at the level scanned, with each
// value delimited as a decoder would delimit it when the input is valid.
// That is safe for data that was validated when written (objects from
// storage, which checks every write with json.Valid; a response that
// already decoded), and for a value that is decoded before use (the
// decoder validates it). On valid JSON, the members found and their
// values are exactly those encoding/json decodes into a
// map[string]json.RawMessage: the same keys (compared after unescaping,
// case-sensitively) and the same bytes, the last of duplicate keys
// winning.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

var (
	// ErrMalformed reports input that is not well-formed JSON where the
	// scanner looked.
	ErrMalformed = errors.New("malformed JSON")
	// ErrNotObject reports a value that should be an object and is not.
	ErrNotObject = errors.New("not a JSON object")
)

// SkipSpace returns the offset of the first byte at or after i that is not
// JSON white space (len(b) when there is none).
func SkipSpace(b []byte, i int) int {
	for uint(i) < uint(len(b)) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipString returns the offset after the string that starts at b[i] (a
// quote). Its contents are not validated: a backslash escapes the byte
// after it, whatever that is.
func SkipString(b []byte, i int) (int, error) {
	if uint(i) >= uint(len(b)) || b[i] != '"' {
		return 0, ErrMalformed
	}
	end := skipString(b, i)
	if end < 0 {
		return 0, ErrMalformed
	}
	return end, nil
}

// skipString is SkipString for b[i] == '"'; it returns -1 for an
// unterminated string.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede
		// it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

// scanKey is skipString for a key, which also reports whether the key is
// plain (see Member.Plain). Keys are short: one loop does both.
func scanKey(b []byte, i int) (end int, isPlain bool) {
	isPlain, ascii := true, true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !ascii && isPlain {
				isPlain = utf8.Valid(b[i+1 : j])
			}
			return j + 1, isPlain
		case c == '\\':
			isPlain = false
			j++
		case c < 0x20:
			isPlain = false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return -1, false
}

// SkipValue returns the offset after the value that starts at b[i] (not at
// white space). A scalar is validated; a string only up to its closing
// quote (see SkipString); an object or array only for brackets that
// balance, outside strings.
func SkipValue(b []byte, i int) (int, error) {
	if uint(i) >= uint(len(b)) {
		return 0, ErrMalformed
	}
	var end int
	switch c := b[i]; c {
	case '"':
		end = skipString(b, i)
	case '{', '[':
		end = skipNested(b, i)
	case 't':
		end = skipLiteral(b, i, "true")
	case 'f':
		end = skipLiteral(b, i, "false")
	case 'n':
		end = skipLiteral(b, i, "null")
	default:
		end = skipNumber(b, i)
	}
	if end < 0 {
		return 0, ErrMalformed
	}
	return end, nil
}

// skipNested returns the offset after the object or array at b[i], or -1.
func skipNested(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			// The closing quote, inline when no backslash precedes it
			// (a string ends every few bytes: a call each adds up).
			k := bytes.IndexByte(b[j+1:], '"')
			if k < 0 {
				return -1
			}
			if b[j+k] != '\\' {
				j += k + 1
				continue
			}
			end := skipString(b, j)
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
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipNumber returns the offset after the number at b[i] (RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or -1.
func skipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// Member is one "key": value member of an object, as offsets into the
// document b it was scanned in: b[KeyStart:KeyEnd] is the key with its
// quotes, b[ValStart:ValEnd] the raw value.
type Member struct {
	KeyStart, KeyEnd int
	ValStart, ValEnd int
	// Plain is set when the key's raw bytes (between the quotes) are its
	// name: no escape sequence, and nothing a decoder would replace
	// (invalid UTF-8, control characters).
	Plain bool
}

// Value returns the member's raw value in b (empty for the zero Member).
func (m Member) Value(b []byte) []byte {
	return b[m.ValStart:m.ValEnd]
}

// Name returns the member's key in b, unescaped; ok is false when the key
// is not a valid JSON string.
func (m Member) Name(b []byte) (name string, ok bool) {
	if m.Plain {
		return string(b[m.KeyStart+1 : m.KeyEnd-1]), true
	}
	return String(b[m.KeyStart:m.KeyEnd])
}

// KeyIs reports whether the member's key in b is name, compared after
// unescaping and case-sensitively (as encoding/json matches a map key, and
// as Kubernetes matches a field).
func (m Member) KeyIs(b []byte, name string) bool {
	if m.Plain {
		return string(b[m.KeyStart+1:m.KeyEnd-1]) == name
	}
	return m.decodedKeyIs(b, name)
}

// decodedKeyIs is KeyIs for a key that is not plain, kept out of line so
// that KeyIs inlines.
//
//go:noinline
func (m Member) decodedKeyIs(b []byte, name string) bool {
	k, ok := String(b[m.KeyStart:m.KeyEnd])
	return ok && k == name
}

// ScanObject calls fn with every member of the object that starts at b[i]
// (not at white space), in order, and returns the offset after the
// object. It returns ErrNotObject when b[i] does not start an object and
// ErrMalformed when the object is not well formed (see the package
// documentation for what is validated); fn may have been called for the
// members before the fault.
func ScanObject(b []byte, i int, fn func(Member)) (int, error) {
	if uint(i) >= uint(len(b)) || b[i] != '{' {
		return 0, ErrNotObject
	}
	j := SkipSpace(b, i+1)
	if j < len(b) && b[j] == '}' {
		return j + 1, nil
	}
	for {
		if j >= len(b) || b[j] != '"' {
			return 0, ErrMalformed
		}
		m := Member{KeyStart: j}
		if m.KeyEnd, m.Plain = scanKey(b, j); m.KeyEnd < 0 {
			return 0, ErrMalformed
		}
		j = SkipSpace(b, m.KeyEnd)
		if j >= len(b) || b[j] != ':' {
			return 0, ErrMalformed
		}
		m.ValStart = SkipSpace(b, j+1)
		var err error
		if m.ValEnd, err = SkipValue(b, m.ValStart); err != nil {
			return 0, err
		}
		fn(m)
		j = SkipSpace(b, m.ValEnd)
		if j >= len(b) {
			return 0, ErrMalformed
		}
		switch b[j] {
		case ',':
			j = SkipSpace(b, j+1)
		case '}':
			return j + 1, nil
		default:
			return 0, ErrMalformed
		}
	}
}

// Find returns the member named name of the object that starts at b[i]:
// the last one, as a decoder keeps, when the key repeats. The whole object
// is scanned, so an error reports a malformed object even after the
// member.
func Find(b []byte, i int, name string) (m Member, found bool, err error) {
	_, err = ScanObject(b, i, func(mm Member) {
		if mm.KeyIs(b, name) {
			m, found = mm, true
		}
	})
	if err != nil {
		return Member{}, false, err
	}
	return m, found, nil
}

// FindEach finds the members of the object that starts at b[i] named
// names (distinct), in one pass: out[k] is the member named names[k], the
// last one when the key repeats, or the zero Member (whose Value is empty)
// when there is none. out must be at least len(names) long. Like Find, it
// scans the whole object.
func FindEach(b []byte, i int, names []string, out []Member) error {
	out = out[:len(names)]
	clear(out)
	_, err := ScanObject(b, i, func(m Member) {
		// The key once, for all the names.
		if m.Plain {
			key := b[m.KeyStart+1 : m.KeyEnd-1]
			for k, name := range names {
				if string(key) == name {
					out[k] = m
					return
				}
			}
			return
		}
		if key, ok := String(b[m.KeyStart:m.KeyEnd]); ok {
			for k, name := range names {
				if key == name {
					out[k] = m
					return
				}
			}
		}
	})
	if err != nil {
		clear(out)
	}
	return err
}

// Lookup returns the raw value at path (a chain of member names) in the
// JSON object doc (leading white space allowed; what follows the object is
// not read). found is false, with no error, when a member is missing or a
// value on the way is not an object; err reports a malformed object on the
// way.
func Lookup(doc []byte, path ...string) (raw []byte, found bool, err error) {
	i := SkipSpace(doc, 0)
	for n, name := range path {
		if i >= len(doc) || doc[i] != '{' {
			return nil, false, nil
		}
		m, ok, err := Find(doc, i, name)
		if err != nil || !ok {
			return nil, false, err
		}
		if n == len(path)-1 {
			return m.Value(doc), true, nil
		}
		i = m.ValStart
	}
	return nil, false, nil
}

// String decodes the raw JSON string raw (quotes included, no white space
// around) as encoding/json does: escapes resolved, invalid UTF-8 replaced
// by U+FFFD. ok is false when raw is not a valid JSON string.
func String(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; plain(inner) {
		return string(inner), true
	}
	// Escapes, or bytes that do not stand for themselves: rare enough for
	// the reference decoder.
	var decoded string
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return "", false
	}
	return decoded, true
}

// plain reports whether s, the inside of a JSON string, decodes to itself:
// valid UTF-8 with no quote, backslash or control character.
func plain(s []byte) bool {
	// Eight bytes at a time while they are plain ASCII (the usual case),
	// the last eight overlapping.
	if n := len(s); n >= 8 {
		i := 0
		for ; i+8 <= n && plainASCII8(binary.LittleEndian.Uint64(s[i:])); i += 8 {
		}
		if i+8 > n && plainASCII8(binary.LittleEndian.Uint64(s[n-8:])) {
			return true
		}
		s = s[i:]
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			return false
		}
		i += n
	}
	return true
}

// plainASCII8 reports whether none of the eight bytes in x is non-ASCII, a
// control character, a quote or a backslash (the classic bit tricks: a
// byte below n sets its high bit in x-n, if it was clear in x).
func plainASCII8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := func(x uint64, n byte) uint64 { return (x - ones*uint64(n)) &^ x }
	return (x|below(x, 0x20)|below(x^(ones*'"'), 1)|below(x^(ones*'\\'), 1))&highs == 0
}

// Edit replaces b[Start:End] with Repl.
type Edit struct {
	Start, End int
	Repl       []byte
}

// ApplyEdits returns a new slice holding b with the edits applied. The
// edits must be sorted by Start and not overlap, with offsets in b (as the
// scanner returns them); it panics otherwise.
func ApplyEdits(b []byte, edits ...Edit) []byte {
	n := len(b)
	for _, e := range edits {
		n += len(e.Repl) - (e.End - e.Start)
	}
	return AppendEdits(make([]byte, 0, n), b, edits...)
}

// AppendEdits appends b with the edits applied (as for ApplyEdits) to dst
// and returns the extended slice.
func AppendEdits(dst, b []byte, edits ...Edit) []byte {
	pos := 0
	for _, e := range edits {
		dst = append(dst, b[pos:e.Start]...)
		dst = append(dst, e.Repl...)
		pos = e.End
	}
	return append(dst, b[pos:]...)
}
