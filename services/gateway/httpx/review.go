package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/kstatus"
)

// The access review paths (authorization.k8s.io/v1): the self reviews
// kubectl auth can-i posts, the SubjectAccessReview, and the namespaced
// LocalSubjectAccessReview (reviewPrefix + "namespaces/<ns>/" + resource).
const (
	reviewPrefix         = "/apis/authorization.k8s.io/v1/"
	selfAccessReviewPath = reviewPrefix + "selfsubjectaccessreviews"
	selfRulesReviewPath  = reviewPrefix + "selfsubjectrulesreviews"
	accessReviewPath     = reviewPrefix + "subjectaccessreviews"
	localAccessReviews   = "localsubjectaccessreviews"
)

// reviewPath is the resource (and namespace) of an access review path.
func reviewPath(path string) (resource, namespace string, ok bool) {
	switch path {
	case selfAccessReviewPath:
		return "selfsubjectaccessreviews", "", true
	case selfRulesReviewPath:
		return "selfsubjectrulesreviews", "", true
	case accessReviewPath:
		return "subjectaccessreviews", "", true
	}
	rest, ok := strings.CutPrefix(path, reviewPrefix+"namespaces/")
	if !ok {
		return "", "", false
	}
	ns, res, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || res != localAccessReviews {
		return "", "", false
	}
	return localAccessReviews, ns, true
}

// ServeReview answers r when it is one of the access reviews of
// authorization.k8s.io/v1 (SelfSubjectAccessReview,
// SelfSubjectRulesReview, SubjectAccessReview, LocalSubjectAccessReview),
// as kube-apiserver does, from the configured authorizers, and reports
// whether it was one. The request itself was authorized by the edge (verb
// create on the review's resource).
func (a *Authorizer) ServeReview(w http.ResponseWriter, r *http.Request, u user.Info) bool {
	resource, namespace, ok := reviewPath(r.URL.Path)
	if !ok {
		return false
	}
	body, ok := readReviewBody(w, r, schema.GroupResource{Group: "authorization.k8s.io", Resource: resource})
	if !ok {
		return true
	}
	var err error
	var out runtime.Object
	switch resource {
	case "selfsubjectaccessreviews":
		out, err = a.selfAccessReview(r, u, body)
	case "selfsubjectrulesreviews":
		out, err = a.selfRulesReview(r, u, body)
	case "subjectaccessreviews":
		out, err = a.accessReview(r, body)
	default:
		out, err = a.localAccessReview(r, namespace, body)
	}
	if err != nil {
		WriteStatusFor(w, r, kstatus.FromError(err))
		return true
	}
	// JSON, YAML or protobuf, as the Accept header asks (kubectl speaks
	// protobuf to built-in APIs), through upstream's negotiation and writer.
	responsewriters.WriteObjectNegotiated(reviewCodecs, negotiation.DefaultEndpointRestrictions, authorizationv1.SchemeGroupVersion, w, r, http.StatusCreated, out, false)
	return true
}

// reviewCodecs decode and encode the reviews in JSON, YAML and protobuf.
var reviewCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := authorizationv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme)
}()

// readReviewBody reads the body of a review's create, the only verb a
// review (of resource gr) has: another is upstream's 405, a body that
// cannot be read its 400, each answered here (ok false).
func readReviewBody(w http.ResponseWriter, r *http.Request, gr schema.GroupResource) (body []byte, ok bool) {
	if r.Method != http.MethodPost {
		WriteStatusFor(w, r, kstatus.FromError(apierrors.NewMethodNotSupported(gr, verbOf(r.Method))))
		return nil, false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		WriteStatusFor(w, r, kstatus.FromError(apierrors.NewBadRequest(fmt.Sprintf("unable to read request body: %v", err))))
		return nil, false
	}
	return body, true
}

// decodeReview decodes a review's body in any of the codecs' encodings.
func decodeReview(body []byte, into runtime.Object) error {
	obj, gvk, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, into)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if obj != into {
		// another kind: upstream's create handler cannot convert it
		want := reflect.TypeOf(into).Elem()
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: converting (%s) to (%s): unknown conversion",
			gvk.Kind, gvk.Version, want.Name(), reflect.TypeOf(obj).Elem().String(), reviewInternalPackage(want.PkgPath())+"."+want.Name()))
	}
	return nil
}

