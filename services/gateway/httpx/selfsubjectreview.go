package httpx

import (
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

// selfSubjectReviewPath is authentication.k8s.io/v1 SelfSubjectReview's
// collection (kubectl auth whoami).
const selfSubjectReviewPath = "/apis/authentication.k8s.io/v1/selfsubjectreviews"

// ServeSelfSubjectReview answers r when it is a SelfSubjectReview
// (create only, not stored), as kube-apiserver's selfsubjectreview REST:
// the review comes back with the request's user (name, uid, groups,
// extra) and the time, whatever its body held. It reports whether r was
// one. The request itself was authorized by the edge (verb create on
// selfsubjectreviews, which RBAC's system:basic-user grants every
// authenticated user).
func ServeSelfSubjectReview(w http.ResponseWriter, r *http.Request, u user.Info) bool {
	if r.URL.Path != selfSubjectReviewPath {
		return false
	}
	body, ok := readReviewBody(w, r, schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"})
	if !ok {
		return true
	}
	if err := decodeReview(body, &authenticationv1.SelfSubjectReview{}); err != nil {
		WriteStatusFor(w, r, kstatus.FromError(err))
		return true
	}
	if u == nil {
		WriteStatusFor(w, r, kstatus.FromError(apierrors.NewBadRequest("no user present on request")))
		return true
	}
	out := selfSubjectReview(u, time.Now())
	responsewriters.WriteObjectNegotiated(reviewCodecs, negotiation.DefaultEndpointRestrictions, authenticationv1.SchemeGroupVersion, w, r, http.StatusCreated, out, false)
	return true
}

// selfSubjectReview is the review of u at now.
func selfSubjectReview(u user.Info, now time.Time) *authenticationv1.SelfSubjectReview {
	extra := u.GetExtra()
	out := &authenticationv1.SelfSubjectReview{
		TypeMeta:   metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"},
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now)},
		Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: u.GetName(),
			UID:      u.GetUID(),
			Groups:   u.GetGroups(),
			Extra:    make(map[string]authenticationv1.ExtraValue, len(extra)),
		}},
	}
	for k, v := range extra {
		out.Status.UserInfo.Extra[k] = authenticationv1.ExtraValue(v)
	}
	return out
}
