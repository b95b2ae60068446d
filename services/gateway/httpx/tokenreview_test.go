package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTokenReview: upstream's tokenreview REST: the token authenticated
// as a request carrying it alone, status.authenticated/user/error, a
// review without a token 400, audiences the authenticators do not serve
// not authenticated, create only.
func TestTokenReview(t *testing.T) {
	dir := t.TempDir()
	a, err := NewAuthenticator(t.Context(), AuthConfig{Tokens: []string{"admin-token"}, TokenFile: writeFile(t, dir, "tokens.csv", []byte("bob-token,bob,42,\"devs,ops\"\n"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, body string
		code               int
		want               string
	}{
		{"token file user", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"bob-token"}}`, http.StatusCreated,
			`{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","metadata":{},"spec":{"token":"bob-token"},"status":{"authenticated":true,"user":{"username":"bob","uid":"42","groups":["devs","ops","system:authenticated"]}}}`},
		{"admin", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"admin-token"}}`, http.StatusCreated,
			`"status":{"authenticated":true,"user":{"username":"admin","groups":["system:masters","system:authenticated"]}}`},
		// the bearer token authenticator's error, as upstream's
		{"unknown", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"nope"}}`, http.StatusCreated,
			`"status":{"user":{},"error":"invalid bearer token"}}`},
		// crdplane's tokens are audience-agnostic with no implicit audience
		{"audiences", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"bob-token","audiences":["api"]}}`, http.StatusCreated,
			`"status":{"user":{},"error":"invalid bearer token"}}`},
		{"no token", http.MethodPost, `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{}}`, http.StatusBadRequest,
			`"message":"token is required for TokenReview in authentication","reason":"BadRequest","code":400}`},
		{"get", http.MethodGet, ``, http.StatusMethodNotAllowed,
			`"message":"list is not supported on resources of kind \"tokenreviews.authentication.k8s.io\"","reason":"MethodNotAllowed","details":{"group":"authentication.k8s.io","kind":"tokenreviews"},"code":405}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/apis/authentication.k8s.io/v1/tokenreviews", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json")
			rec := httptest.NewRecorder()
			if !a.ServeTokenReview(rec, r) {
				t.Fatal("not served")
			}
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("= %d %s\nwant %d containing %s", rec.Code, rec.Body.String(), tc.code, tc.want)
			}
		})
	}
	if a.ServeTokenReview(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/apis/authentication.k8s.io/v1/other", nil)) {
		t.Error("another path served")
	}
}