// reviewInternalPackage is the package name of the internal types of a
// review's group (by its v1 package path) in kube-apiserver, as its
// conversion errors name them.
func reviewInternalPackage(pkgPath string) string {
	if strings.HasSuffix(pkgPath, "/authentication/v1") {
		return "authentication"
	}
	return "authorization"
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
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes, field.NewPath("spec"))
	errs = append(errs, validateSelectors(spec.ResourceAttributes)...)
	errs = append(errs, validateEmptyMeta(review.ObjectMeta, false)...)
	if len(errs) > 0 {
		return nil, invalidReview(errs)
	}
	rest.WipeObjectMetaSystemFields(&review.ObjectMeta)
	attrs := reviewAttributes(u, spec.ResourceAttributes, spec.NonResourceAttributes)
	review.Status = a.reviewStatus(r.Context(), attrs)
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

// invalidReview is the 422 of an invalid review. The qualified kind is
// empty, as kube-apiserver's: its handlers see the review converted to
// the internal version, which has no kind.
func invalidReview(errs field.ErrorList) error {
	return fielderr.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io"}, "", errs)
}

// validateAttributes is kube-apiserver v1.33's validation of a review's
// attributes (pkg/apis/authorization/validation): exactly one of them, and
// well-formed selectors.
func validateAttributes(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(p.Child("nonResourceAttributes"), nra, `cannot be specified in combination with resourceAttributes`))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(p.Child("resourceAttributes"), nra, `exactly one of nonResourceAttributes or resourceAttributes must be specified`))
	}
	return errs
}

// validateSelectors checks the field and label selectors of resource
// attributes (upstream's rules; operators it does not know are allowed,
// so that newer clients can be authorized).
func validateSelectors(ra *authorizationv1.ResourceAttributes) field.ErrorList {
	if ra == nil {
		return nil
	}
	var errs field.ErrorList
	p := field.NewPath("spec.resourceAttributes")
	if fs := ra.FieldSelector; fs != nil {
		fp := p.Child("fieldSelector")
		errs = append(errs, selectorShape(fp, fs.RawSelector, len(fs.Requirements))...)
		opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, req := range fs.Requirements {
			errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(req, opts, fp.Child("requirements").Index(i))...)
		}
	}
	if ls := ra.LabelSelector; ls != nil {
		lp := p.Child("labelSelector")
		errs = append(errs, selectorShape(lp, ls.RawSelector, len(ls.Requirements))...)
		opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, req := range ls.Requirements {
			errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(req, opts, lp.Child("requirements").Index(i))...)
		}
	}
	return errs
}

// selectorShape: a selector is either raw or requirements, and not empty.
func selectorShape(p *field.Path, raw string, requirements int) field.ErrorList {
	var errs field.ErrorList
	if raw != "" && requirements > 0 {
		errs = append(errs, field.Invalid(p.Child("rawSelector"), raw, "may not specified at the same time as requirements"))
	}
	if raw == "" && requirements == 0 {
		errs = append(errs, field.Required(p.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", p)))
	}
	return errs
}

// validateEmptyMeta: a review's metadata must be empty once the system
// fields are wiped (the namespace of a LocalSubjectAccessReview aside).
func validateEmptyMeta(meta metav1.ObjectMeta, allowNamespace bool) field.ErrorList {
	m := meta
	rest.WipeObjectMetaSystemFields(&m)
	m.ManagedFields = nil
	msg := "must be empty"
	if allowNamespace {
		m.Namespace = ""
		msg = "must be empty except for namespace"
	}
	if apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, m) {
		return nil
	}
	rest.WipeObjectMetaSystemFields(&meta)
	return field.ErrorList{field.Invalid(field.NewPath("metadata"), meta, msg)}
}

// validateSubject: a SubjectAccessReview names a user or a group.
func validateSubject(spec authorizationv1.SubjectAccessReviewSpec) field.ErrorList {
	if spec.User == "" && len(spec.Groups) == 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "user"), spec.User, `at least one of user or group must be specified`)}
	}
	return nil
}

