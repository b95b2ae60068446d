package celrules

import "testing"

func TestReferenceTransitionRules(t *testing.T) {
	const level = `
type: object
properties:
  spec:
    type: object
    properties:
      level:
        type: string
        enum: ["low", "medium", "high"]
        x-kubernetes-validations:
        - rule: "!(self == 'high' && oldSelf == 'low') && !(self == 'low' && oldSelf == 'high')"
          message: cannot transition directly between 'low' and 'high'
`
	const examples = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.foo == oldSelf.foo"
      message: foo is immutable
    - rule: "!has(oldSelf.field) || has(self.field)"
      message: field cannot be removed
    properties:
      foo: {type: string}
      field: {type: string}
      bar:
        type: string
        x-kubernetes-validations:
        - rule: "oldSelf != 'bar' || self == 'bar'"
      set:
        type: array
        x-kubernetes-list-type: set
        items: {type: string}
        x-kubernetes-validations:
        - rule: "self.all(element, element in oldSelf)"
          message: append-only
      x:
        type: string
        x-kubernetes-validations:
        - rule: "oldSelf != 'X' || self in ['A', 'B']"
      counter:
        type: integer
        x-kubernetes-validations:
        - rule: "self >= oldSelf"
          message: must not decrease
`
	const mapList = `
type: object
properties:
  spec:
    type: object
    properties:
      items:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            value:
              type: integer
              x-kubernetes-validations:
              - rule: "self >= oldSelf"
                message: must not decrease
          x-kubernetes-validations:
          - rule: "self.name == oldSelf.name"
      labels:
        type: object
        additionalProperties:
          type: string
          x-kubernetes-validations:
          - rule: "self == oldSelf"
            message: label values are immutable
`
	runRuleCases(t, []ruleCase{
		{name: "low to high", schema: level, obj: cronMeta + "spec: {level: high}", old: cronMeta + "spec: {level: low}",
			want: []string{`spec.level: Invalid value: "string": cannot transition directly between 'low' and 'high'`}},
		{name: "low to medium", schema: level, obj: cronMeta + "spec: {level: medium}", old: cronMeta + "spec: {level: low}"},
		{name: "never on create", schema: level, obj: cronMeta + "spec: {level: high}"},
		{name: "not when the field is set", schema: level, obj: cronMeta + "spec: {level: high}", old: cronMeta + "spec: {}"},
		{name: "examples ok", schema: examples,
			obj: cronMeta + "spec: {foo: a, field: f, bar: bar, set: [b], x: A, counter: 3}",
			old: cronMeta + "spec: {foo: a, field: f, bar: bar, set: [a, b], x: X, counter: 3}"},
		{name: "examples violated", schema: examples,
			obj: cronMeta + "spec: {foo: b, bar: baz, set: [a], x: Z, counter: 2}",
			old: cronMeta + "spec: {foo: a, field: f, bar: bar, set: [a, b], x: X, counter: 3}",
			want: []string{
				`spec: Invalid value: "object": foo is immutable`,
				`spec: Invalid value: "object": field cannot be removed`,
				`spec.bar: Invalid value: "string": failed rule: oldSelf != 'bar' || self == 'bar'`,
				`spec.x: Invalid value: "string": failed rule: oldSelf != 'X' || self in ['A', 'B']`,
				`spec.counter: Invalid value: "integer": must not decrease`,
			}},
		{name: "set items do not correlate but the set does", schema: examples,
			obj:  cronMeta + "spec: {foo: a, set: [a, c]}",
			old:  cronMeta + "spec: {foo: a, set: [a, b]}",
			want: []string{`spec.set: Invalid value: "array": append-only`}},
		{name: "map list items correlate by key", schema: mapList,
			obj: cronMeta + "spec: {items: [{name: b, value: 1}, {name: a, value: 5}, {name: c, value: 0}], labels: {x: '1', y: '3'}}",
			old: cronMeta + "spec: {items: [{name: a, value: 6}, {name: b, value: 1}], labels: {x: '2', z: '1'}}",
			want: []string{
				`spec.items[1].value: Invalid value: "integer": must not decrease`,
				`spec.labels[x]: Invalid value: "string": label values are immutable`,
			}},
	})
}

func TestReferenceOptionalOldSelf(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    properties:
      foo: {type: string}
      case:
        type: string
        x-kubernetes-validations:
        - rule: "[oldSelf.orValue(''), self].all(x, ['OldCase1', 'OldCase2'].exists(case, x == case))"
          optionalOldSelf: true
      tags:
        type: object
        additionalProperties: {type: string}
        x-kubernetes-validations:
        - rule: "oldSelf.optMap(o, o.size()).orValue(0) < 4"
          optionalOldSelf: true
          message: tags were too many
    x-kubernetes-validations:
    - rule: "self.foo == 'foo' || (oldSelf.hasValue() && oldSelf.value().foo != 'foo')"
      optionalOldSelf: true
      messageExpression: "'foo is ' + self.foo + (oldSelf.hasValue() ? ', was ' + oldSelf.value().foo : '')"
`
	runRuleCases(t, []ruleCase{
		{name: "create runs optionalOldSelf rules", schema: s,
			obj: cronMeta + "spec: {foo: bar, case: OldCase3, tags: {a: '1', b: '2', c: '3', d: '4'}}",
			want: []string{
				// The messageExpression sees oldSelf as not optional (as
				// upstream) and fails, so the default message shows.
				`spec: Invalid value: "object": failed rule: self.foo == 'foo' || (oldSelf.hasValue() && oldSelf.value().foo != 'foo')`,
				`spec.case: Invalid value: "string": failed rule: [oldSelf.orValue(''), self].all(x, ['OldCase1', 'OldCase2'].exists(case, x == case))`,
			}},
		{name: "update grandfathers old values", schema: s,
			obj:  cronMeta + "spec: {foo: bar, case: OldCase1, tags: {a: '1'}}",
			old:  cronMeta + "spec: {foo: baz, case: OldCase2, tags: {a: '1', b: '2', c: '3', d: '4'}}",
			want: []string{`spec.tags: Invalid value: "object": tags were too many`}},
		{name: "update from foo", schema: s,
			obj:  cronMeta + "spec: {foo: bar, case: OldCase1}",
			old:  cronMeta + "spec: {foo: foo, case: OldCase1}",
			want: []string{`spec: Invalid value: "object": failed rule: self.foo == 'foo' || (oldSelf.hasValue() && oldSelf.value().foo != 'foo')`}},
		{name: "new field on update", schema: s,
			obj:  cronMeta + "spec: {foo: foo, case: New}",
			old:  cronMeta + "spec: {foo: foo}",
			want: []string{`spec.case: Invalid value: "string": failed rule: [oldSelf.orValue(''), self].all(x, ['OldCase1', 'OldCase2'].exists(case, x == case))`}},
	})
}

