package listing

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

// Params are the query parameters of a list or watch.
type Params struct {
	LabelSelector        string
	FieldSelector        string
	Limit                int64
	ContinueToken        string
	ResourceVersion      string
	ResourceVersionMatch string
	TimeoutSeconds       int64
	AllowWatchBookmarks  bool
	SendInitialEvents    *bool
	Watch                bool
	// Name is the object a single-object watch path names.
	Name string
}

// watchListEnabled is upstream v1.33's WatchList feature gate: off by
// default (it went back to false in 1.33), so a watch with
// sendInitialEvents, true or false, is a 422 ("sendInitialEvents is
// forbidden for watch unless the WatchList feature gate is enabled") and
// no defaults are set.
const watchListEnabled = false

// ParseOptions decodes and validates list/watch parameters exactly as
// kube-apiserver does (its parameter codec and validation; 400 for a
// selector that does not parse, 422 ListOptions for invalid combinations).
func ParseOptions(p Params) (*metainternalversion.ListOptions, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("labelSelector", p.LabelSelector)
	set("fieldSelector", p.FieldSelector)
	set("continue", p.ContinueToken)
	set("resourceVersion", p.ResourceVersion)
	set("resourceVersionMatch", p.ResourceVersionMatch)
	if p.Limit != 0 {
		q.Set("limit", strconv.FormatInt(p.Limit, 10))
	}
	if p.TimeoutSeconds != 0 {
		q.Set("timeoutSeconds", strconv.FormatInt(p.TimeoutSeconds, 10))
	}
	if p.AllowWatchBookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	if p.SendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*p.SendInitialEvents))
	}
	if p.Watch {
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

// CheckFieldSelector rejects field selectors on fields the resource cannot
// select by, with kube-apiserver's 400 "field label not supported: <f>".
func CheckFieldSelector(sel fields.Selector, allowed func(string) bool) error {
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

// SelectName is upstream's handling of a request naming one object (a
// single-object watch path): the field selector becomes
// metadata.name=<name>; one already set must require exactly that name
// (400 otherwise). It runs after the field labels are checked.
func SelectName(opts *metainternalversion.ListOptions, name string) error {
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

// ParseRV parses the resourceVersion parameter of a get or a watch.
// Upstream's watch cache returns the versioner's error as it is, which its
// handlers answer as a plain 500 (no reason) carrying its text.
func ParseRV(rv string) (int64, error) {
	n, err := parseResourceVersion(rv)
	if err != nil {
		return 0, PlainError(err)
	}
	return n, nil
}

// StorageOptions maps validated list options to the backends' form,
// with kube-apiserver's resourceVersion semantics: a revision is read
// exactly when the client asks for that (resourceVersionMatch=Exact, or a
// paginated read at a revision, the legacy semantics); otherwise the
// newest state serves, and minRV is the revision it must not be older
// than ("Not older than"; a revision not reached yet is 504).
func StorageOptions(opts *metainternalversion.ListOptions, selectable []string) (_ *commonv1.ListOptions, minRV int64, _ error) {
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
