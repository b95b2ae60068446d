package httpx

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/kubewire"
)

// Body is a create or update request body, read once by DecodeBody: the
// bytes as sent and their JSON. The verbs decode JSON into the object
// they admit and store; nothing reads the body again.
type Body struct {
	// Raw is the body as sent (error messages quote it).
	Raw []byte
	// JSON is the body as JSON: JSON as sent, YAML converted (nil when
	// ConvErr is set).
	JSON []byte
	// ConvErr is a YAML body's conversion failure: custom resources word
	// it as their decoder does, CRDs answer it as a 400 (YAMLError).
	ConvErr error

	yaml          bool
	yamlStrictErr error // a YAML body's duplicate keys (it converted otherwise)
}

// DecodeBody reads a create/update body of contentType as kube-apiserver's
// serializers for custom resources and CRDs do: JSON as is, YAML converted
// (its duplicate keys found in the same pass, for StrictErrors), any other
// media type 415.
func DecodeBody(contentType string, raw []byte) (Body, error) {
	b := Body{Raw: raw}
	mt := ContentTypeJSON
	if contentType != "" {
		parsed, _, err := mime.ParseMediaType(contentType)
		if err != nil {
			return Body{}, UnsupportedMediaType(ContentTypeJSON, ContentTypeYAML)
		}
		mt = parsed
	}
	switch mt {
	case ContentTypeJSON, "*/*":
		b.JSON = raw
	case ContentTypeYAML, "application/x-yaml", "text/yaml":
		b.yaml = true
		j, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			// Duplicate keys (strict) or no YAML at all: the lenient
			// conversion tells which.
			b.yamlStrictErr = err
			if j, err = yaml.YAMLToJSON(raw); err != nil {
				b.ConvErr, b.yamlStrictErr = err, nil
				return b, nil
			}
		}
		b.JSON = j
	default:
		return Body{}, UnsupportedMediaType(ContentTypeJSON, ContentTypeYAML)
	}
	return b, nil
}

// YAMLError is a YAML body's conversion failure as CRD requests answer it:
// upstream's 400 for a body its decoder could not read (nil when the body
// converted).
func (b Body) YAMLError() error {
	if b.ConvErr == nil {
		return nil
	}
	return kubewire.UnrecognizedError(b.ConvErr, "CustomResourceDefinition", b.Raw)
}

// StrictErrors are the strict decoding errors upstream's decoder finds in
// the body before its unknown fields, under directive (none under Ignore):
// a JSON body's duplicate fields (`duplicate field "spec.x"`, as
// sigs.k8s.io/json); a YAML body's duplicate keys (the YAML strict
// conversion's error, as one error under Strict and one warning a line
// under Warn, as upstream's parseYAMLWarnings splits it).
func (b Body) StrictErrors(directive string) []string {
	if directive == metav1.FieldValidationIgnore {
		return nil
	}
	if b.yaml {
		if b.yamlStrictErr == nil {
			return nil
		}
		if directive == metav1.FieldValidationStrict {
			return []string{b.yamlStrictErr.Error()}
		}
		return yamlWarnings(b.yamlStrictErr.Error())
	}
	paths, err := jsonscan.DuplicateFields(b.JSON, 0)
	if err != nil {
		return nil // the decoder reports malformed input
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = fmt.Sprintf("duplicate field %q", p)
	}
	return out
}

// yamlWarnings splits a YAML strict error into a warning a line, as
// upstream's parseYAMLWarnings does (anything else is one warning).
func yamlWarnings(msg string) []string {
	rest, ok := strings.CutPrefix(msg, "yaml: unmarshal errors:\n")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "error converting YAML to JSON: yaml: unmarshal errors:\n"); !ok {
			return []string{msg}
		}
	}
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

// UnsupportedMediaType is kube-apiserver's 415 for a body it cannot decode.
func UnsupportedMediaType(accepted ...string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    415,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(accepted, ", ")),
	}}
}

// BodyFor is the request a create or update body belongs to, for
// DecodeRequestBody.
type BodyFor struct {
	// Target is the endpoint (TargetCRD, TargetCustomResource,
	// TargetScale).
	Target Target
	// Kind resolves the custom resource's kind, which a protobuf body's
	// 400 names (only called for one).
	Kind func() (string, error)
	// Group and Version are the request's.
	Group, Version string
}

// DecodeRequestBody is DecodeBody with Kubernetes protobuf as upstream
// serves it (kubewire.DecodeBody): a protobuf CRD (or Scale) body is
// decoded into its JSON, one that does not decode is upstream's 400 and
// nothing is written; a protobuf body for a custom resource is the 400 of
// the crdHandler's decoder, which decodes none (upstream v1.33 resets the
// connection under field validation Strict and Warn; crdplane answers the
// 400 in every case). What no serializer reads is upstream's 415, which
// lists the protobuf media type.
func DecodeRequestBody(rm RequestMeta, raw []byte, f BodyFor) (Body, error) {
	if isProtobuf(rm.ContentType) {
		req := kubewire.BodyRequest{ContentType: rm.ContentType, Body: raw, Target: f.Target, FieldValidation: metav1.FieldValidationIgnore}
		if (f.Target == TargetCustomResource || f.Target == TargetRBAC) && f.Kind != nil {
			kind, err := f.Kind()
			if err != nil {
				return Body{}, err
			}
			req.Kind, req.Group, req.Version = kind, f.Group, f.Version
		}
		wb, err := kubewire.DecodeBody(req)
		if err != nil {
			return Body{}, err
		}
		return Body{Raw: raw, JSON: wb.JSON}, nil
	}
	b, err := DecodeBody(rm.ContentType, raw)
	if err != nil {
		if _, werr := kubewire.DecodeBody(kubewire.BodyRequest{ContentType: rm.ContentType, Target: f.Target}); werr != nil {
			return Body{}, werr
		}
	}
	return b, err
}

// isProtobuf reports a Content-Type of Kubernetes protobuf.
func isProtobuf(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == kubewire.ContentTypeProtobuf
}

// DecodeDeleteBody reads a DELETE body as upstream's delete handlers do
// (kubewire.DecodeDeleteOptions): a protobuf DeleteOptions as its JSON,
// JSON and YAML as they are, other media types 415. A protobuf body that
// does not decode is upstream's 500 with the decoder's message.
func DecodeDeleteBody(rm RequestMeta, raw []byte) ([]byte, error) {
	if len(raw) == 0 || !isProtobuf(rm.ContentType) {
		return raw, nil
	}
	b, err := kubewire.DecodeDeleteOptions(rm.ContentType, raw)
	if err != nil {
		var as apierrors.APIStatus
		if errors.As(err, &as) {
			return nil, err
		}
		// upstream's ErrorToAPIStatus of an error that is not a Status
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}}
	}
	return b.JSON, nil
}
