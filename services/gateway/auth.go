package gateway

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
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

// tokenSet holds the accepted bearer tokens as hashes, compared in constant time.
type tokenSet struct {
	hashes [][32]byte
}

func newTokenSet(tokens []string) *tokenSet {
	ts := &tokenSet{}
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			ts.hashes = append(ts.hashes, sha256.Sum256([]byte(t)))
		}
	}
	return ts
}

func (ts *tokenSet) empty() bool { return len(ts.hashes) == 0 }

// valid reports whether token is one of the set.
func (ts *tokenSet) valid(token string) bool {
	if token == "" {
		return false
	}
	h := sha256.Sum256([]byte(token))
	ok := 0
	for i := range ts.hashes {
		ok |= subtle.ConstantTimeCompare(h[:], ts.hashes[i][:])
	}
	return ok == 1
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

// authenticate reports whether r may proceed: public paths always, others
// with a configured bearer token.
func (ts *tokenSet) authenticate(r *http.Request) bool {
	if publicPaths[r.URL.Path] {
		return true
	}
	return ts.valid(bearerToken(r))
}

func writeUnauthorized(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", contentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, unauthorizedBody)
}

// readTokenFile reads a kube-apiserver style static token file: one CSV
// record per line, "token,user,uid[,groups...]"; only the token is used.
// Blank lines and lines starting with '#' are skipped.
func readTokenFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	var tokens []string
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
		tokens = append(tokens, strings.TrimSpace(rec[0]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tokens, nil
}