// reviewAttributes are the authorization attributes a review asks about
// for u, as kube-apiserver builds them: an empty version is every version,
// selectors parsed (a selector that does not parse is left out and
// reported in the status's evaluationError).
func reviewAttributes(u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizer.AttributesRecord {
	if ra == nil {
		return authorizer.AttributesRecord{User: u, Path: nra.Path, Verb: nra.Verb}
	}
	attrs := authorizer.AttributesRecord{
		User: u, ResourceRequest: true,
		Verb: ra.Verb, Namespace: ra.Namespace, Name: ra.Name,
		APIGroup: ra.Group, APIVersion: ra.Version, Resource: ra.Resource, Subresource: ra.Subresource,
	}
	if attrs.APIVersion == "" {
		attrs.APIVersion = "*"
	}
	if ls := ra.LabelSelector; ls != nil {
		switch {
		case len(ls.Requirements) > 0:
			attrs.LabelSelectorRequirements, attrs.LabelSelectorParsingErr = labelRequirements(ls.Requirements)
		case ls.RawSelector != "":
			if sel, err := labels.Parse(ls.RawSelector); err != nil {
				attrs.LabelSelectorParsingErr = err
			} else {
				attrs.LabelSelectorRequirements, _ = sel.Requirements()
			}
		}
	}
	if fs := ra.FieldSelector; fs != nil {
		switch {
		case len(fs.Requirements) > 0:
			attrs.FieldSelectorRequirements, attrs.FieldSelectorParsingErr = fieldRequirements(fs.Requirements)
		case fs.RawSelector != "":
			if sel, err := fields.ParseSelector(fs.RawSelector); err != nil {
				attrs.FieldSelectorParsingErr = err
			} else {
				attrs.FieldSelectorRequirements = sel.Requirements()
			}
		}
	}
	return attrs
}

var labelOps = map[metav1.LabelSelectorOperator]selection.Operator{
	metav1.LabelSelectorOpIn: selection.In, metav1.LabelSelectorOpNotIn: selection.NotIn,
	metav1.LabelSelectorOpExists: selection.Exists, metav1.LabelSelectorOpDoesNotExist: selection.DoesNotExist,
}

// labelRequirements keeps the requirements that convert (requirements
// only narrow a request: dropping one is a broader check) and the errors
// of the others.
func labelRequirements(in []metav1.LabelSelectorRequirement) (labels.Requirements, error) {
	var out labels.Requirements
	var errs []error
	for _, r := range in {
		op, ok := labelOps[r.Operator]
		if !ok {
			errs = append(errs, fmt.Errorf("%q is not a valid label selector operator", r.Operator))
			continue
		}
		values := r.Values
		if len(values) == 0 {
			values = nil
		}
		req, err := labels.NewRequirement(r.Key, op, values)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, *req)
	}
	return out, utilerrors.NewAggregate(errs)
}

// fieldRequirements: field selectors take one value, In as =, NotIn as !=.
func fieldRequirements(in []metav1.FieldSelectorRequirement) (fields.Requirements, error) {
	var out fields.Requirements
	var errs []error
	for _, r := range in {
		if len(r.Values) > 1 {
			errs = append(errs, errors.New("fieldSelectors do not yet support multiple values"))
			continue
		}
		var op selection.Operator
		switch r.Operator {
		case metav1.FieldSelectorOpIn:
			op = selection.Equals
		case metav1.FieldSelectorOpNotIn:
			op = selection.NotEquals
		case metav1.FieldSelectorOpExists, metav1.FieldSelectorOpDoesNotExist:
			errs = append(errs, fmt.Errorf("fieldSelectors do not yet support %v", r.Operator))
			continue
		default:
			errs = append(errs, fmt.Errorf("%q is not a valid field selector operator", r.Operator))
			continue
		}
		if len(r.Values) != 1 {
			word := "in"
			if op == selection.NotEquals {
				word = "not in"
			}
			errs = append(errs, fmt.Errorf("fieldSelectors %s must have one value", word))
			continue
		}
		out = append(out, fields.Requirement{Field: r.Key, Operator: op, Value: r.Values[0]})
	}
	return out, utilerrors.NewAggregate(errs)
}

