package storage

import (
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
)

const (
	fieldName      = "metadata.name"
	fieldNamespace = "metadata.namespace"
)

// selector filters objects by label and field selectors. A nil *selector
// matches everything.
type selector struct {
	label labels.Selector // nil: no label requirement
	field fields.Selector // nil: no field requirement
	// paths of the selectable fields the field selector refers to.
	paths map[string][]string
}

// newSelector parses label and field selectors; field selectors may use
// metadata.name, metadata.namespace and the selectable fields (paths like
// "spec.color"). It returns nil when neither selects anything.
func newSelector(labelSel, fieldSel string, selectable []string) (*selector, error) {
	s := &selector{}
	if strings.TrimSpace(labelSel) != "" {
		ls, err := labels.Parse(labelSel)
		if err != nil {
			// Worded as v1.33's parser ("a qualified name must consist
			// of ...", "must be no more than 63 characters").
			return nil, apierrors.NewBadRequest(metavalidation.V133Wording(err.Error()))
		}
		if !ls.Empty() {
			s.label = ls
		}
	}
	if strings.TrimSpace(fieldSel) != "" {
		fs, err := fields.ParseSelector(fieldSel)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		allowed := make(map[string]bool, len(selectable))
		for _, f := range selectable {
			allowed[strings.TrimPrefix(f, ".")] = true
		}
		// Upstream converts field labels with the CRD's converter, which
		// refuses every field but these.
		fs, err = fs.Transform(func(field, value string) (string, string, error) {
			if field == fieldName || field == fieldNamespace || allowed[field] {
				return field, value, nil
			}
			return "", "", fmt.Errorf("field label not supported: %s", field)
		})
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if !fs.Empty() {
			s.field = fs
			for _, r := range fs.Requirements() {
				if r.Field != fieldName && r.Field != fieldNamespace {
					if s.paths == nil {
						s.paths = map[string][]string{}
					}
					s.paths[r.Field] = strings.Split(r.Field, ".")
				}
			}
		}
	}
	if s.label == nil && s.field == nil {
		return nil, nil
	}
	return s, nil
}

// selectorMeta are the members of metadata a selector reads.
var selectorMeta = []string{"name", "namespace", "labels"}

// matches reports whether the stored object obj passes the selector.
func (s *selector) matches(obj []byte) (bool, error) {
	if s == nil {
		return true, nil
	}
	meta, ok, err := jsonscan.Find(obj, jsonscan.SkipSpace(obj, 0), "metadata")
	if err != nil {
		return false, err
	}
	var name, namespace string
	var lbls map[string]string
	if ok && obj[meta.ValStart] == '{' {
		var md [3]jsonscan.Member
		if err := jsonscan.FindEach(obj, meta.ValStart, selectorMeta, md[:]); err != nil {
			return false, err
		}
		name, _ = jsonscan.String(md[0].Value(obj))
		namespace, _ = jsonscan.String(md[1].Value(obj))
		if labelsRaw := md[2].Value(obj); s.label != nil && len(labelsRaw) > 0 && labelsRaw[0] == '{' {
			// Labels that are not all strings are dropped, as upstream's
			// decoder drops a malformed metadata field of a stored object.
			if err := json.Unmarshal(labelsRaw, &lbls); err != nil {
				lbls = nil
			}
		}
	}
	if s.label != nil && !s.label.Matches(labels.Set(lbls)) {
		return false, nil
	}
	if s.field == nil {
		return true, nil
	}
	set := fields.Set{fieldName: name, fieldNamespace: namespace}
	for f, path := range s.paths {
		raw, _, err := jsonscan.Lookup(obj, path...)
		if err != nil {
			return false, err
		}
		set[f] = fieldValue(raw)
	}
	return s.field.Matches(set), nil
}
