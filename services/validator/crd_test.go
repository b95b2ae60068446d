package validator

// ValidateCRD against upstream's CRD validation
// (k8s.io/apiextensions-apiserver, test-only) on CRDs that are valid but
// for their defaults and CEL rules: the errors must be the same.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	upstreamvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/kstatus"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// crdWith is a valid CRD (group example.com, kind Thing) whose versions
// have the given schemas (indented YAML of openAPIV3Schema).
func crdWith(schemas ...string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
  resourceVersion: "1"
spec:
  group: example.com
  scope: Namespaced
  names: {plural: things, singular: thing, kind: Thing, listKind: ThingList}
  versions:
`)
	for i, s := range schemas {
		fmt.Fprintf(&b, "  - name: v%d\n    served: true\n    storage: %t\n    schema:\n      openAPIV3Schema:\n", i+1, i == 0)
		for _, line := range strings.Split(strings.Trim(s, "\n"), "\n") {
			b.WriteString("        " + line + "\n")
		}
	}
	b.WriteString("status:\n  storedVersions: [v1]\n")
	return b.String()
}

// upstreamCRDErrors runs upstream's CRD validation.
func upstreamCRDErrors(t *testing.T, crdYAML, oldYAML string) []string {
	t.Helper()
	conv := func(y string) *apiextensions.CustomResourceDefinition {
		v1 := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict([]byte(y), v1); err != nil {
			t.Fatal(err)
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
		out := &apiextensions.CustomResourceDefinition{}
		if err := crdScheme.Convert(v1, out, nil); err != nil {
			t.Fatal(err)
		}
		return out
	}
	crd := conv(crdYAML)
	ctx := context.Background()
	var out []string
	if oldYAML == "" {
		for _, e := range upstreamvalidation.ValidateCustomResourceDefinition(ctx, crd) {
			out = append(out, fielderr.Error(e))
		}
	} else {
		for _, e := range upstreamvalidation.ValidateCustomResourceDefinitionUpdate(ctx, crd, conv(oldYAML)) {
			out = append(out, fielderr.Error(e))
		}
	}
	return out
}

func crdJSON(t *testing.T, y string) []byte {
	t.Helper()
	if y == "" {
		return nil
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(y), v1); err != nil {
		t.Fatal(err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
	b, err := utiljson.Marshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	selfTypeName = regexp.MustCompile(`selfType\d+`)
	pointer      = regexp.MustCompile(`\)\(0x[0-9a-f]+\)`)
)

// normalizeCRDError makes generated CEL type names and the addresses of
// pointers (values rendered with %#v) comparable.
func normalizeCRDError(s string) string {
	return pointer.ReplaceAllString(selfTypeName.ReplaceAllString(s, "selfType"), ")(<pointer>)")
}

type crdCase struct {
	name string
	crd  string
	old  string
	// want are the expected errors ("field: body"); "..." at the end of
	// one matches any suffix.
	want []string
}

func runCRDCases(t *testing.T, cases []crdCase) {
	t.Helper()
	client := serve(t, newDirService(t))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.ValidateCRD(context.Background(), &validatorv1.ValidateCRDRequest{
				Crd: crdJSON(t, tc.crd), OldCrd: crdJSON(t, tc.old)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.Causes {
				got = append(got, normalizeCRDError(c.Field+": "+c.Message))
			}
			var up []string
			for _, e := range upstreamCRDErrors(t, tc.crd, tc.old) {
				up = append(up, normalizeCRDError(e))
			}
			if !matchAll(got, tc.want) {
				t.Errorf("causes:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
			sg, su := asV133(got, up)
			slices.Sort(sg)
			slices.Sort(su)
			if !slices.Equal(sg, su) {
				t.Errorf("differs from upstream:\n\t%s\nupstream:\n\t%s", strings.Join(got, "\n\t"), strings.Join(up, "\n\t"))
			}
		})
	}
}

func matchAll(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		w := want[i]
		if p, ok := strings.CutSuffix(w, "..."); ok {
			if !strings.HasPrefix(got[i], p) {
				return false
			}
		} else if got[i] != w {
			return false
		}
	}
	return true
}

const spec = "spec.validation.openAPIV3Schema"

func TestValidateCRDCompile(t *testing.T) {
	rule := func(r string) string {
		return `
