package gateway

import (
	"errors"
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

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
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
	// name is the object a single-object watch path names.
	name string
}

// watchListEnabled is upstream v1.33's WatchList feature gate: off by
// default (it went back to false in 1.33), so a watch with
// sendInitialEvents, true or false, is a 422 ("sendInitialEvents is
// forbidden for watch unless the WatchList feature gate is enabled") and
// no defaults are set.
const watchListEnabled = false

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
		// A selector's errors worded as v1.33's ("a qualified name must
		// consist of ...", "must be no more than 63 characters").
		return nil, apierrors.NewBadRequest(metavalidation.V133Wording(err.Error()))
	}
	if errs := metainternalversionvalidation.ValidateListOptions(opts, watchListEnabled); len(errs) > 0 {
		return nil, fielderr.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
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

// selectName is upstream's handling of a request naming one object (a
// single-object watch path): the field selector becomes
// metadata.name=<name>; one already set must require exactly that name
// (400 otherwise). It runs after the field labels are checked.
func selectName(opts *metainternalversion.ListOptions, name string) error {
	if name == "" {
		return nil
	}
	if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
		selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name")
		if !ok || selected != name {
			return apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
		}
		return nil
	}
	opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
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

// parseResourceVersion parses a resourceVersion parameter as upstream's
// storage versioner does ("" and "0" are 0); an unparsable one is its
// error, not a Status (storage.InvalidError: `resourceVersion: Invalid
// value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`).
func parseResourceVersion(rv string) (int64, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, errors.New(field.Invalid(field.NewPath("resourceVersion"), rv, err.Error()).Error())
	}
	return int64(n), nil
}

// parseRV parses the resourceVersion parameter of a get or a watch.
// Upstream's watch cache returns the versioner's error as it is, which its
// handlers answer as a plain 500 (no reason) carrying its text.
func parseRV(rv string) (int64, error) {
	n, err := parseResourceVersion(rv)
	if err != nil {
		return 0, plainError(err)
	}
	return n, nil
}

// storageListOptions maps validated list options to the backends' form,
// with kube-apiserver's resourceVersion semantics: a revision is read
// exactly when the client asks for that (resourceVersionMatch=Exact, or a
// paginated read at a revision, the legacy semantics); otherwise the
// newest state serves, and minRV is the revision it must not be older
// than ("Not older than"; a revision not reached yet is 504).
func storageListOptions(opts *metainternalversion.ListOptions, selectable []string) (_ *commonv1.ListOptions, minRV int64, _ error) {
	if opts.Continue != "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return nil, 0, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	var rv int64
	if opts.Continue == "" {
		var err error
		if rv, err = parseResourceVersion(opts.ResourceVersion); err != nil {
			// Upstream's storage.ValidateListOptions.
			return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
		}
	}
	exact := opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
		(opts.ResourceVersionMatch == "" && opts.Limit > 0 && rv > 0)
	out := &commonv1.ListOptions{
		SelectableFields: selectable,
		Limit:            opts.Limit,
		ContinueToken:    opts.Continue,
	}
	if opts.ResourceVersion == "0" && opts.Continue == "" {
		// Upstream serves resourceVersion=0 from its watch cache, which
		// ignores the limit (computeListLimit): the whole list, no continue.
		out.Limit = 0
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
