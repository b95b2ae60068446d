package webhook

import "github.com/crdplane/crdplane/pkg/jsonscan"

// Objects are handled as JSON bytes (with package jsonscan): the checks of
// a converted object read a few top-level members and splice the original
// metadata in, without decoding (and re-encoding) the rest. The objects
// are valid JSON (from storage, and from a webhook response that decoded),
// so what the scanner does not validate is of no concern here.

// Top-level members the checks read, of an object and of its metadata.
var (
	headKeys = []string{"apiVersion", "kind", "metadata"}
	metaKeys = []string{"name", "namespace", "uid", "labels", "annotations"}
)

// scanMembers finds the top-level members of obj named keys (the last
// occurrence, as a decoder keeps), into out (len(keys) long; the zero
// Member for a key that is absent, whose Value is empty).
func scanMembers(obj []byte, keys []string, out []jsonscan.Member) error {
	return jsonscan.FindEach(obj, jsonscan.SkipSpace(obj, 0), keys, out)
}

// stringValue reads a raw JSON string ("" for anything else, as
// unstructured accessors do).
func stringValue(raw []byte) string {
	s, _ := jsonscan.String(raw)
	return s
}