type: object
properties:
  spec:
    type: object
    properties:
      x:
        type: integer
        x-kubernetes-validations:
        - rule: ` + r + "\n"
	}
	runCRDCases(t, []crdCase{
		{name: "valid", crd: crdWith(rule("self > 0"))},
		{name: "no matching overload", crd: crdWith(rule("self == true")),
			want: []string{spec + `.properties[spec].properties[x].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self == true", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, bool)'` + "\n | self == true\n | .....^"}},
		{name: "no such field", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: self.nonExistingField > 0
    properties:
      x: {type: integer}
`), want: []string{spec + `.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.nonExistingField > 0", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: undefined field 'nonExistingField'...`}},
		{name: "invalid macro argument", crd: crdWith(rule("has(self)")),
			want: []string{spec + `.properties[spec].properties[x].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"has(self)", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: invalid argument to has() macro...`}},
		{name: "not a bool", crd: crdWith(rule("self + 1")),
			want: []string{spec + `.properties[spec].properties[x].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self + 1", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: cel expression must evaluate to a bool`}},
		{name: "messageExpression", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      x:
        type: integer
        x-kubernetes-validations:
        - rule: self > 0
          messageExpression: self
        - rule: self > 1
          messageExpression: "'x' + self"
        - rule: self > 2
          messageExpression: "'x must be greater than 2'"
`), want: []string{
			spec + `.properties[spec].properties[x].x-kubernetes-validations[0].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:"self > 0", Message:"", MessageExpression:"self", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: messageExpression must evaluate to a string`,
			spec + `.properties[spec].properties[x].x-kubernetes-validations[1].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:"self > 1", Message:"", MessageExpression:"'x' + self", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: messageExpression compilation failed: ERROR: <input>:1:5: found no matching overload for '_+_' applied to '(string, int)'...`,
		}},
		{name: "oldSelf on uncorrelatable items", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        maxItems: 10
        items:
          type: object
          properties:
            a:
              type: string
              maxLength: 10
              x-kubernetes-validations:
              - rule: self == oldSelf
      set:
        type: array
        maxItems: 10
        x-kubernetes-list-type: set
        items:
          type: string
          maxLength: 10
          x-kubernetes-validations:
          - rule: self == oldSelf
      map:
        type: array
        maxItems: 10
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [k]
        items:
          type: object
          required: [k]
          properties:
            k: {type: string, maxLength: 10}
          x-kubernetes-validations:
          - rule: self == oldSelf
      atomicMap:
        type: object
        x-kubernetes-map-type: atomic
        properties:
          a:
            type: string
            maxLength: 10
            x-kubernetes-validations:
            - rule: self == oldSelf
`), want: []string{
			spec + `.properties[spec].properties[list].items.properties[a].x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within ` + spec + `.properties[spec].properties[list]`,
			spec + `.properties[spec].properties[set].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within ` + spec + `.properties[spec].properties[set]`,
		}},
		{name: "optionalOldSelf", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      x:
        type: integer
        x-kubernetes-validations:
        - rule: self > 0
          optionalOldSelf: true
        - rule: "oldSelf.orValue(0) <= self"
          optionalOldSelf: true
        - rule: "oldSelf <= self"
          optionalOldSelf: false
        - rule: "oldSelf <= self"
          optionalOldSelf: true
`), want: []string{
			spec + `.properties[spec].properties[x].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`,
			spec + `.properties[spec].properties[x].x-kubernetes-validations[3].rule: Invalid value: apiextensions.ValidationRule{Rule:"oldSelf <= self", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(<pointer>)}: compilation failed: ERROR: <input>:1:9: found no matching overload for '_<=_' applied to '(optional_type(int), int)'...`,
			// A rule that does not compile does not use oldSelf either.
			spec + `.properties[spec].properties[x].x-kubernetes-validations[3].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`,
		}},
		{name: "metadata and unknown fields", crd: crdWith(`
type: object
x-kubernetes-validations:
- rule: "self.metadata.name.startsWith('a') && self.kind == 'Thing'"
- rule: "self.metadata.labels.size() > 0"
properties:
  spec:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    x-kubernetes-validations:
    - rule: "self.other > 0"
`), want: []string{
			spec + `.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.other > 0", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: undefined field 'other'...`,
			spec + `.x-kubernetes-validations[1].rule: Invalid value: apiextensions.ValidationRule{Rule:"self.metadata.labels.size() > 0", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:14: undefined field 'labels'...`,
		}},
		{name: "per-version schemas", crd: crdWith(rule("self > 0"), rule("self == 'x'")),
			want: []string{`spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[x].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"self == 'x'", Message:"", MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:6: found no matching overload for '_==_' applied to '(int, string)'...`}},
	})
}

