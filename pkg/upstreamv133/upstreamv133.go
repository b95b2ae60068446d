// Package upstreamv133 is a test reference: upstream Kubernetes v1.33's
// schema validation of custom resources, assembled from the v0.37
// k8s.io/apiextensions-apiserver libraries this project builds with, with
// the few places where v1.33 behaves differently put back. The
// differential tests of pkg/structural and of the validator compare
// crdplane's own code against it. No production code imports it.
package upstreamv133

import (
	"regexp"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// formats are the formats v1.33 keeps in a CRD schema (apiextensions-
// apiserver v0.33's supportedVersionedFormats, dashes removed): its
// StripUnsupportedFormatsPostProcessorForVersion drops any other, whatever
// the node's type (int32, int64, float and double included). The v0.37
// library keeps numeric formats on numeric types and k8s-short-name and
// k8s-long-name.
var formats = map[string]bool{}

func init() {
	for _, f := range []string{"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac",
		"uuid", "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor",
		"rgbcolor", "byte", "password", "date", "duration", "datetime"} {
		formats[f] = true
	}
}

// NewSchemaValidator is apiservervalidation.NewSchemaValidator with
// v1.33's format post-processing.
func NewSchemaValidator(props *apiextensions.JSONSchemaProps) (apiservervalidation.SchemaValidator, error) {
	openapi := &spec.Schema{}
	err := apiservervalidation.ConvertJSONSchemaPropsWithPostProcess(props, openapi, func(s *spec.Schema) error {
		if !formats[strings.ReplaceAll(s.Format, "-", "")] {
			s.Format = ""
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return apiservervalidation.NewSchemaValidatorFromOpenAPI(openapi), nil
}

// rangeErr matches the errors of kube-openapi's IsValueValidAgainstRange.
var rangeErr = regexp.MustCompile(`^(Checked|MultipleOf|Maximum boundary|Minimum boundary) value must be of type `)

// IsRangeError reports the range errors of the v0.37 library's number
// validator, which checks values and bounds against the node's type and
// format; v1.33 builds its number validator without them (kube-openapi of
// 2025-03: numberValidator has no Type or Format), so it never reports
// one. Callers drop them to word errors as v1.33.
func IsRangeError(e *field.Error) bool {
	return e.Field == "<nil>" && rangeErr.MatchString(e.Detail)
}
