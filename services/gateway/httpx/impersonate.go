package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// withImpersonation is k8s.io/apiserver's impersonation filter
// (Impersonate-User, -Group, -Uid, -Extra-*, each authorized by az as verb
// impersonate) with v1.33's answer to impersonation headers without a
// user: responsewriters.InternalError's plain-text 500 quoting the filter's
// error (the library the gateway builds with answers a 400 Status).
func withImpersonation(h http.Handler, az authorizer.UnconditionalAuthorizer) http.Handler {
	filter := impersonation.WithImpersonation(h, az, statusCodecs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(authenticationv1.ImpersonateUserHeader) != "" || !impersonates(r.Header) {
			filter.ServeHTTP(w, r)
			return
		}
		// The filter refuses the request without calling h; its answer's
		// message is v1.33's error.
		r2 := r.Clone(r.Context())
		r2.Header.Set("Accept", ContentTypeJSON)
		rec := &recorder{header: http.Header{}}
		filter.ServeHTTP(rec, r2)
		var st metav1.Status
		if err := json.Unmarshal(rec.body.Bytes(), &st); err != nil || st.Message == "" {
			st.Message = "impersonation headers without a user"
		}
		responsewriters.InternalError(w, r, errors.New(st.Message))
	})
}

// impersonates reports whether h has an impersonation header.
func impersonates(h http.Header) bool {
	if h.Get(authenticationv1.ImpersonateGroupHeader) != "" || h.Get(authenticationv1.ImpersonateUIDHeader) != "" {
		return true
	}
	for k := range h {
		if strings.HasPrefix(k, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			return true
		}
	}
	return false
}

// recorder keeps an answer that is not sent.
type recorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) WriteHeader(int)             {}
