// Package fieldmanager names the field manager of a write as
// kube-apiserver does for metadata.managedFields.
package fieldmanager

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
)

// Name is the field manager of a write: the fieldManager query parameter
// when set, else the User-Agent's product (the part before the first
// "/") with non-printable runes dropped, cut to the 128 bytes a manager
// name may have (e.g. "kubectl/v1.33.0 (linux/amd64)" is "kubectl").
func Name(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	product, _, _ := strings.Cut(userAgent, "/")
	var b bytes.Buffer
	for _, r := range product {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
