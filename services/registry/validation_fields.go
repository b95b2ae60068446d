package registry

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fieldpath"
)

func semanticEqual(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }

func isPrintable(r rune) bool { return unicode.IsPrint(r) }
func isControl(r rune) bool   { return unicode.IsControl(r) }
func validUTF8(s string) bool { return utf8.ValidString(s) }

// validateNames validates spec.names or status.acceptedNames.
func validateNames(n *apiextensions.CustomResourceDefinitionNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if msgs := utilvalidation.IsDNS1035Label(n.Plural); n.Plural != "" && len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("plural"), n.Plural, strings.Join(msgs, ",")))
	}
	if msgs := utilvalidation.IsDNS1035Label(n.Singular); n.Singular != "" && len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("singular"), n.Singular, strings.Join(msgs, ",")))
	}
	if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(n.Kind)); n.Kind != "" && len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("kind"), n.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(n.ListKind)); n.ListKind != "" && len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("listKind"), n.ListKind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	for i, s := range n.ShortNames {
		if msgs := utilvalidation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("shortNames").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	if n.Kind != "" && n.Kind == n.ListKind {
		errs = append(errs, field.Invalid(p.Child("listKind"), n.ListKind, "kind and listKind may not be the same"))
	}
	for i, c := range n.Categories {
		if msgs := utilvalidation.IsDNS1035Label(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("categories").Index(i), c, strings.Join(msgs, ",")))
		}
	}
	return errs
}

var (
	columnTypes   = []string{"boolean", "date", "integer", "number", "string"}
	columnFormats = []string{"byte", "date", "date-time", "double", "float", "int32", "int64", "password"}
)

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateColumn validates one additionalPrinterColumns entry.
func validateColumn(c *apiextensions.CustomResourceColumnDefinition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	typesMsg := "must be one of " + strings.Join(columnTypes, ",")
	switch {
	case c.Type == "":
		errs = append(errs, field.Required(p.Child("type"), typesMsg))
	case !contains(columnTypes, c.Type):
		errs = append(errs, field.Invalid(p.Child("type"), c.Type, typesMsg))
	}
	if c.Format != "" && !contains(columnFormats, c.Format) {
		errs = append(errs, field.Invalid(p.Child("format"), c.Format, "must be one of "+strings.Join(columnFormats, ",")))
	}
	if c.JSONPath == "" {
		errs = append(errs, field.Required(p.Child("JSONPath"), ""))
	} else {
		errs = append(errs, validateSimpleJSONPath(c.JSONPath, p.Child("JSONPath"))...)
	}
	return errs
}

func validateSimpleJSONPath(s string, p *field.Path) field.ErrorList {
	switch {
	case s == "":
		return field.ErrorList{field.Invalid(p, s, "must not be empty")}
	case s[0] != '.':
		return field.ErrorList{field.Invalid(p, s, "must be a simple json path starting with .")}
	}
	return nil
}

// validateSubresources validates the status and scale subresources.
func validateSubresources(s *apiextensions.CustomResourceSubresources, p *field.Path) field.ErrorList {
	if s == nil || s.Scale == nil {
		return nil
	}
	var errs field.ErrorList
	sc := s.Scale
	check := func(path string, child string, prefixes []string, msg string) {
		cp := p.Child(child)
		if errs2 := validateSimpleJSONPath(path, cp); len(errs2) > 0 {
			errs = append(errs, errs2...)
			return
		}
		for _, pre := range prefixes {
			if strings.HasPrefix(path, pre) {
				return
			}
		}
		errs = append(errs, field.Invalid(cp, path, msg))
	}
	if sc.SpecReplicasPath == "" {
		errs = append(errs, field.Required(p.Child("scale.specReplicasPath"), ""))
	} else {
		check(sc.SpecReplicasPath, "scale.specReplicasPath", []string{".spec."}, "should be a json path under .spec")
	}
	if sc.StatusReplicasPath == "" {
		errs = append(errs, field.Required(p.Child("scale.statusReplicasPath"), ""))
	} else {
		check(sc.StatusReplicasPath, "scale.statusReplicasPath", []string{".status."}, "should be a json path under .status")
	}
	if sc.LabelSelectorPath != nil && *sc.LabelSelectorPath != "" {
		lp := *sc.LabelSelectorPath
		cp := p.Child("scale.labelSelectorPath")
		if errs2 := validateSimpleJSONPath(lp, cp); len(errs2) > 0 {
			errs = append(errs, errs2...)
		} else if !strings.HasPrefix(lp, ".spec.") && !strings.HasPrefix(lp, ".status.") {
			// upstream reports the pointer's target as the value
			errs = append(errs, field.Invalid(cp, sc.LabelSelectorPath, "should be a json path under either .spec or .status"))
		}
	}
	return errs
}