func TestReferenceRatcheting(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.min <= self.max"
      message: min must not exceed max
    - rule: "self.min >= oldSelf.min"
      message: min must not decrease
    properties:
      min: {type: integer}
      max: {type: integer}
      name:
        type: string
        x-kubernetes-validations:
        - rule: "self.startsWith('x')"
      list:
        type: array
        items:
          type: string
          x-kubernetes-validations:
          - rule: "self != 'bad'"
      other: {type: string}
`
	runRuleCases(t, []ruleCase{
		{name: "unchanged invalid values are warnings", schema: s,
			obj: cronMeta + "spec: {min: 5, max: 1, name: y1, list: [bad], other: changed}",
			old: cronMeta + "spec: {min: 5, max: 1, name: y1, list: [bad], other: was}",
			want: []string{
				// spec changed (other), so its rule is not ratcheted.
				`spec: Invalid value: "object": min must not exceed max`,
			},
			warnings: []string{
				`spec.name: Invalid value: "string": failed rule: self.startsWith('x')`,
				// atomic list items do not correlate; the list is unchanged.
				`spec.list[0]: Invalid value: "string": failed rule: self != 'bad'`,
			}},
		{name: "all unchanged", schema: s,
			obj: cronMeta + "spec: {min: 5, max: 1, name: y1}",
			old: cronMeta + "spec: {min: 5, max: 1, name: y1}",
			warnings: []string{
				`spec: Invalid value: "object": min must not exceed max`,
				`spec.name: Invalid value: "string": failed rule: self.startsWith('x')`,
			}},
		{name: "changed invalid values fail", schema: s,
			obj: cronMeta + "spec: {min: 4, max: 1, name: y2, list: [bad, bad]}",
			old: cronMeta + "spec: {min: 5, max: 1, name: y1, list: [bad]}",
			want: []string{
				`spec: Invalid value: "object": min must not exceed max`,
				`spec: Invalid value: "object": min must not decrease`,
				`spec.name: Invalid value: "string": failed rule: self.startsWith('x')`,
				`spec.list[0]: Invalid value: "string": failed rule: self != 'bad'`,
				`spec.list[1]: Invalid value: "string": failed rule: self != 'bad'`,
			}},
	})
}

func TestReferenceCostBudget(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        items: {type: string}
        x-kubernetes-validations:
        - rule: "self.all(x, self.all(y, x.size() + y.size() >= 0))"
      a:
        type: string
        x-kubernetes-validations:
        - rule: "self.size() > 0"
      b:
        type: string
        x-kubernetes-validations:
        - rule: "self.size() > 100"
          messageExpression: "self + self + self"
`
	list := "["
	for i := range 40 {
		if i > 0 {
			list += ", "
		}
		list += "item"
	}
	list += "]"
	runRuleCases(t, []ruleCase{
		{name: "per-call limit", schema: s, perCallLimit: 1000,
			obj: cronMeta + "spec: {list: " + list + ", a: x}",
			want: []string{
				`spec.list: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x.size() + y.size() >= 0))`,
			}},
		{name: "budget", schema: s, budget: 2000,
			obj: cronMeta + "spec: {list: " + list + ", a: x}",
			want: []string{
				`spec.list: Invalid value: "array": validation failed due to running out of cost budget, no further validation rules will be run`,
			}},
		{name: "budget exhausted exactly", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.a.size() > 0"
    properties:
      a:
        type: string
        x-kubernetes-validations:
        - rule: "self.size() > 0"
`, budget: 4,
			obj: cronMeta + "spec: {a: x}",
			want: []string{
				`spec.a: Invalid value: "string": validation failed due to running out of cost budget, no further validation rules will be run`,
			}},
		{name: "messageExpression out of budget", schema: s, budget: 4,
			obj: cronMeta + "spec: {b: yy}",
			want: []string{
				`spec.b: Invalid value: "string": messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run`,
			}},
		{name: "within budget", schema: s,
			obj: cronMeta + "spec: {list: " + list + ", a: x}"},
	})
}
