package httpx

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/kstatus"
)

// The self review paths kubectl auth can-i posts to.
const (
	selfAccessReviewPath = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	selfRulesReviewPath  = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
)

// ServeSelfReview answers r when it is a SelfSubjectAccessReview or a
// SelfSubjectRulesReview (authorization.k8s.io/v1), as kube-apiserver
// does, from the configured authorizers, and reports whether it was one.
func (a *Authorizer) ServeSelfReview(w http.ResponseWriter, r *http.Request, u user.Info) bool {
	var resource string
	switch r.URL.Path {
	case selfAccessReviewPath:
		resource = "selfsubjectaccessreviews"
	case selfRulesReviewPath:
		resource = "selfsubjectrulesreviews"
	default:
		return false
	}
	if r.Method != http.MethodPost {
		WriteStatusFor(w, r, kstatus.FromError(apierrors.NewMethodNotSupported(schema.GroupResource{Group: "authorization.k8s.io", Resource: resource}, verbOf(r.Method))))
		return true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		WriteStatusFor(w, r, kstatus.FromError(apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))))
		return true
	}
	var out runtime.Object
	if resource == "selfsubjectaccessreviews" {
		out, err = a.selfAccessReview(r, u, body)
	} else {
		out, err = a.selfRulesReview(r, u, body)
	}
	if err != nil {
		WriteStatusFor(w, r, kstatus.FromError(err))
		return true
	}
	// kubectl speaks protobuf to built-in APIs: answer in it when it is
	// the first media type asked for.
	mediaType := runtime.ContentTypeJSON
	if accept := strings.TrimSpace(strings.Split(r.Header.Get("Accept"), ",")[0]); strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
		mediaType = runtime.ContentTypeProtobuf
	}
	info, _ := runtime.SerializerInfoForMediaType(reviewCodecs.SupportedMediaTypes(), mediaType)
	var buf bytes.Buffer
	if err := reviewCodecs.EncoderForVersion(info.Serializer, authorizationv1.SchemeGroupVersion).Encode(out, &buf); err != nil {
		WriteStatusFor(w, r, kstatus.FromError(apierrors.NewInternalError(err)))
		return true
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(buf.Bytes())
	return true
}

// reviewCodecs decode and encode the reviews in JSON, YAML and protobuf.
var reviewCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme)
}()

// decodeReview decodes a review's body in any of the codecs' encodings.
func decodeReview(body []byte, into runtime.Object) error {
	if _, _, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

func verbOf(method string) string {
	switch method {
	case http.MethodGet:
		return "list"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "deletecollection"
	}
	return method
}

// selfAccessReview answers whether u may do what the review asks: the
// configured authorizers' decision (system:masters included), as
// kube-apiserver's SelfSubjectAccessReview.
func (a *Authorizer) selfAccessReview(r *http.Request, u user.Info, body []byte) (*authorizationv1.SelfSubjectAccessReview, error) {
	var review authorizationv1.SelfSubjectAccessReview
	if err := decodeReview(body, &review); err != nil {
		return nil, err
	}
	spec := review.Spec
	var errs field.ErrorList
	p := field.NewPath("spec")
	if spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(p.Child("nonResourceAttributes"), spec.NonResourceAttributes, `cannot be specified in combination with resourceAttributes`))
	}
	if spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil {
		errs = append(errs, field.Invalid(p.Child("resourceAttributes"), spec.NonResourceAttributes, `exactly one of nonResourceAttributes or resourceAttributes must be specified`))
	}
	if len(errs) > 0 {
		return nil, fielderr.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, review.Name, errs)
	}
	attrs := authorizer.AttributesRecord{User: u}
	if ra := spec.ResourceAttributes; ra != nil {
		attrs.ResourceRequest = true
		attrs.Verb, attrs.Namespace, attrs.Name = ra.Verb, ra.Namespace, ra.Name
		attrs.APIGroup, attrs.APIVersion = ra.Group, ra.Version
		attrs.Resource, attrs.Subresource = ra.Resource, ra.Subresource
		if attrs.APIVersion == "" {
			attrs.APIVersion = "*" // every version, as upstream reads an empty one
		}
	} else {
		attrs.Path, attrs.Verb = spec.NonResourceAttributes.Path, spec.NonResourceAttributes.Verb
	}
	decision, reason, err := a.decide(r.Context(), attrs)
	review.Status = authorizationv1.SubjectAccessReviewStatus{
		Allowed: decision == authorizer.DecisionAllow,
		Denied:  decision == authorizer.DecisionDeny,
		Reason:  reason,
	}
	if err != nil {
		review.Status.EvaluationError = err.Error()
	}
	review.APIVersion, review.Kind = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
	return &review, nil
}

// selfRulesReview lists what u may do in the review's namespace, from
// the modes' rule resolvers (the Webhook's list is empty and incomplete,
// as upstream's).
func (a *Authorizer) selfRulesReview(r *http.Request, u user.Info, body []byte) (*authorizationv1.SelfSubjectRulesReview, error) {
	var review authorizationv1.SelfSubjectRulesReview
	if err := decodeReview(body, &review); err != nil {
		return nil, err
	}
	if review.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	var resolvers []authorizer.RuleResolver
	for _, az := range a.chain {
		if rr, ok := az.UnconditionalAuthorizer.(authorizer.RuleResolver); ok && az.mode != "SystemMasters" {
			resolvers = append(resolvers, rr)
		}
	}
	resRules, nonResRules, incomplete, err := union.NewRuleResolvers(resolvers...).RulesFor(r.Context(), u, review.Spec.Namespace)
	out := &authorizationv1.SelfSubjectRulesReview{}
	out.APIVersion, out.Kind = "authorization.k8s.io/v1", "SelfSubjectRulesReview"
	out.Status.Incomplete = incomplete
	out.Status.ResourceRules = []authorizationv1.ResourceRule{}
	out.Status.NonResourceRules = []authorizationv1.NonResourceRule{}
	for _, rule := range resRules {
		out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{
			Verbs: rule.GetVerbs(), APIGroups: rule.GetAPIGroups(), Resources: rule.GetResources(), ResourceNames: rule.GetResourceNames()})
	}
	for _, rule := range nonResRules {
		out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{
			Verbs: rule.GetVerbs(), NonResourceURLs: rule.GetNonResourceURLs()})
	}
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	return out, nil
}