// acceptedReviewVersions are the ConversionReview versions a server of the
// previous release understands.
var acceptedReviewVersions = []string{"v1", "v1beta1"}

func hasAcceptedReviewVersionOrNone(versions []string) bool {
	if len(versions) == 0 {
		return true
	}
	for _, v := range versions {
		if contains(acceptedReviewVersions, v) {
			return true
		}
	}
	return false
}

func validateReviewVersions(versions []string, requireRecognized bool, p *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	accepted := false
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, msg))
		}
		if contains(acceptedReviewVersions, v) {
			accepted = true
		}
	}
	if requireRecognized && !accepted {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of "+strings.Join(acceptedReviewVersions, ", ")))
	}
	return errs
}

// validateConversion validates spec.conversion.
func validateConversion(c *apiextensions.CustomResourceConversion, requireRecognized bool, p *field.Path, opts validationOptions) field.ErrorList {
	if c == nil {
		return nil
	}
	errs := validateEnum(p.Child("strategy"), string(c.Strategy), []string{string(apiextensions.NoneConverter), string(apiextensions.WebhookConverter)}, true)
	if c.Strategy != apiextensions.WebhookConverter {
		if c.WebhookClientConfig != nil {
			errs = append(errs, field.Forbidden(p.Child("webhookClientConfig"), "should not be set when strategy is not set to Webhook"))
		}
		if len(c.ConversionReviewVersions) > 0 {
			errs = append(errs, field.Forbidden(p.Child("conversionReviewVersions"), "should not be set when strategy is not set to Webhook"))
		}
		return errs
	}
	cp := p.Child("webhookClientConfig")
	if cc := c.WebhookClientConfig; cc == nil {
		errs = append(errs, field.Required(cp, "required when strategy is set to Webhook"))
	} else {
		switch {
		case (cc.URL == nil) == (cc.Service == nil):
			errs = append(errs, field.Required(cp, "exactly one of url or service is required"))
		case cc.URL != nil:
			errs = append(errs, validateWebhookURL(cp.Child("url"), *cc.URL)...)
		default:
			errs = append(errs, validateWebhookService(cp.Child("service"), cc.Service)...)
		}
		if len(cc.CABundle) > 0 && !opts.allowInvalidCABundle {
			if err := checkCABundle(cc.CABundle); err != nil {
				errs = append(errs, field.Invalid(cp.Child("caBundle"), cc.CABundle, err.Error()))
			}
		}
	}
	return append(errs, validateReviewVersions(c.ConversionReviewVersions, requireRecognized, p.Child("conversionReviewVersions"))...)
}

