package gateway

import (
	"fmt"
	"net/url"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
)

// listParams are the query parameters of a list or watch.
type listParams struct {
	labelSelector        string
	fieldSelector        string
	limit                int64
	continueToken        string
	resourceVersion      string
	resourceVersionMatch string
	timeoutSeconds       int64
	allowWatchBookmarks  bool
	sendInitialEvents    *bool
	watch                bool
}

// parseListOptions decodes and validates list/watch parameters exactly as
// kube-apiserver does (its parameter codec and validation; 400 for a
// selector that does not parse, 422 ListOptions for invalid combinations).
func parseListOptions(p listParams) (*metainternalversion.ListOptions, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("labelSelector", p.labelSelector)
	set("fieldSelector", p.fieldSelector)
	set("continue", p.continueToken)
	set("resourceVersion", p.resourceVersion)
	set("resourceVersionMatch", p.resourceVersionMatch)
	if p.limit != 0 {
		q.Set("limit", strconv.FormatInt(p.limit, 10))
	}
	if p.timeoutSeconds != 0 {
		q.Set("timeoutSeconds", strconv.FormatInt(p.timeoutSeconds, 10))
	}
	if p.allowWatchBookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	if p.sendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*p.sendInitialEvents))
	}
	if p.watch {
		q.Set("watch", "true")
	}
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if errs := metainternalversionvalidation.ValidateListOptions(opts, true); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	return opts, nil
}

// checkFieldSelector rejects field selectors on fields the resource cannot
// select by, with kube-apiserver's 400 "field label not supported: <f>".
func checkFieldSelector(sel fields.Selector, allowed func(string) bool) error {
	if sel == nil {
		return nil
	}
	for _, req := range sel.Requirements() {
		if !allowed(req.Field) {
			return apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return nil
}

// fieldAllowed reports whether a custom resource of r can be selected by f.
func (r *resource) fieldAllowed(f string) bool {
	switch f {
	case "metadata.name":
		return true
	case "metadata.namespace":
		return r.namespaced
	}
	for _, s := range r.selectableFields {
		if s == f {
			return true
		}
	}
	return false
}

// parseRV parses a resourceVersion parameter ("" and "0" are 0). An
// unparsable one is the 422 kube-apiserver's storage answers.
func parseRV(gk schema.GroupKind, rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), rv, err.Error())})
	}
	return int64(n), nil
}

// storageListOptions maps validated list options to the backends' form,
// with kube-apiserver's resourceVersion semantics: a revision is read
// exactly when the client asks for that (resourceVersionMatch=Exact, or a
// paginated read at a revision, the legacy semantics); otherwise the
// newest state serves, and minRV is the revision it must not be older
// than ("Not older than"; a revision not reached yet is 504).
func storageListOptions(opts *metainternalversion.ListOptions, gk schema.GroupKind, selectable []string) (_ *commonv1.ListOptions, minRV int64, _ error) {
	rv, err := parseRV(gk, opts.ResourceVersion)
	if err != nil {
		return nil, 0, err
	}
	if opts.Continue != "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return nil, 0, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
		(opts.ResourceVersionMatch == "" && opts.Limit > 0 && rv > 0)
	out := &commonv1.ListOptions{
		SelectableFields: selectable,
		Limit:            opts.Limit,
		ContinueToken:    opts.Continue,
	}
	if exact {
		out.ResourceVersion = rv
	} else {
		minRV = rv
	}
	if opts.LabelSelector != nil && !opts.LabelSelector.Empty() {
		out.LabelSelector = opts.LabelSelector.String()
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		out.FieldSelector = opts.FieldSelector.String()
	}
	return out, minRV, nil
}
