package cr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// object is a decoded custom resource.
type object = listing.Object

// summarize abbreviates a body for an error message as kube-apiserver does.
func summarize(data []byte, max int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > max {
			return string(data[:max]) + " ..."
		}
		return string(data)
	default:
		if len(data) > max {
			return fmt.Sprintf("%x ...", data[:max])
		}
		return fmt.Sprintf("%x", data)
	}
}

// decodeCustomResource decodes a create/update body of r as upstream's
// (v1.33) handlers decode one with the custom resource serializer: raw is
// the body as sent, data the body as JSON (nil when the YAML conversion
// failed with convErr), strict whether the request's field validation
// decodes strictly (Warn, the default, or Strict). The steps and their
// 400s:
//
//   - the YAML conversion, then the JSON serializer's sniffing of the type
//     meta (json.Unmarshal into {apiVersion, kind}, the group/version
//     parsed): "the object provided is unrecognized (must be of type
//     <Kind>): <error> (<body summary>)";
//   - the decode into an unstructured object: a failure names the sniffed
//     kind and version, defaulted from the request's ("<Kind> in version
//     "<v>" cannot be handled as a <Kind>: ..."); an object without a kind
//     is "Object 'Kind' is missing in '<body>'": unrecognized when decoding
//     strictly (the object decoded, its kind was empty), cannot be handled
//     otherwise (unstructured's own UnmarshalJSON refused it);
//   - the schema-coercing decoder: apiVersion must be a string and
//     metadata decode as an ObjectMeta ("... cannot be handled as a ...",
//     with the object's own kind and version);
//   - the handler: the object's group/version must be the request's ("the
//     API version in the data (X) does not match the expected API version
//     (Y)"), whatever versions the CRD serves.
//
// A wrong kind with the right apiVersion is left to checkKind (a 422, as
// upstream's type-meta validation).
func decodeCustomResource(r *resource, b httpx.Body, strict bool) (object, error) {
	raw, data := b.Raw, b.JSON
	unrecognized := func(err error) error {
		return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", r.kind, err, summarize(raw, 30)))
	}
	cannotHandle := func(gvk schema.GroupVersionKind, err error) error {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, r.kind, err))
	}
	if b.ConvErr != nil {
		return nil, unrecognized(b.ConvErr)
	}
	var obj object
	decErr := utiljson.Unmarshal(data, &obj)
	// The sniffing: the one decode tells its result in the common case; the
	// sniffing decode itself runs for anything else (for its errors).
	var tm typeMetaSniff
	if av, kind, ok := plainTypeMeta(obj); decErr == nil && ok {
		tm.APIVersion, tm.Kind = av, kind
	} else if err := json.Unmarshal(data, &tm); err != nil {
		return nil, unrecognized(fmt.Errorf("couldn't get version/kind; json parse error: %v", err))
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, unrecognized(err)
	}
	sniffed := gvkWithDefaults(gv.WithKind(tm.Kind), schema.GroupVersionKind{Group: r.group, Version: r.version, Kind: r.kind})
	if decErr != nil {
		return nil, cannotHandle(sniffed, decErr)
	}
	gvk := unstructuredGVK(obj)
	if gvk.Kind == "" {
		if strict {
			return nil, unrecognized(runtime.NewMissingKindErr(string(raw)))
		}
		return nil, cannotHandle(sniffed, runtime.NewMissingKindErr(string(bytes.Trim(data, " \t\r\n"))))
	}
	if v, ok := obj["apiVersion"]; ok {
		if _, isString := v.(string); !isString {
			return nil, cannotHandle(gvk, fmt.Errorf(".apiVersion accessor error: %v is of the type %T, expected string", v, v))
		}
	}
	if md, ok := obj["metadata"]; ok {
		if err := decodesAsObjectMeta(md); err != nil {
			return nil, cannotHandle(gvk, err)
		}
	}
	if got := gvk.GroupVersion(); got != (schema.GroupVersion{Group: r.group, Version: r.version}) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.String(), r.apiVersion()))
	}
	return obj, nil
}

// decodesStrictly reports whether a write with that fieldValidation is
// decoded by upstream's strict serializer (Warn, the default, and Strict).
func decodesStrictly(fieldValidation string) bool {
	return fieldValidation != metav1.FieldValidationIgnore
}

// typeMetaSniff is what the JSON serializer reads of a body first (its
// SimpleMetaFactory): decoding errors name this type.
type typeMetaSniff = struct {
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
}

// plainTypeMeta returns obj's apiVersion and kind when json.Unmarshal into
// typeMetaSniff would read exactly them: both strings, null or absent, and
// no other top-level key matching them case-insensitively (as
// encoding/json matches fields).
func plainTypeMeta(obj object) (apiVersion, kind string, ok bool) {
	if obj == nil {
		return "", "", false
	}
	for k := range obj {
		if (k != "apiVersion" && strings.EqualFold(k, "apiVersion")) || (k != "kind" && strings.EqualFold(k, "kind")) {
			return "", "", false
		}
	}
	str := func(k string) (string, bool) {
		switch v := obj[k].(type) {
		case nil:
			return "", true
		case string:
			return v, true
		}
		return "", false
	}
	apiVersion, ok1 := str("apiVersion")
	kind, ok2 := str("kind")
	return apiVersion, kind, ok1 && ok2
}

// gvkWithDefaults fills in what a body's type meta leaves out from the
// request's, as the JSON serializer does.
func gvkWithDefaults(actual, defaults schema.GroupVersionKind) schema.GroupVersionKind {
	if actual.Kind == "" {
		actual.Kind = defaults.Kind
	}
	if actual.Version == "" && actual.Group == "" {
		actual.Group, actual.Version = defaults.Group, defaults.Version
	}
	if actual.Version == "" && actual.Group == defaults.Group {
		actual.Version = defaults.Version
	}
	return actual
}