func validateWebhookURL(p *field.Path, raw string) field.ErrorList {
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Required(p, "url must be a valid URL: "+err.Error()+form)}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"+form))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"+form))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateWebhookService validates a conversion webhook's service. As
// upstream (which hands name and namespace to its helper the other way
// round), an empty name is reported as namespace and vice versa, in v1.33's
// words (later versions drop the details).
func validateWebhookService(p *field.Path, s *apiextensions.ServiceReference) field.ErrorList {
	var errs field.ErrorList
	if s.Namespace == "" {
		errs = append(errs, field.Required(p.Child("name"), "service name is required"))
	}
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("namespace"), "service namespace is required"))
	}
	if msgs := utilvalidation.IsValidPortNum(int(s.Port)); msgs != nil {
		errs = append(errs, field.Invalid(p.Child("port"), s.Port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Path == nil {
		return errs
	}
	path := *s.Path
	if path == "/" || path == "" {
		return errs
	}
	if path == "//" {
		return append(errs, field.Invalid(p.Child("path"), path, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(path, "/") {
		errs = append(errs, field.Invalid(p.Child("path"), path, "must start with a '/'"))
	}
	trimmed := strings.TrimSuffix(path[1:], "/")
	for i, seg := range strings.Split(trimmed, "/") {
		if seg == "" {
			errs = append(errs, field.Invalid(p.Child("path"), path, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(seg) {
			errs = append(errs, field.Invalid(p.Child("path"), path, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}

// checkCABundle reports why a PEM CA bundle cannot be used, worded as
// client-go's transport does.
func checkCABundle(data []byte) error {
	if x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil
	}
	rest := data
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return errors.New("unable to load root certificates: unable to parse bytes as PEM block")
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("unable to load root certificates: failed to parse certificate: %w", err)
		}
	}
	return errors.New("unable to load root certificates: no valid certificate authority data seen")
}

// allowInvalidCABundle: an invalid CA bundle may stay while the CRD was never
// established, or when the stored one is already invalid.
func allowInvalidCABundle(old *apiextensions.CustomResourceDefinition) bool {
	if !internalConditionTrue(old, apiextensions.Established) {
		return true
	}
	c := old.Spec.Conversion
	if c == nil || c.WebhookClientConfig == nil || len(c.WebhookClientConfig.CABundle) == 0 {
		return false
	}
	return checkCABundle(c.WebhookClientConfig.CABundle) != nil
}

// tooManySelectableFieldsAllowed lists the versions ("" for the top level)
// whose selectable fields were already above the limit and did not change.
func tooManySelectableFieldsAllowed(crd, old *apiextensions.CustomResourceDefinition) map[string]bool {
	out := map[string]bool{}
	if len(old.Spec.SelectableFields) > maxSelectableFields && semanticEqual(crd.Spec.SelectableFields, old.Spec.SelectableFields) {
		out[""] = true
	}
	oldByName := map[string]*apiextensions.CustomResourceDefinitionVersion{}
	for i := range old.Spec.Versions {
		oldByName[old.Spec.Versions[i].Name] = &old.Spec.Versions[i]
	}
	for _, v := range crd.Spec.Versions {
		if o, ok := oldByName[v.Name]; ok && len(o.SelectableFields) > maxSelectableFields && semanticEqual(v.SelectableFields, o.SelectableFields) {
			out[v.Name] = true
		}
	}
	return out
}

// validateSelectableFields validates selectableFields against the schema
// they point into.
func validateSelectableFields(fields []apiextensions.SelectableField, schema *apiextensions.JSONSchemaProps, p *field.Path, opts validationOptions, version string) field.ErrorList {
	var errs field.ErrorList
	unique := map[string]bool{}
	for i, sf := range fields {
		ip := p.Index(i).Child("jsonPath")
		if sf.JSONPath == "" {
			errs = append(errs, field.Required(ip, ""))
			continue
		}
		path, target, err := resolveFieldPath(sf.JSONPath, schema, false)
		if err != nil {
			errs = append(errs, field.Invalid(ip, sf.JSONPath, fmt.Sprintf("is an invalid path: %v", err)))
			continue
		}
		if path.Root().String() == "metadata" {
			errs = append(errs, field.Invalid(ip, sf.JSONPath, "must not point to fields in metadata"))
		}
		if target == nil || (target.Type != "string" && target.Type != "boolean" && target.Type != "integer") {
			errs = append(errs, field.Invalid(ip, sf.JSONPath, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."))
		}
		if unique[path.String()] {
			errs = append(errs, field.Duplicate(ip, sf.JSONPath))
		} else {
			unique[path.String()] = true
		}
	}
	if len(unique) > maxSelectableFields && !opts.allowTooManySelectableFields[version] {
		errs = append(errs, field.TooMany(p, len(unique), maxSelectableFields))
	}
	return errs
}

// resolveFieldPath follows a JSON path (".a.b" or, with arrays, ".a['b']")
// through a schema's properties and additionalProperties.
func resolveFieldPath(jsonPath string, s *apiextensions.JSONSchemaProps, allowArrays bool) (*field.Path, *apiextensions.JSONSchemaProps, error) {
	var path *field.Path
	err := fieldpath.Walk(jsonPath, allowArrays, func(name string) error {
		switch {
		case s == nil:
			return errors.New("does not refer to a valid field")
		case len(s.Properties) > 0:
			child, ok := s.Properties[name]
			if !ok {
				return errors.New("does not refer to a valid field")
			}
			path = path.Child(name)
			s = &child
		case s.AdditionalProperties != nil:
			path = path.Key(name)
			s = s.AdditionalProperties.Schema
		default:
			return errors.New("does not refer to a valid field")
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return path, s, nil
}

// validateAPIApproval requires the api-approved.kubernetes.io annotation for
// the protected (*.k8s.io, *.kubernetes.io) groups, unless an update leaves
// the approval state as it was.
func validateAPIApproval(crd, old *apiextensions.CustomResourceDefinition) field.ErrorList {
	if !protectedGroup(crd.Spec.Group) {
		return nil
	}
	state, reason := approvalState(crd.Annotations)
	if old != nil {
		if oldState, _ := approvalState(old.Annotations); oldState == state {
			return nil
		}
	}
	p := field.NewPath("metadata", "annotations").Key(approvalAnnotation)
	switch state {
	case approvalApproved, approvalBypassed:
		return nil
	case approvalMissing:
		return field.ErrorList{field.Required(p, reason)}
	default:
		return field.ErrorList{field.Invalid(p, crd.Annotations[approvalAnnotation], reason)}
	}
}

func validatePreserveUnknownFields(crd, old *apiextensions.CustomResourceDefinition) field.ErrorList {
	if old != nil && preservesUnknownFields(&old.Spec) {
		return nil // compatibility with stored data
	}
	if preservesUnknownFields(&crd.Spec) {
		return field.ErrorList{field.Invalid(field.NewPath("spec").Child("preserveUnknownFields"), crd.Spec.PreserveUnknownFields, "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead")}
	}
	return nil
}

// sortedKeys returns a map's keys in order (upstream iterates maps in random
// order; sorted output keeps our messages stable).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