// reviewStatus is the chain's answer for attrs, with the evaluation
// error kube-apiserver reports (the authorizers' and the selectors that
// were ignored).
func (a *Authorizer) reviewStatus(ctx context.Context, attrs authorizer.AttributesRecord) authorizationv1.SubjectAccessReviewStatus {
	decision, reason, err := a.decide(ctx, attrs)
	var evalErrs []string
	if err != nil {
		evalErrs = append(evalErrs, err.Error())
	}
	for _, s := range []struct {
		name string
		n    int
		err  error
	}{{"fieldSelector", len(attrs.FieldSelectorRequirements), attrs.FieldSelectorParsingErr}, {"labelSelector", len(attrs.LabelSelectorRequirements), attrs.LabelSelectorParsingErr}} {
		switch {
		case s.err == nil:
		case s.n > 0:
			evalErrs = append(evalErrs, "spec.resourceAttributes."+s.name+" partially ignored due to parse error")
		default:
			evalErrs = append(evalErrs, "spec.resourceAttributes."+s.name+" ignored due to parse error")
		}
	}
	return authorizationv1.SubjectAccessReviewStatus{
		Allowed:         decision == authorizer.DecisionAllow,
		Denied:          decision == authorizer.DecisionDeny,
		Reason:          reason,
		EvaluationError: strings.Join(evalErrs, "; "),
	}
}

// subjectUser is the user a SubjectAccessReview asks about.
func subjectUser(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	var extra map[string][]string
	if spec.Extra != nil {
		extra = make(map[string][]string, len(spec.Extra))
		for k, v := range spec.Extra {
			extra[k] = []string(v)
		}
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups, Extra: extra}
}

// accessReview answers whether the review's user (with its groups, uid
// and extra) may do what it asks: kube-apiserver's SubjectAccessReview.
func (a *Authorizer) accessReview(r *http.Request, body []byte) (*authorizationv1.SubjectAccessReview, error) {
	var review authorizationv1.SubjectAccessReview
	if err := decodeReview(body, &review); err != nil {
		return nil, err
	}
	spec := review.Spec
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes, field.NewPath("spec"))
	errs = append(errs, validateSubject(spec)...)
	errs = append(errs, validateSelectors(spec.ResourceAttributes)...)
	errs = append(errs, validateEmptyMeta(review.ObjectMeta, false)...)
	if len(errs) > 0 {
		return nil, invalidReview(errs)
	}
	rest.WipeObjectMetaSystemFields(&review.ObjectMeta)
	review.Status = a.reviewStatus(r.Context(), reviewAttributes(subjectUser(spec), spec.ResourceAttributes, spec.NonResourceAttributes))
	return &review, nil
}

// localAccessReview is accessReview in namespace: the review's namespace
// is the request's (set when empty, 400 when another), its resource
// attributes' namespace must be it, and it asks about resources only.
func (a *Authorizer) localAccessReview(r *http.Request, namespace string, body []byte) (*authorizationv1.LocalSubjectAccessReview, error) {
	var review authorizationv1.LocalSubjectAccessReview
	if err := decodeReview(body, &review); err != nil {
		return nil, err
	}
	if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(namespace, &review); err != nil {
		return nil, err
	}
	spec := review.Spec
	errs := validateAttributes(spec.ResourceAttributes, spec.NonResourceAttributes, field.NewPath("spec"))
	errs = append(errs, validateSubject(spec)...)
	errs = append(errs, validateSelectors(spec.ResourceAttributes)...)
	errs = append(errs, validateEmptyMeta(review.ObjectMeta, true)...)
	if spec.ResourceAttributes != nil && spec.ResourceAttributes.Namespace != review.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), spec.ResourceAttributes.Namespace, `must match metadata.namespace`))
	}
	if spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), spec.NonResourceAttributes, `disallowed on this kind of request`))
	}
	if len(errs) > 0 {
		return nil, invalidReview(errs)
	}
	rest.WipeObjectMetaSystemFields(&review.ObjectMeta)
	review.Status = a.reviewStatus(r.Context(), reviewAttributes(subjectUser(spec), spec.ResourceAttributes, spec.NonResourceAttributes))
	return &review, nil
}