// unstructuredGVK is an unstructured object's GroupVersionKind: its string
// apiVersion and kind, nothing at all when the apiVersion does not parse.
func unstructuredGVK(obj object) schema.GroupVersionKind {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(av)
	if err != nil {
		return schema.GroupVersionKind{}
	}
	return gv.WithKind(kind)
}

// decodesAsObjectMeta is the schema-coercing decoder's round trip of
// metadata through JSON into an ObjectMeta: its error, if any.
func decodesAsObjectMeta(md any) error {
	b, err := utiljson.Marshal(md)
	if err != nil {
		return err
	}
	return utiljson.Unmarshal(b, &metav1.ObjectMeta{})
}

func crdHasVersion(r *resource, v string) bool {
	for _, cv := range r.crd.Spec.Versions {
		if cv.Name == v {
			return true
		}
	}
	return false
}

// checkKind is upstream's type-meta validation of a custom resource: a 422
// that short-circuits every other check. Upstream's NewInvalid names the
// object's own group and kind (its typer reads them from the object), not
// the resource's.
func checkKind(r *resource, obj object, name string) error {
	var errs field.ErrorList
	kind, _ := obj["kind"].(string)
	if kind != r.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+r.kind))
	}
	av, _ := obj["apiVersion"].(string)
	if av != r.apiVersion() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), av, "must be "+r.apiVersion()))
	}
	if len(errs) > 0 {
		gv, _ := schema.ParseGroupVersion(av)
		return apierrors.NewInvalid(schema.GroupKind{Group: gv.Group, Kind: kind}, name, errs)
	}
	return nil
}

// objectMeta reads metadata into its typed form (for upstream's metadata
// validation).
func objectMeta(obj object) (*metav1.ObjectMeta, error) {
	m, _ := obj["metadata"].(map[string]any)
	om := &metav1.ObjectMeta{}
	if m == nil {
		return om, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, om); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid metadata: %v", err))
	}
	return om, nil
}

// validateMetaCreate is the gateway's part of upstream's metadata
// validation of a new custom resource: none. The strategy's (name a DNS
// subdomain, labels, annotations, owner references, finalizers, ...) and
// rest.BeforeCreate's common validation after it are the validator's, as
// v1.33 words them (pkg/objmeta/metavalidation).
func validateMetaCreate(r *resource, obj object) (field.ErrorList, error) {
	return nil, nil
}

// validateMetaUpdate is rest.BeforeUpdate's common-field validation of an
// update (metavalidation.ValidateCommonUpdate). The validator runs it on
// the updates it prepares (AdmitRequest.prepare); the gateway on an apply,
// once the validator merged and admitted it.
func validateMetaUpdate(r *resource, obj, old object) (field.ErrorList, error) {
	return metavalidation.ValidateCommonUpdate(obj, old, r.namespaced), nil
}

// resourceVersion reads metadata.resourceVersion as a revision (0: unset)
// as upstream's storage versioner does (ObjectResourceVersion): one that
// is not a uint64 is strconv's error, which upstream's store returns as it
// is, a plain 500 (`strconv.ParseUint: parsing "abc": invalid syntax`).
func resourceVersion(obj object) (int64, error) {
	s := objmeta.String(obj, "resourceVersion")
	if s == "" {
		return 0, nil
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, listing.PlainError(err)
	}
	return int64(rv), nil
}

// deepCopyObject copies a decoded object.
func deepCopyObject(obj object) object {
	return runtime.DeepCopyJSON(obj)
}

func bytesContains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

// checkNameAndNamespace is upstream's check of an update's object (a PUT
// body, a patch result) against the URL: the namespace first (an empty
// one takes the request's), then the name, which the object must carry:
// none is "the name of the object (<name> based on URL) was
// undeterminable: name must be provided" (upstream's checkName; the name
// is not taken from the URL).
func checkNameAndNamespace(obj object, ns, name string, namespaced bool) error {
	if err := objmeta.CheckNameAndNamespace(obj, ns, "", namespaced); err != nil {
		return err
	}
	switch objName := objmeta.String(obj, "name"); objName {
	case "":
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s based on URL) was undeterminable: name must be provided", name))
	case name:
		return nil
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", objName, name))
	}
}

// decodeDeleteOptions decodes a DELETE body into opts as upstream's delete
// handlers do (the meta internal version codecs' JSON serializer, meta.k8s.io/v1
// DeleteOptions by default). Its failures are plain errors, which upstream
// answers as 500s with the decoder's message: the type-meta sniffing's,
// a kind its scheme does not know (`no kind "Crate" is registered for
// version "example.com/v1" in scheme "pkg/runtime/scheme.go:110"`; any
// apiVersion is fine for DeleteOptions, which is registered unversioned),
// then the case-sensitive decode's.
func decodeDeleteOptions(body []byte, opts *metav1.DeleteOptions) error {
	var tm typeMetaSniff
	if err := json.Unmarshal(body, &tm); err != nil {
		return listing.PlainError(fmt.Errorf("couldn't get version/kind; json parse error: %v", err))
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return listing.PlainError(err)
	}
	gvk := gvkWithDefaults(gv.WithKind(tm.Kind), metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	if gvk.Kind != "DeleteOptions" {
		return listing.PlainError(fmt.Errorf("no kind %q is registered for version %q in scheme %q", gvk.Kind, gvk.GroupVersion().String(), "pkg/runtime/scheme.go:110"))
	}
	if err := utiljson.Unmarshal(body, opts); err != nil {
		return listing.PlainError(err)
	}
	return nil
}
