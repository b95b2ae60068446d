package httpx

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// unauthorizedBody is kube-apiserver's answer to a request without valid
// credentials, byte for byte.
const unauthorizedBody = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}` + "\n"

// publicPaths are served without credentials, as kube-apiserver's default
// RBAC lets anyone read them.
var publicPaths = map[string]bool{
	"/version": true,
	"/healthz": true,
	"/livez":   true,
	"/readyz":  true,
}

// TokenSet holds the accepted bearer tokens as hashes, compared in
// constant time, with whom each stands for.
type TokenSet struct {
	hashes [][32]byte
	ids    []identity
}

// identity is whom a request authenticated as: a token file entry's user,
// or for a token given without one, that token.
type identity struct {
	// user is the token file's user name ("" for a --token token).
	user string
	// key tells clients apart for per-client limits: "user:<name>", or
	// "token:<a prefix of the token's hash>".
	key string
}

// Anonymous is the identity of unauthenticated requests to public paths.
var Anonymous = identity{user: "system:anonymous", key: "user:system:anonymous"}

// TokenEntry is one accepted token and its user ("" when unknown).
type TokenEntry struct {
	token, user string
}

func NewTokenSet(tokens []string, entries ...TokenEntry) *TokenSet {
	ts := &TokenSet{}
	for _, t := range tokens {
		entries = append(entries, TokenEntry{token: t})
	}
	for _, e := range entries {
		t := strings.TrimSpace(e.token)
		if t == "" {
			continue
		}
		h := sha256.Sum256([]byte(t))
		id := identity{user: e.user, key: "user:" + e.user}
		if e.user == "" {
			id.key = "token:" + hex.EncodeToString(h[:8])
		}
		ts.hashes = append(ts.hashes, h)
		ts.ids = append(ts.ids, id)
	}
	return ts
}

func (ts *TokenSet) Empty() bool { return len(ts.hashes) == 0 }

// lookup returns the identity of token, if it is one of the set (every
// hash is compared, in constant time; the last match wins, as the last
// line of a token file does upstream).
func (ts *TokenSet) lookup(token string) (identity, bool) {
	if token == "" {
		return identity{}, false
	}
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts.hashes {
		if subtle.ConstantTimeCompare(h[:], ts.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return identity{}, false
	}
	return ts.ids[found], true
}

// valid reports whether token is one of the set.
func (ts *TokenSet) valid(token string) bool {
	_, ok := ts.lookup(token)
	return ok
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) string {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authenticate reports whether r may proceed, and as whom: public paths
// always (anonymously without a valid token), others with a configured
// bearer token.
func (ts *TokenSet) Authenticate(r *http.Request) (identity, bool) {
	if id, ok := ts.lookup(bearerToken(r)); ok {
		return id, true
	}
	if publicPaths[r.URL.Path] {
		return Anonymous, true
	}
	return identity{}, false
}

func writeUnauthorized(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, unauthorizedBody)
}

// ReadTokenFile reads the tokens of a token file (ReadTokenEntries).
func ReadTokenFile(path string) ([]string, error) {
	entries, err := ReadTokenEntries(path)
	if err != nil {
		return nil, err
	}
	tokens := make([]string, len(entries))
	for i, e := range entries {
		tokens[i] = e.token
	}
	return tokens, nil
}

// ReadTokenEntries reads a kube-apiserver style static token file: one CSV
// record per line, "token,user,uid[,groups...]"; the token and the user
// are used. Blank lines and lines starting with '#' are skipped.
func ReadTokenEntries(path string) ([]TokenEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	var entries []TokenEntry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("token file %s line %d: %w", path, n, err)
		}
		if len(rec) == 0 || strings.TrimSpace(rec[0]) == "" {
			return nil, fmt.Errorf("token file %s line %d: empty token", path, n)
		}
		e := TokenEntry{token: strings.TrimSpace(rec[0])}
		if len(rec) > 1 {
			e.user = strings.TrimSpace(rec[1])
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return entries, nil
}
