package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utiljson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/jsonscan"
)

// reviewGroup is the API group of ConversionReview.
const reviewGroup = "apiextensions.k8s.io"

// reviewResponse is the part of a ConversionReview (v1 or v1beta1: the
// same shape) read back from a webhook.
type reviewResponse struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   *struct {
		UID              types.UID         `json:"uid"`
		ConvertedObjects []json.RawMessage `json:"convertedObjects"`
		Result           metav1.Status     `json:"result"`
	} `json:"response"`
}

// failedError is a webhook's answer that the conversion failed
// (result.status other than Success): it may concern only some of the
// objects sent, so a coalesced review that fails this way is retried per
// request.
type failedError struct{ msg string }

func (e *failedError) Error() string { return e.msg }

// encodeReview renders a ConversionReview request of version review
// ("v1" or "v1beta1") around the objects (JSON, trusted as such).
func encodeReview(review string, uid types.UID, desiredAPIVersion string, objs [][]byte) []byte {
	size := 160 + len(desiredAPIVersion)
	for _, o := range objs {
		size += len(o) + 1
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"kind":"ConversionReview","apiVersion":"` + reviewGroup + "/" + review + `","request":{"uid":`)
	writeJSONString(&b, string(uid))
	b.WriteString(`,"desiredAPIVersion":`)
	writeJSONString(&b, desiredAPIVersion)
	b.WriteString(`,"objects":[`)
	for i, o := range objs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(o)
	}
	b.WriteString("]}}")
	return b.Bytes()
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

// review sends one ConversionReview for objs (all at fromAPIVersion) and
// returns the converted objects as the webhook sent them (in order, as
// many as sent; not yet checked one by one). Errors carry upstream's
// wording, "conversion webhook for <gvk> failed: ...".
func (t *target) review(ctx context.Context, fromAPIVersion, desiredAPIVersion string, objs [][]byte) ([][]byte, error) {
	gvk := t.gvk(fromAPIVersion)
	if t.err != nil {
		return nil, fmt.Errorf("conversion webhook for %s failed: %v", gvk, t.err)
	}
	if t.reviewVersion == "" {
		return nil, errors.New("no supported conversion review versions")
	}
	uid := uuid.NewUUID()
	ans, err := t.post(ctx, encodeReview(t.reviewVersion, uid, desiredAPIVersion, objs))
	if err != nil {
		return nil, fmt.Errorf("conversion webhook for %s failed: %v", gvk, err)
	}
	converted, err := readResponse(t.reviewVersion, uid, ans)
	if err != nil {
		var f *failedError
		if errors.As(err, &f) {
			return nil, &failedError{msg: fmt.Sprintf("conversion webhook for %s failed: %s", gvk, f.msg)}
		}
		return nil, fmt.Errorf("conversion webhook for %s failed: %v", gvk, err)
	}
	if len(converted) != len(objs) {
		return nil, fmt.Errorf("conversion webhook for %s returned %d objects, expected %d", gvk, len(converted), len(objs))
	}
	out := make([][]byte, len(converted))
	for i, c := range converted {
		out[i] = c
	}
	return out, nil
}

// readResponse checks a webhook's ConversionReview as upstream does (for
// v1: its kind and group/version, and the uid; for v1beta1, which upstream
// never checked, neither) and returns the converted objects. A body that
// does not decode is worded as upstream's REST client and JSON serializer
// word it.
func readResponse(review string, uid types.UID, ans *answer) ([]json.RawMessage, error) {
	data := ans.body
	if len(data) == 0 {
		return nil, fmt.Errorf("0-length response with status code: %d and content type: %s", ans.code, ans.contentType)
	}
	// The client's decoder takes a body that does not start with '{' for
	// YAML, and reads it as the JSON it converts to.
	if !looksLikeJSON(data) {
		var err error
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, err
		}
	}
	// The serializer reads apiVersion and kind first, with encoding/json
	// (which checks the whole document's syntax).
	var head struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("couldn't get version/kind; json parse error: %v", err)
	}
	// A review of the other version than sent: the client's decoder cannot
	// convert it into the one it expects.
	if other := map[string]string{"v1": "v1beta1", "v1beta1": "v1"}[review]; head.Kind == "ConversionReview" && head.APIVersion == reviewGroup+"/"+other {
		return nil, fmt.Errorf("converting (%s.ConversionReview) to (%s.ConversionReview): unknown conversion", other, review)
	}
	if head.APIVersion != "" && head.Kind != "" && !registeredKind(head.APIVersion, head.Kind) {
		// The client's scheme (the apiextensions.k8s.io types) does not
		// know it; upstream's scheme is named after its source line.
		return nil, fmt.Errorf("no kind %q is registered for version %q in scheme %q", head.Kind, head.APIVersion, "pkg/runtime/scheme.go:110")
	}
	var r reviewResponse
	if err := utiljson.UnmarshalCaseSensitivePreserveInts(data, &r); err != nil {
		return nil, err
	}
	if review == "v1" {
		want := schema.GroupVersionKind{Group: reviewGroup, Version: "v1", Kind: "ConversionReview"}
		got := schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
		if got != want {
			return nil, fmt.Errorf("expected webhook response of %v, got %v", want, got)
		}
	}
	if r.Response == nil {
		return nil, errors.New("no response provided")
	}
	if review == "v1" && r.Response.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, r.Response.UID)
	}
	if res := r.Response.Result; res.Status != metav1.StatusSuccess {
		if res.Message != "" {
			return nil, &failedError{msg: res.Message}
		}
		return nil, &failedError{msg: fmt.Sprintf("response.result.status was '%s', not 'Success'", res.Status)}
	}
	return r.Response.ConvertedObjects, nil
}

// finish checks one converted object against the original as upstream does
// and restores its metadata: everything from the original except labels
// and annotations, which the webhook may change (and which must then
// validate). index is the object's position in the caller's request; single
// selects upstream's wording for a one-object conversion.
func (t *target) finish(original, converted []byte, fromAPIVersion, desiredAPIVersion string, index int, single bool) ([]byte, error) {
	gvk := func() string { return t.gvk(fromAPIVersion) }
	// Upstream words the type checks of a single object "at index 0".
	invalidType := func(err error) error {
		if single {
			return fmt.Errorf("conversion webhook for %s returned invalid object at index 0: %v", gvk(), err)
		}
		return fmt.Errorf("conversion webhook for %s returned invalid converted object at index %v: %v", gvk(), index, err)
	}
	invalid := func(err error) error {
		if single {
			return fmt.Errorf("conversion webhook for %s returned invalid object: %v", gvk(), err)
		}
		return fmt.Errorf("conversion webhook for %s returned invalid converted object at index %v: %v", gvk(), index, err)
	}
	invalidMeta := func(err error) error {
		if single {
			return fmt.Errorf("conversion webhook for %s returned invalid metadata: %v", gvk(), err)
		}
		return fmt.Errorf("conversion webhook for %s returned invalid metadata in object at index %v: %v", gvk(), index, err)
	}

	if bytes.IndexByte(converted, '\n') >= 0 {
		// Indented: compact, as objects travel on (watch frames, lists).
		var b bytes.Buffer
		if err := json.Compact(&b, converted); err != nil {
			return nil, invalidType(err)
		}
		converted = b.Bytes()
	}
	var orig, conv [3]jsonscan.Member // apiVersion, kind, metadata
	if err := scanMembers(original, headKeys, orig[:]); err != nil {
		return nil, fmt.Errorf("conversion of object at index %d: %v", index, err)
	}
	if err := scanMembers(converted, headKeys, conv[:]); err != nil {
		return nil, invalidType(err)
	}
	if got := stringValue(conv[0].Value(converted)); got != desiredAPIVersion {
		want, _ := schema.ParseGroupVersion(desiredAPIVersion)
		return nil, invalidType(fmt.Errorf("invalid groupVersion (expected %v, received %v)", want, got))
	}
	if o, c := orig[1].Value(original), conv[1].Value(converted); !bytes.Equal(o, c) && stringValue(o) != stringValue(c) {
		return nil, invalidType(fmt.Errorf("invalid kind (expected %v, received %v)", stringValue(o), stringValue(c)))
	}
	origMetaRaw, convMetaRaw := orig[2].Value(original), conv[2].Value(converted)
	if len(origMetaRaw) > 0 && bytes.Equal(origMetaRaw, convMetaRaw) {
		return converted, nil // metadata came back byte for byte
	}

	var om, cm [5]jsonscan.Member // name, namespace, uid, labels, annotations
	if len(origMetaRaw) > 0 && origMetaRaw[0] == '{' {
		if err := scanMembers(origMetaRaw, metaKeys, om[:]); err != nil {
			return nil, fmt.Errorf("conversion of object at index %d: invalid metadata: %v", index, err)
		}
	}
	convIsObject := len(convMetaRaw) > 0 && convMetaRaw[0] == '{'
	if convIsObject {
		if err := scanMembers(convMetaRaw, metaKeys, cm[:]); err != nil {
			return nil, invalidMeta(err)
		}
	}
	for k, label := range []string{"name", "namespace", "UID"} {
		if e, a := stringValue(om[k].Value(origMetaRaw)), stringValue(cm[k].Value(convMetaRaw)); e != a {
			return nil, invalid(fmt.Errorf("must have the same %s: %v != %v", label, e, a))
		}
	}
	if !convIsObject {
		if len(convMetaRaw) == 0 || string(convMetaRaw) == "null" {
			return nil, invalidMeta(errors.New("missing metadata in converted object"))
		}
		var v any
		_ = utiljson.UnmarshalCaseSensitivePreserveInts(convMetaRaw, &v)
		return nil, invalidMeta(fmt.Errorf("invalid metadata of type %T in converted object", v))
	}

	// The original metadata, with the webhook's labels and annotations.
	meta := origMetaRaw
	if len(meta) == 0 {
		meta = []byte("{}")
	}
	changed := map[string]json.RawMessage{}
	for k, name := range []string{"labels", "annotations"} {
		o, c := om[3+k].Value(origMetaRaw), cm[3+k].Value(convMetaRaw)
		if bytes.Equal(o, c) {
			continue
		}
		raw, diff, err := checkStringMap(name, o, c)
		if err != nil {
			return nil, invalidMeta(err)
		}
		if diff {
			changed[name] = raw
		}
	}
	if len(changed) > 0 {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(meta, &all); err != nil {
			return nil, fmt.Errorf("conversion of object at index %d: invalid metadata: %v", index, err)
		}
		for k, v := range changed {
			if v == nil {
				delete(all, k)
			} else {
				all[k] = v
			}
		}
		var err error
		if meta, err = json.Marshal(all); err != nil {
			return nil, invalidMeta(err)
		}
	}
	return jsonscan.ApplyEdits(converted, jsonscan.Edit{Start: conv[2].ValStart, End: conv[2].ValEnd, Repl: meta}), nil
}

// checkStringMap checks a webhook's labels or annotations (conv) against
// the original's (orig), as upstream does: a map of strings, validated when
// changed. It returns the map to keep (nil: none) and whether it differs
// from the original.
func checkStringMap(name string, orig, conv json.RawMessage) (json.RawMessage, bool, error) {
	// Decoded as upstream's decoder does: integers as int64, so that the
	// type named in messages is upstream's.
	var c, o any
	if len(conv) > 0 {
		if err := utiljson.UnmarshalCaseSensitivePreserveInts(conv, &c); err != nil {
			return nil, false, err
		}
	}
	if len(orig) > 0 {
		_ = utiljson.UnmarshalCaseSensitivePreserveInts(orig, &o)
	}
	if c == nil {
		return nil, o != nil, nil
	}
	m, ok := c.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("invalid metadata.%s of type %T in converted object", name, c)
	}
	before, ok := o.(map[string]any)
	if !ok && o != nil {
		return nil, false, fmt.Errorf("invalid metadata.%s of type %T in original object", name, o)
	}
	strs := make(map[string]string, len(m))
	changed := len(before) != len(m) || o == nil
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, false, fmt.Errorf("metadata.%s[%s] must be a string, but is %T in converted object", name, k, v)
		}
		strs[k] = s
		if before[k] != v {
			changed = true
		}
	}
	if changed {
		var errs field.ErrorList
		if name == "labels" {
			errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
		} else {
			errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotation"))
		}
		if len(errs) > 0 {
			return nil, false, errs.ToAggregate()
		}
	}
	return conv, changed, nil
}

// registeredKind reports whether upstream's webhook client scheme knows
// apiVersion and kind: the apiextensions.k8s.io v1 and v1beta1 types (with
// the options and WatchEvent every group version gets) and the unversioned
// meta types of v1.
func registeredKind(apiVersion, kind string) bool {
	switch apiVersion {
	case reviewGroup + "/v1", reviewGroup + "/v1beta1":
		switch kind {
		case "ConversionReview", "CustomResourceDefinition", "CustomResourceDefinitionList", "WatchEvent",
			"ListOptions", "GetOptions", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions":
			return true
		}
	case "v1":
		switch kind {
		case "Status", "APIVersions", "APIGroupList", "APIGroup", "APIResourceList":
			return true
		}
	}
	return false
}

// looksLikeJSON is the client's test of a JSON body: '{' after leading
// white space.
func looksLikeJSON(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeftFunc(data, unicode.IsSpace), []byte("{"))
}

// apiVersionOf reads an object's apiVersion without decoding the rest ("" when
// it has none that is a string, or is not a JSON object).
func apiVersionOf(obj []byte) string {
	raw, _, _ := jsonscan.Lookup(obj, "apiVersion")
	return stringValue(raw)
}
