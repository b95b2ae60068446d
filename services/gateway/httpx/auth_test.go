package httpx

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenIdentities: a token file's tokens stand for their user, other
// tokens for themselves; public paths need none.
func TestTokenIdentities(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(p, []byte("tok1,admin,1,\"system:masters\"\ntok2,bob,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := ReadTokenEntries(p)
	if err != nil {
		t.Fatal(err)
	}
	ts := NewTokenSet([]string{"plain"}, entries...)
	for _, tc := range []struct {
		path, token, key string
		ok               bool
	}{
		{"/apis", "tok1", "user:admin", true},
		{"/apis", "tok2", "user:bob", true},
		{"/apis", "plain", "token:", true},
		{"/apis", "nope", "", false},
		{"/readyz", "", "user:system:anonymous", true},
		{"/readyz", "tok2", "user:bob", true},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		id, ok := ts.Authenticate(r)
		if ok != tc.ok || !strings.HasPrefix(id.key, tc.key) || (tc.key == "token:" && len(id.key) != len("token:")+16) {
			t.Errorf("%s %q: %+v %v", tc.path, tc.token, id, ok)
		}
	}
}
