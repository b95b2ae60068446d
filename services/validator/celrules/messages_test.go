package celrules

import (
	"strings"
	"testing"
)

func TestReferenceMessages(t *testing.T) {
	const limits = `
type: object
properties:
  spec:
    type: object
    properties:
      x: {type: integer}
      maxLimit: {type: integer}
      name: {type: string}
    x-kubernetes-validations:
`
	obj := cronMeta + "spec: {x: 5, maxLimit: 3, name: nn}"
	runRuleCases(t, []ruleCase{
		{name: "messageExpression", schema: limits + `    - rule: "self.x <= self.maxLimit"
      messageExpression: '"x exceeded max limit of " + string(self.maxLimit)'
`, obj: obj, want: []string{`spec: Invalid value: "object": x exceeded max limit of 3`}},
		{name: "messageExpression wins over message", schema: limits + `    - rule: "self.x <= self.maxLimit"
      message: static
      messageExpression: '"dynamic " + self.name'
`, obj: obj, want: []string{`spec: Invalid value: "object": dynamic nn`}},
		{name: "messageExpression error falls back to message", schema: limits + `    - rule: "self.x <= self.maxLimit"
      message: static
      messageExpression: '"x" + string(self.x / 0)'
`, obj: obj, want: []string{`spec: Invalid value: "object": static`}},
		{name: "messageExpression error falls back to default", schema: limits + `    - rule: "self.x <= self.maxLimit"
      messageExpression: '"x" + string(self.x / 0)'
`, obj: obj, want: []string{`spec: Invalid value: "object": failed rule: self.x <= self.maxLimit`}},
		{name: "empty messageExpression result", schema: limits + `    - rule: "self.x <= self.maxLimit"
      message: static
      messageExpression: '"  "'
`, obj: obj, want: []string{`spec: Invalid value: "object": static`}},
		{name: "multi-line messageExpression result", schema: limits + `    - rule: "self.x <= self.maxLimit"
      message: static
      messageExpression: '"a\nb"'
`, obj: obj, want: []string{`spec: Invalid value: "object": static`}},
		{name: "messageExpression result is trimmed", schema: limits + `    - rule: "self.x <= self.maxLimit"
      messageExpression: '"  spaced  "'
`, obj: obj, want: []string{`spec: Invalid value: "object": spaced`}},
		{name: "long messageExpression result", schema: limits + `    - rule: "self.x <= self.maxLimit"
      message: static
      messageExpression: '"x".repeat(5121)'
`, obj: obj, want: []string{`spec: Invalid value: "object": static`}},
		{name: "message is trimmed", schema: limits + `    - rule: "self.x <= self.maxLimit"
      message: "  padded  "
`, obj: obj, want: []string{`spec: Invalid value: "object": padded`}},
		{name: "messageExpression on scalar", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      name:
        type: string
        x-kubernetes-validations:
        - rule: "self.size() < 3"
          messageExpression: "'name ' + self + ' is too long'"
`, obj: cronMeta + "spec: {name: long}", want: []string{`spec.name: Invalid value: "string": name long is too long`}},
	})
}

func TestReferenceReason(t *testing.T) {
	rule := func(reason string) string {
		return `
type: object
properties:
  spec:
    type: object
    properties:
      x: {type: integer}
      s:
        type: string
        x-kubernetes-validations:
        - rule: "self != 'bad'"
          message: s is bad
          reason: ` + reason + `
    x-kubernetes-validations:
    - rule: "self.x <= 3"
      message: too big
      reason: ` + reason + "\n"
	}
	obj := cronMeta + "spec: {x: 5, s: bad}"
	runRuleCases(t, []ruleCase{
		{name: "FieldValueInvalid", schema: rule("FieldValueInvalid"), obj: obj,
			want: []string{`spec: Invalid value: "object": too big`, `spec.s: Invalid value: "string": s is bad`}},
		{name: "FieldValueForbidden", schema: rule("FieldValueForbidden"), obj: obj,
			want: []string{"spec: Forbidden: too big", "spec.s: Forbidden: s is bad"}},
		{name: "FieldValueRequired", schema: rule("FieldValueRequired"), obj: obj,
			want: []string{"spec: Required value: too big", "spec.s: Required value: s is bad"}},
		{name: "FieldValueDuplicate", schema: rule("FieldValueDuplicate"), obj: obj,
			want: []string{`spec: Duplicate value: "object"`, `spec.s: Duplicate value: "string"`}},
	})
}

func TestReferenceFieldPath(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    properties:
      maxLimit: {type: integer}
      foo:
        type: object
        properties:
          test:
            type: object
            properties:
              x: {type: integer}
      testMap:
        type: object
        additionalProperties:
          type: object
          properties:
            foo: {type: integer}
      testList1: {type: array, items: {type: string}}
      testList2: {type: array, items: {type: string}}
      a.b: {type: integer}
    x-kubernetes-validations:
    - rule: "self.foo.test.x <= self.maxLimit"
      fieldPath: ".foo.test.x"
    - rule: "self.testMap['key'].foo < 3"
      fieldPath: ".testMap['key'].foo"
    - rule: "self.testMap.key.foo < 3"
      fieldPath: ".testMap.key"
    - rule: "self.testList1.all(x, !(x in self.testList2))"
      fieldPath: ".testList1"
    - rule: "self.a__dot__b < 3"
      fieldPath: "['a.b']"
    - rule: "self.maxLimit < 3"
      fieldPath: ".nope"
      reason: FieldValueForbidden
`
	runRuleCases(t, []ruleCase{
		{name: "field paths", schema: s,
			obj: cronMeta + "spec: {maxLimit: 3, foo: {test: {x: 4}}, testMap: {key: {foo: 3}}, testList1: [a], testList2: [a], a.b: 3}",
			want: []string{
				`spec.foo.test.x: Invalid value: "object": failed rule: self.foo.test.x <= self.maxLimit`,
				`spec.testMap[key].foo: Invalid value: "object": failed rule: self.testMap['key'].foo < 3`,
				`spec.testMap[key]: Invalid value: "object": failed rule: self.testMap.key.foo < 3`,
				`spec.testList1: Invalid value: "object": failed rule: self.testList1.all(x, !(x in self.testList2))`,
				`spec.a.b: Invalid value: "object": failed rule: self.a__dot__b < 3`,
				// An invalid fieldPath is rejected at CRD write time; here it
				// is ignored.
				"spec: Forbidden: failed rule: self.maxLimit < 3",
			}},
		{name: "field path at the root", schema: `
type: object
x-kubernetes-validations:
- rule: "self.spec.x < 3"
  fieldPath: ".spec.x"
properties:
  spec:
    type: object
    properties:
      x: {type: integer}
`, obj: cronMeta + "spec: {x: 3}", want: []string{`spec.x: Invalid value: "object": failed rule: self.spec.x < 3`}},
	})
}

func TestResolveFieldPath(t *testing.T) {
	n := newNode(parseSchema(t, `
type: object
properties:
  a:
    type: object
    properties:
      b: {type: string}
  m:
    type: object
    additionalProperties:
      type: object
      properties:
        c: {type: integer}
  l:
    type: array
    items: {type: string}
`))
	for _, tc := range []struct{ in, want, err string }{
		{in: ".a.b", want: "a.b"},
		{in: ".a['b']", want: "a.b"},
		{in: "['a'].b", want: "a.b"},
		{in: ".m.x.c", want: "m[x].c"},
		{in: ".m['x.y'].c", want: "m[x.y].c"},
		{in: `.m['it\'s']`, want: "m[it's]"},
		{in: ".l", want: "l"},
		{in: "a.b", err: "expected [ or . but got: a"},
		{in: ".a.c", err: "does not refer to a valid field"},
		{in: ".l[0]", err: "expected single quoted string but got 0"},
		{in: ".l['x']", err: "does not refer to a valid field"},
		{in: ".a[", err: "unexpected end of JSON path"},
		{in: ".a['b'", err: "unexpected end of JSON path"},
		{in: ".", err: "unexpected end of JSON path"},
		{in: `.m['\q']`, err: `invalid string literal: invalid escape char \q`},
	} {
		p, _, err := resolveFieldPath(tc.in, n)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case p.String() != tc.want:
			t.Errorf("%s: %s, want %s", tc.in, p, tc.want)
		}
	}
}

// TestRuleErrorValueIsTypeName: as upstream v1.33 (cel/validation.go
// validateExpressions: fieldErrorForReason(currentFldPath, sts.Type, ...)),
// a failed rule's Invalid (and Duplicate) error carries the schema's type
// name as its value, never the failing value, whatever the message's
// source: the default "failed rule: <rule>", message, messageExpression,
// a transition rule, a ratcheted failure's warning.
func TestRuleErrorValueIsTypeName(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "false"
    properties:
      obj:
        type: object
        properties: {a: {type: string}}
        x-kubernetes-validations: [{rule: "false"}]
      arr:
        type: array
        items: {type: string}
        x-kubernetes-validations: [{rule: "false", message: "arr msg"}]
      str:
        type: string
        x-kubernetes-validations: [{rule: "false", messageExpression: "'str is ' + self"}]
      int:
        type: integer
        x-kubernetes-validations: [{rule: "self == oldSelf", message: immutable}]
      num:
        type: number
        x-kubernetes-validations: [{rule: "false"}]
      bool:
        type: boolean
        x-kubernetes-validations: [{rule: "false", reason: FieldValueDuplicate}]
      ios:
        x-kubernetes-int-or-string: true
        x-kubernetes-validations: [{rule: "false"}]
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        x-kubernetes-validations: [{rule: "false"}]
`
	obj := cronMeta + `spec: {obj: {a: x}, arr: [x], str: abc, int: 2, num: 1.5, bool: true, ios: 3, free: {x: 1}}`
	old := cronMeta + `spec: {obj: {a: x}, arr: [x], str: abc, int: 1, num: 1.5, bool: true, ios: 3, free: {x: 1}}`
	common := []string{
		`spec: Invalid value: "object": failed rule: false`,
		`spec.obj: Invalid value: "object": failed rule: false`,
		`spec.arr: Invalid value: "array": arr msg`,
		`spec.str: Invalid value: "string": str is abc`,
		`spec.num: Invalid value: "number": failed rule: false`,
		`spec.bool: Duplicate value: "boolean"`,
		`spec.ios: Invalid value: "": failed rule: false`,
		`spec.free: Invalid value: "object": failed rule: false`,
	}
	runRuleCases(t, []ruleCase{
		{name: "create", schema: s, obj: obj, want: common},
		// On update the unchanged values' failures are ratcheted (not
		// the preserve-unknown-fields object's, as upstream): their
		// warnings carry the type name too.
		{name: "update", schema: s, obj: obj, old: old,
			want:     []string{common[0], common[7], `spec.int: Invalid value: "integer": immutable`},
			warnings: common[1:7]},
	})
}
