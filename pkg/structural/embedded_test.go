package structural

import (
	"reflect"
	"testing"
)

// TestEmbeddedResourceTypeMeta: the TypeMeta checks of an
// x-kubernetes-embedded-resource object, worded as upstream v1.33's
// objectmeta/validation.go validateEmbeddedResource: a missing apiVersion
// or kind is Required "must not be empty", an empty one Invalid "must not
// be empty".
func TestEmbeddedResourceTypeMeta(t *testing.T) {
	props := parseProps(t, `
type: object
properties:
  res:
    type: object
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
  list:
    type: array
    items:
      type: object
      x-kubernetes-embedded-resource: true
      x-kubernetes-preserve-unknown-fields: true
`)
	s := mustCompile(t, props)
	up := newUpstream(t, props)
	for _, tc := range []struct {
		name, obj string
		want      []string
	}{
		{"complete", `{res: {apiVersion: v1, kind: Pod}}`, []string{}},
		{"empty object", `{res: {}}`, []string{
			`res.apiVersion: Required value: must not be empty`,
			`res.kind: Required value: must not be empty`}},
		{"missing apiVersion", `{res: {kind: Pod}}`, []string{
			`res.apiVersion: Required value: must not be empty`}},
		{"missing kind", `{res: {apiVersion: apps/v1}}`, []string{
			`res.kind: Required value: must not be empty`}},
		{"empty strings", `{res: {apiVersion: "", kind: ""}}`, []string{
			`res.apiVersion: Invalid value: "": must not be empty`,
			`res.kind: Invalid value: "": must not be empty`}},
		{"not strings", `{res: {apiVersion: 1, kind: true}}`, []string{
			`res.apiVersion: Invalid value: 1: must be a string`,
			`res.kind: Invalid value: true: must be a string`}},
		{"in a list", `{list: [{apiVersion: v1, kind: Pod}, {kind: Pod}]}`, []string{
			`list[1].apiVersion: Required value: must not be empty`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := parseObject(t, tc.obj)
			got := errorStrings(ValidateEmbeddedResources(nil, obj, s))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if u := errorStrings(up.embeddedV133(deepCopy(obj))); !reflect.DeepEqual(sortedStrings(u), sortedStrings(tc.want)) {
				t.Errorf("upstream %q\nwant     %q", u, tc.want)
			}
		})
	}
}