func TestValidateCRDCost(t *testing.T) {
	// Rules over a list of at most items strings of at most 1000
	// characters: 22500 items cost about 9.1 million each.
	many := func(n, items int) string {
		s := fmt.Sprintf(`
type: object
properties:
  l:
    type: array
    maxItems: %d
    items: {type: string, maxLength: 1000}
    x-kubernetes-validations:
`, items)
		for range n {
			s += "    - rule: self.all(x, x.contains('a'))\n"
		}
		return s
	}
	runCRDCases(t, []crdCase{
		{name: "unbounded list", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      foo:
        type: array
        items:
          type: string
        x-kubernetes-validations:
        - rule: "self.all(x, x.contains('a string'))"
`), want: []string{
			spec + ".properties[spec].properties[foo].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
			spec + ".properties[spec].properties[foo].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
			spec + ": Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
		}},
		{name: "bounded list", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      foo:
        type: array
        maxItems: 25
        items:
          type: string
          maxLength: 10
        x-kubernetes-validations:
        - rule: "self.all(x, x.contains('a string'))"
`)},
		{name: "bounded items", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      foo:
        type: array
        maxItems: 25
        items:
          type: string
          maxLength: 10
          x-kubernetes-validations:
          - rule: "self.contains('a string')"
`)},
		{name: "flat list", crd: crdWith(`
type: object
properties:
  foo:
    type: array
    items:
      type: integer
    x-kubernetes-validations:
    - rule: "self.all(x, x == 5)"
`)},
		{name: "nested list", crd: crdWith(`
type: object
properties:
  foo:
    type: array
    items:
      type: array
      items:
        type: integer
      x-kubernetes-validations:
      - rule: "self.all(x, x == 5)"
`), want: []string{
			spec + ".properties[foo].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
			spec + ".properties[foo].items.x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
			spec + ": Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x ...",
		}},
		{name: "messageExpression cost", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      foo:
        type: array
        items: {type: string}
    x-kubernetes-validations:
    - rule: "true"
      messageExpression: "self.foo.map(x, x + x).join(',')"
`), want: []string{
			spec + ".properties[spec].x-kubernetes-validations[0].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x ...",
			spec + ".properties[spec].x-kubernetes-validations[0].messageExpression: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
			spec + ": Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x ...",
		}},
		{name: "total within limit", crd: crdWith(many(11, 22500))},
		{name: "total cost", crd: crdWith(many(12, 22500)),
			want: []string{
				spec + ".properties[l].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
				spec + ".properties[l].x-kubernetes-validations[1].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
				spec + ".properties[l].x-kubernetes-validations[2].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
				spec + ".properties[l].x-kubernetes-validations[3].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
				spec + ": Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.0908...",
			}},
		{name: "rule cost factor", crd: crdWith(many(1, 50000)),
			want: []string{spec + ".properties[l].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 2.0x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"}},
	})
}

