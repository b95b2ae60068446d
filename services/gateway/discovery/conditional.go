package discovery

import (
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// conditional holds a GET's conditional request headers (the first value
// of each, as net/http's Header.Get reads them).
type conditional struct {
	ifMatch, ifUnmodifiedSince, ifNoneMatch, ifModifiedSince string
}

// evaluate answers the conditional headers for a document with etag,
// changed last at modified (zero: unknown), in the order of RFC 7232
// section 6, which net/http's ServeContent follows and with it upstream's
// OpenAPI handlers: 412 when If-Match (or, without it, If-Unmodified-Since)
// fails; else 304 when If-None-Match names the document (or, without it,
// If-Modified-Since is not older than it); else 200.
func (c conditional) evaluate(etag string, modified time.Time) int {
	match := c.ifMatchHolds(etag)
	if match == condNone {
		match = sinceHolds(c.ifUnmodifiedSince, modified, false)
	}
	if match == condFalse {
		return http.StatusPreconditionFailed
	}
	switch c.ifNoneMatchHolds(etag) {
	case condFalse:
		return http.StatusNotModified
	case condNone:
		if sinceHolds(c.ifModifiedSince, modified, true) == condFalse {
			return http.StatusNotModified
		}
	}
	return http.StatusOK
}

type condResult int

const (
	condNone condResult = iota
	condTrue
	condFalse
)

// ifMatchHolds: If-Match holds when it is "*" or lists etag, compared
// strongly.
func (c conditional) ifMatchHolds(etag string) condResult {
	if c.ifMatch == "" {
		return condNone
	}
	held := false
	eachETag(c.ifMatch, func(tag string) bool {
		held = tag == "*" || (tag == etag && strings.HasPrefix(tag, `"`))
		return !held
	})
	if held {
		return condTrue
	}
	return condFalse
}

// ifNoneMatchHolds: If-None-Match fails when it is "*" or lists etag,
// compared weakly (W/ ignored).
func (c conditional) ifNoneMatchHolds(etag string) condResult {
	if c.ifNoneMatch == "" {
		return condNone
	}
	held := true
	eachETag(c.ifNoneMatch, func(tag string) bool {
		held = tag != "*" && strings.TrimPrefix(tag, "W/") != strings.TrimPrefix(etag, "W/")
		return held
	})
	if held {
		return condTrue
	}
	return condFalse
}

// sinceHolds evaluates If-Modified-Since (modifiedSince) or
// If-Unmodified-Since against modified, to the second as Last-Modified
// carries it; a header that is absent or not an HTTP date, or an unknown
// modified, is condNone.
func sinceHolds(header string, modified time.Time, modifiedSince bool) condResult {
	if header == "" || !known(modified) {
		return condNone
	}
	t, err := http.ParseTime(header)
	if err != nil {
		return condNone
	}
	notNewer := modified.Truncate(time.Second).Compare(t) <= 0
	if notNewer != modifiedSince {
		return condTrue
	}
	return condFalse
}

// known reports whether a document's modification time is set (neither
// zero nor the Unix epoch, which net/http takes for unset too).
func known(modified time.Time) bool {
	return !modified.IsZero() && !modified.Equal(time.Unix(0, 0))
}

// eachETag calls fn with each entity tag of a list ("*", `"x"` or
// `W/"x"`, comma-separated) until fn returns false or the list stops
// being one (a malformed tag ends it).
func eachETag(list string, fn func(tag string) bool) {
	for {
		list = textproto.TrimString(list)
		switch {
		case list == "":
			return
		case list[0] == ',':
			list = list[1:]
			continue
		case list[0] == '*':
			fn("*")
			return
		}
		tag, rest := scanETag(list)
		if tag == "" || !fn(tag) {
			return
		}
		list = rest
	}
}

// scanETag splits the entity tag at the start of s (`"x"` or `W/"x"`,
// the characters RFC 7232 allows between the quotes) from the rest; tag
// is "" when s does not start with one.
func scanETag(s string) (tag, rest string) {
	start := 0
	if strings.HasPrefix(s, "W/") {
		start = 2
	}
	if len(s) < start+2 || s[start] != '"' {
		return "", ""
	}
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i+1], s[i+1:]
		case c == 0x21 || (c >= 0x23 && c <= 0x7E) || c >= 0x80:
		default:
			return "", ""
		}
	}
	return "", ""
}
