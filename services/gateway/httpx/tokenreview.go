package httpx

import (
	"errors"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

// tokenReviewPath is authentication.k8s.io/v1 TokenReview's collection.
const tokenReviewPath = "/apis/authentication.k8s.io/v1/tokenreviews"

// errBadAuthenticatorAuds is upstream's answer when the authenticator's
// audiences do not meet the review's.
var errBadAuthenticatorAuds = apierrors.NewInternalError(errors.New("error validating audiences"))

// ServeTokenReview answers r when it is a TokenReview (create only, not
// stored), as kube-apiserver's tokenreview REST: the token is
// authenticated by the configured authenticators, as a request carrying
// it alone would be, and reports whether it was one. Extension API
// servers delegate bearer tokens to it (--authentication-kubeconfig).
// The request itself was authorized by the edge (verb create on
// tokenreviews).
func (a *Authenticator) ServeTokenReview(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != tokenReviewPath {
		return false
	}
	body, ok := readReviewBody(w, r, schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"})
	if !ok {
		return true
	}
	review := &authenticationv1.TokenReview{}
	if err := decodeReview(body, review); err != nil {
		WriteStatusFor(w, r, kstatus.FromError(err))
		return true
	}
	out, err := a.tokenReview(review)
	if err != nil {
		WriteStatusFor(w, r, kstatus.FromError(err))
		return true
	}
	responsewriters.WriteObjectNegotiated(reviewCodecs, negotiation.DefaultEndpointRestrictions, authenticationv1.SchemeGroupVersion, w, r, http.StatusCreated, out, false)
	return true
}

// tokenReview fills a review's status.
func (a *Authenticator) tokenReview(review *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	if review.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	// a request with nothing but the token
	fake := &http.Request{Header: http.Header{}}
	fake.Header.Add("Authorization", "Bearer "+review.Spec.Token)
	auds := review.Spec.Audiences
	if len(auds) > 0 {
		fake = fake.WithContext(authenticator.WithAudiences(fake.Context(), auds))
	}
	resp, ok, err := a.req.AuthenticateRequest(fake)
	review.Status.Authenticated = ok
	if err != nil {
		review.Status.Error = err.Error()
	}
	if len(auds) > 0 && resp != nil && len(authenticator.Audiences(auds).Intersect(resp.Audiences)) == 0 {
		return nil, errBadAuthenticatorAuds
	}
	if resp != nil && resp.User != nil {
		review.Status.User = authenticationv1.UserInfo{
			Username: resp.User.GetName(),
			UID:      resp.User.GetUID(),
			Groups:   resp.User.GetGroups(),
			Extra:    map[string]authenticationv1.ExtraValue{},
		}
		for k, v := range resp.User.GetExtra() {
			review.Status.User.Extra[k] = authenticationv1.ExtraValue(v)
		}
		review.Status.Audiences = resp.Audiences
	}
	review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
	return review, nil
}
