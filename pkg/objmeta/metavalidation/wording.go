package metavalidation

import (
	"regexp"
	"strings"
)

var maxLenBytes = regexp.MustCompile(`must be no more than ([0-9]+) bytes`)

// V133Wording rewrites the messages of the v0.37 library's qualified-name,
// label-value and DNS checks in text as v1.33 words them: "a valid label
// key must consist of" reads "a qualified name must consist of", "must be
// no more than 63 bytes" reads "must be no more than 63 characters". It is
// for errors of library code this package does not replace (label
// selector parsing, k8s.io/apimachinery/pkg/labels) whose other parts
// cannot contain these phrases (a selector's tokens hold no spaces).
func V133Wording(text string) string {
	text = strings.ReplaceAll(text, "a valid label key must consist of", "a qualified name must consist of")
	return maxLenBytes.ReplaceAllString(text, "must be no more than $1 characters")
}
