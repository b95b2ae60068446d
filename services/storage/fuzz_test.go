package storage

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crdplane/crdplane/pkg/fuzzalloc"
)

// FuzzSelector: label and field selectors (as a list request sends them)
// parse or fail with a 400, never panic, and match a stored object (valid
// JSON) without panicking; a label selector matches exactly when it
// matches the labels the object decodes to.
func FuzzSelector(f *testing.F) {
	selectable := []string{".spec.color", "spec.size"}
	f.Fuzz(func(t *testing.T, labelSel, fieldSel string, obj []byte) {
		fuzzalloc.Check(t, len(labelSel)+len(fieldSel)+len(obj), 1000, func() {
			s, err := newSelector(labelSel, fieldSel, selectable)
			if err != nil {
				if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != 400 {
					t.Fatalf("not a 400: %v", err)
				}
				return
			}
			if !json.Valid(obj) {
				// stored objects are valid JSON
				return
			}
			matched, err := s.matches(obj)
			if err != nil || s == nil || s.field != nil {
				return
			}
			// the label selector alone: as upstream, on the decoded labels
			var decoded struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if json.Unmarshal(obj, &decoded) != nil {
				return
			}
			if want := s.label.Matches(labels.Set(decoded.Metadata.Labels)); matched != want {
				t.Fatalf("matches %v, the decoded labels %v: %v", matched, decoded.Metadata.Labels, want)
			}
		})
	})
}

// FuzzDecodeContinue: a continue token (a client sends it back as it
// likes) decodes or fails, never panics; a key it decodes to stays under
// the list's prefix (no "..", no empty segment) and encodes back to a
// token that decodes to the same key and revision.
func FuzzDecodeContinue(f *testing.F) {
	const prefix = "/registry/stable.example.com/crontabs/"
	f.Fuzz(func(t *testing.T, token string) {
		fuzzalloc.Check(t, len(token), 1000, func() {
			key, rv, err := decodeContinue(token, prefix)
			if err != nil {
				return
			}
			rest, ok := strings.CutPrefix(key, prefix)
			if !ok || rest == "" || rv == 0 {
				t.Fatalf("key %q, revision %d", key, rv)
			}
			if path.Clean("/"+rest) != "/"+rest {
				t.Fatalf("key %q leaves the prefix or is not clean", key)
			}
			again, err := encodeContinue(key, prefix, rv)
			if err != nil {
				t.Fatal(err)
			}
			key2, rv2, err := decodeContinue(again, prefix)
			if err != nil || key2 != key || rv2 != rv {
				t.Fatalf("round trip: %q %d %v, want %q %d", key2, rv2, err, key, rv)
			}
		})
	})
}