func TestValidateCRDDefaults(t *testing.T) {
	runCRDCases(t, []crdCase{
		{name: "valid defaults", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      cronSpec: {type: string, default: "5 0 * * *", pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
      replicas: {type: integer, minimum: 1, maximum: 10, default: 1}
      obj:
        type: object
        default: {a: 1}
        properties:
          a: {type: integer}
`)},
		{name: "unpruned default", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      obj:
        type: object
        default: {a: 1, b: 2}
        properties:
          a: {type: integer}
`), want: []string{spec + `.properties[spec].properties[obj].default: Invalid value: map[string]interface {}{"a":1, "b":2}: must not have unknown fields`}},
		{name: "default against the schema", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      cronSpec: {type: string, default: "5 0 * *", pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
      replicas: {type: integer, minimum: 1, maximum: 10, default: 11}
      obj:
        type: object
        default: {a: x}
        properties:
          a: {type: integer}
      list:
        type: array
        items:
          type: string
          enum: [a, b]
          default: c
`), want: []string{
			// The default validates against its node's schema alone, so
			// the messages name paths relative to it.
			spec + `.properties[spec].properties[cronSpec].default: Invalid value: "5 0 * *":  in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'`,
			spec + `.properties[spec].properties[list].items.default: Unsupported value: "c": supported values: "a", "b"`,
			spec + `.properties[spec].properties[obj].default.a: Invalid value: "string": a in body must be of type integer: "string"`,
			spec + `.properties[spec].properties[replicas].default: Invalid value: 11:  in body should be less than or equal to 10`,
		}},
		{name: "default against rules", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      replicas:
        type: integer
        default: 0
        x-kubernetes-validations:
        - rule: self > 0
          message: must be positive
        - rule: self >= oldSelf
      obj:
        type: object
        default: {min: 5, max: 1}
        x-kubernetes-validations:
        - rule: self.min <= self.max
        properties:
          min: {type: integer}
          max: {type: integer}
`), want: []string{
			spec + `.properties[spec].properties[obj].default: Invalid value: "object": failed rule: self.min <= self.max`,
			spec + `.properties[spec].properties[replicas].default: Invalid value: "integer": must be positive`,
		}},
		{name: "default errors skip rule compilation", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: self.nope
    properties:
      obj:
        type: object
        default: {a: 1, b: 2}
        properties:
          a: {type: integer}
`), want: []string{spec + `.properties[spec].properties[obj].default: Invalid value: map[string]interface {}{"a":1, "b":2}: must not have unknown fields`}},
		{name: "embedded resource defaults", crd: crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
        default: {apiVersion: v1, kind: Pod, metadata: {name: "a/b"}}
      other:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          metadata:
            type: object
            properties:
              name: {type: string, default: "x/y"}
`), want: []string{
			spec + `.properties[spec].properties[other].properties[metadata].properties[name].default: Invalid value: "x/y": must result in valid metadata: metadata.name: Invalid value: "x/y": may not contain '/'`,
			spec + `.properties[spec].properties[template].default.metadata.name: Invalid value: "a/b": may not contain '/'`,
		}},
	})
}

func TestValidateCRDUpdate(t *testing.T) {
	// One rule estimated at about 20 million: over the per-expression
	// limit, within the total.
	expensive := crdWith(`
type: object
properties:
  l:
    type: array
    maxItems: 50000
    items: {type: string, maxLength: 1000}
    x-kubernetes-validations:
    - rule: self.all(x, x.contains('a'))
`)
	unpruned := crdWith(`
type: object
properties:
  spec:
    type: object
    properties:
      obj:
        type: object
        default: {a: 1, b: 2}
        properties:
          a: {type: integer}
`)
	runCRDCases(t, []crdCase{
		{name: "unchanged schema keeps its cost", crd: expensive, old: expensive},
		{name: "changed schema is costed", crd: strings.Replace(expensive, "'a'", "'b'", 1), old: expensive,
			want: []string{spec + ".properties[l].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 2.0x ..."}},
		{name: "unpruned defaults stay allowed", crd: strings.Replace(unpruned, "b: 2", "b: 3", 1), old: unpruned},
		{name: "pruned defaults stay required", crd: unpruned, old: crdWith("type: object"),
			want: []string{spec + `.properties[spec].properties[obj].default: Invalid value: map[string]interface {}{"a":1, "b":2}: must not have unknown fields`}},
	})
}

func TestValidateCRDBadRequest(t *testing.T) {
	client := serve(t, newDirService(t))
	for _, req := range []*validatorv1.ValidateCRDRequest{{}, {Crd: []byte("{")}, {Crd: []byte(`{"spec":1}`)}} {
		_, err := client.ValidateCRD(context.Background(), req)
		if st := kstatus.FromError(err); st == nil || st.Code != 400 {
			t.Errorf("%s: %v", req.Crd, err)
		}
	}
}
