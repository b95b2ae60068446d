package celrules

// The examples of the reference page's "Validation rules" section (and
// the cases around them), each checked against its expected errors and
// against upstream's CEL validator on the same schema and objects.

import (
	"testing"
)

type ruleCase struct {
	name   string
	schema string
	obj    string
	old    string // update when set
	want   []string
	// warnings are the failures ratcheting excused.
	warnings []string
	// budget (default RuntimeCostBudget) and perCallLimit (default
	// PerCallLimit).
	budget       int64
	perCallLimit uint64
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			props := parseSchema(t, tc.schema)
			limit := tc.perCallLimit
			if limit == 0 {
				limit = PerCallLimit
			}
			budget := tc.budget
			if budget == 0 {
				budget = RuntimeCostBudget
			}
			o := compileOurs(t, props, WithPerCallLimit(limit))
			u := compileUpstream(t, props, limit)
			obj, old := parseObject(t, tc.obj), parseObject(t, tc.old)
			got := o.validate(obj, old, budget)
			want := u.validate(parseObject(t, tc.obj), parseObject(t, tc.old), budget)
			if !sameSet(errStrings(got), tc.want) {
				t.Errorf("errors:%s\nwant:%s", show(errStrings(got)), show(tc.want))
			}
			if !sameSet(got.Warnings, tc.warnings) {
				t.Errorf("warnings:%s\nwant:%s", show(got.Warnings), show(tc.warnings))
			}
			if !sameSet(withoutValues(errStrings(got)), withoutValues(errStrings(want))) || !sameSet(withoutValues(got.Warnings), withoutValues(want.Warnings)) {
				t.Errorf("differs from upstream:\nerrors:%s\nupstream:%s\nwarnings:%s\nupstream:%s",
					show(errStrings(got)), show(errStrings(want)), show(got.Warnings), show(want.Warnings))
			}
			if (got.RemainingBudget < 0) != (want.RemainingBudget < 0) {
				t.Errorf("remaining budget %d, upstream %d", got.RemainingBudget, want.RemainingBudget)
			}
		})
	}
}

const replicasSchema = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.minReplicas <= self.replicas"
      message: "replicas should be greater than or equal to minReplicas."
    - rule: "self.replicas <= self.maxReplicas"
      message: "replicas should be smaller than or equal to maxReplicas."
    properties:
      minReplicas: {type: integer}
      replicas: {type: integer}
      maxReplicas: {type: integer}
    required: [minReplicas, replicas, maxReplicas]
`

const cronMeta = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: my-new-cron-object, generateName: my-}\n"

func TestReferenceScoping(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "object with messages", schema: replicasSchema,
			obj:  cronMeta + "spec: {minReplicas: 0, replicas: 20, maxReplicas: 10}",
			want: []string{`spec: Invalid value: "object": replicas should be smaller than or equal to maxReplicas.`}},
		{name: "object ok", schema: replicasSchema,
			obj: cronMeta + "spec: {minReplicas: 0, replicas: 5, maxReplicas: 10}"},
		{name: "object without message", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.replicas <= self.maxReplicas"
    properties:
      replicas: {type: integer}
      maxReplicas: {type: integer}
`, obj: cronMeta + "spec: {replicas: 20, maxReplicas: 10}",
			want: []string{`spec: Invalid value: "object": failed rule: self.replicas <= self.maxReplicas`}},
		{name: "root with spec and status", schema: `
type: object
x-kubernetes-validations:
- rule: "self.status.availableReplicas >= self.spec.minReplicas"
properties:
  spec:
    type: object
    properties:
      minReplicas: {type: integer}
  status:
    type: object
    properties:
      availableReplicas: {type: integer}
`, obj: cronMeta + "spec: {minReplicas: 3}\nstatus: {availableReplicas: 2}",
			want: []string{`<nil>: Invalid value: "object": failed rule: self.status.availableReplicas >= self.spec.minReplicas`}},
		{name: "root apiVersion kind name generateName", schema: `
type: object
x-kubernetes-validations:
- rule: "self.apiVersion == 'stable.example.com/v1' && self.kind == 'CronTab'"
- rule: "self.metadata.name.startsWith(self.spec.prefix)"
- rule: "self.metadata.generateName == 'other-'"
properties:
  spec:
    type: object
    properties:
      prefix: {type: string}
`, obj: cronMeta + "spec: {prefix: your-}",
			want: []string{
				`<nil>: Invalid value: "object": failed rule: self.metadata.name.startsWith(self.spec.prefix)`,
				`<nil>: Invalid value: "object": failed rule: self.metadata.generateName == 'other-'`,
			}},
		{name: "has on object", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "has(self.foo)"
    properties:
      foo: {type: integer}
      bar: {type: integer}
`, obj: cronMeta + "spec: {bar: 1}",
			want: []string{`spec: Invalid value: "object": failed rule: has(self.foo)`}},
		{name: "map", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self['xyz'].foo > 0"
    additionalProperties:
      type: object
      properties:
        foo: {type: integer}
`, obj: cronMeta + "spec: {xyz: {foo: 0}, abc: {foo: 1}}",
			want: []string{`spec: Invalid value: "object": failed rule: self['xyz'].foo > 0`}},
		{name: "map missing key", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self['xyz'].foo > 0"
    additionalProperties:
      type: object
      properties:
        foo: {type: integer}
`, obj: cronMeta + "spec: {abc: {foo: 1}}",
			want: []string{"spec: Invalid value: \"object\": no such key: xyz evaluating rule: self['xyz'].foo > 0"}},
		{name: "array", schema: `
type: object
properties:
  foo:
    type: array
    x-kubernetes-validations:
    - rule: "size(self) == 1"
    items: {type: string}
`, obj: cronMeta + "foo: [a, b]",
			want: []string{`foo: Invalid value: "array": failed rule: size(self) == 1`}},
		{name: "scalar", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      foo:
        type: integer
        x-kubernetes-validations:
        - rule: "self > 0"
`, obj: cronMeta + "spec: {foo: -3}",
			want: []string{`spec.foo: Invalid value: "integer": failed rule: self > 0`}},
		{name: "scalar string", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      name:
        type: string
        x-kubernetes-validations:
        - rule: "self.startsWith('kube')"
`, obj: cronMeta + "spec: {name: cube}",
			want: []string{`spec.name: Invalid value: "string": failed rule: self.startsWith('kube')`}},
		{name: "map of objects", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.components['Widget'].priority < 10"
    properties:
      components:
        type: object
        additionalProperties:
          type: object
          properties:
            priority: {type: integer}
`, obj: cronMeta + "spec: {components: {Widget: {priority: 10}}}",
			want: []string{`spec: Invalid value: "object": failed rule: self.components['Widget'].priority < 10`}},
		{name: "list of integers", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.values.all(value, value >= 0 && value < 100)"
    properties:
      values:
        type: array
        items: {type: integer}
`, obj: cronMeta + "spec: {values: [1, 100]}",
			want: []string{`spec: Invalid value: "object": failed rule: self.values.all(value, value >= 0 && value < 100)`}},
		{name: "rules on items and map values", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        items:
          type: integer
          x-kubernetes-validations:
          - rule: "self % 2 == 0"
            message: must be even
      map:
        type: object
        additionalProperties:
          type: string
          x-kubernetes-validations:
          - rule: "self != ''"
`, obj: cronMeta + "spec: {list: [2, 3, 4, 5], map: {a: '', b: x, 'c.d': ''}}",
			want: []string{
				`spec.list[1]: Invalid value: "integer": must be even`,
				`spec.list[3]: Invalid value: "integer": must be even`,
				`spec.map[a]: Invalid value: "string": failed rule: self != ''`,
				`spec.map[c.d]: Invalid value: "string": failed rule: self != ''`,
			}},
		{name: "null values are not validated", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      foo:
        type: string
        nullable: true
        x-kubernetes-validations:
        - rule: "self == 'x'"
`, obj: cronMeta + "spec: {foo: null}"},
		{name: "null field is absent", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "!has(self.foo)"
    properties:
      foo: {type: string, nullable: true}
`, obj: cronMeta + "spec: {foo: null}"},
		{name: "embedded resource", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
        x-kubernetes-validations:
        - rule: "self.kind == 'Pod' && self.apiVersion == 'v1' && self.metadata.name == 'p'"
`, obj: cronMeta + "spec: {template: {apiVersion: v1, kind: Pod, metadata: {name: q}, spec: {x: 1}}}",
			want: []string{`spec.template: Invalid value: "object": failed rule: self.kind == 'Pod' && self.apiVersion == 'v1' && self.metadata.name == 'p'`}},
		{name: "preserved unknown fields are not accessible", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    x-kubernetes-validations:
    - rule: "self.known == 1"
    - rule: "self.unknown == 2"
    properties:
      known: {type: integer}
`, obj: cronMeta + "spec: {known: 1, unknown: 2}",
			want: []string{`spec: Invalid value: "object": rule compile error: compilation failed: ERROR: <input>:1:5: undefined field 'unknown'
 | self.unknown == 2
 | ....^`}},
		{name: "unknown-type property is left out", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.a == 1"
    - rule: "has(self.any)"
    properties:
      a: {type: integer}
      any:
        x-kubernetes-preserve-unknown-fields: true
`, obj: cronMeta + "spec: {a: 1, any: {b: 2}}",
			want: []string{`spec: Invalid value: "object": rule compile error: compilation failed: ERROR: <input>:1:4: undefined field 'any'
 | has(self.any)
 | ...^`}},
	})
}

func TestReferenceRuleExamples(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    properties:
      minReplicas: {type: integer}
      replicas: {type: integer}
      maxReplicas: {type: integer}
      stateCounts:
        type: object
        additionalProperties: {type: integer}
      list1: {type: array, items: {type: string}}
      list2: {type: array, items: {type: string}}
      map1:
        type: object
        additionalProperties: {type: string}
      envars:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            value: {type: string}
      created: {type: string, format: date-time}
      ttl: {type: string, format: duration}
      expired: {type: string, format: date-time}
      health: {type: string}
      widgets:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [key]
        items:
          type: object
          required: [key]
          properties:
            key: {type: string}
            foo: {type: integer}
      intOrString:
        x-kubernetes-int-or-string: true
      prefix: {type: string}
      set1: {type: array, x-kubernetes-list-type: set, items: {type: string}}
      set2: {type: array, x-kubernetes-list-type: set, items: {type: string}}
      names: {type: array, x-kubernetes-list-type: set, items: {type: string}}
      details:
        type: object
        additionalProperties: {type: string}
      primary: {type: string}
      clusters:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
    x-kubernetes-validations:
    - rule: "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas"
    - rule: "'Available' in self.stateCounts"
    - rule: "(size(self.list1) == 0) != (size(self.list2) == 0)"
    - rule: "!('MY_KEY' in self.map1) || self.map1['MY_KEY'].matches('^[a-zA-Z]*$')"
    - rule: "self.envars.filter(e, e.name == 'MY_ENV').all(e, e.value.matches('^[a-zA-Z]*$'))"
    - rule: "has(self.expired) && self.created + self.ttl < self.expired"
    - rule: "self.health.startsWith('ok')"
    - rule: "self.widgets.exists(w, w.key == 'x' && w.foo < 10)"
    - rule: "type(self.intOrString) == string ? self.intOrString == '100%' : self.intOrString == 1000"
    - rule: "self.set1.all(e, !(e in self.set2))"
    - rule: "size(self.names) == size(self.details) && self.names.all(n, n in self.details)"
    - rule: "size(self.clusters.filter(c, c.name == self.primary)) == 1"
`
	const valid = cronMeta + `spec:
  minReplicas: 1
  replicas: 2
  maxReplicas: 3
  stateCounts: {Available: 1}
  list1: [a]
  list2: []
  map1: {MY_KEY: abc}
  envars: [{name: MY_ENV, value: abc}, {name: OTHER, value: "1"}]
  created: "2024-01-01T00:00:00Z"
  ttl: 1h
  expired: "2024-01-01T02:00:00Z"
  health: okay
  widgets: [{key: x, foo: 3}]
  intOrString: 1000
  set1: [a, b]
  set2: [c]
  names: [a, b]
  details: {a: '1', b: '2'}
  primary: one
  clusters: [{name: one}, {name: two}]
`
	const invalid = cronMeta + `spec:
  minReplicas: 3
  replicas: 2
  maxReplicas: 3
  stateCounts: {Unavailable: 1}
  list1: [a]
  list2: [b]
  map1: {MY_KEY: "a1"}
  envars: [{name: MY_ENV, value: "1"}]
  created: "2024-01-01T00:00:00Z"
  ttl: 3h
  expired: "2024-01-01T02:00:00Z"
  health: bad
  widgets: [{key: x, foo: 30}]
  intOrString: "50%"
  set1: [a, b]
  set2: [b]
  names: [a, b]
  details: {a: '1', c: '2'}
  primary: three
  clusters: [{name: one}, {name: two}]
`
	var want []string
	for _, r := range parseSchema(t, s).Properties["spec"].XValidations {
		want = append(want, `spec: Invalid value: "object": failed rule: `+r.Rule)
	}
	runRuleCases(t, []ruleCase{
		{name: "valid", schema: s, obj: valid},
		{name: "invalid", schema: s, obj: invalid, want: want},
	})
}

func TestReferenceEscaping(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "escaped property names", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.__namespace__ > 0"
    - rule: "self.x__dash__prop > 0"
    - rule: "self.redact__underscores__d > 0"
    - rule: "self.a__dot__b > 0 && self.a__slash__b > 0"
    - rule: "self.__if__ > 0 && self.sprint > 0"
    properties:
      namespace: {type: integer}
      x-prop: {type: integer}
      redact__d: {type: integer}
      a.b: {type: integer}
      a/b: {type: integer}
      if: {type: integer}
      sprint: {type: integer}
`, obj: cronMeta + "spec: {namespace: 0, x-prop: 0, redact__d: 0, a.b: 1, a/b: 0, if: 1, sprint: 1}",
			want: []string{
				`spec: Invalid value: "object": failed rule: self.__namespace__ > 0`,
				`spec: Invalid value: "object": failed rule: self.x__dash__prop > 0`,
				`spec: Invalid value: "object": failed rule: self.redact__underscores__d > 0`,
				`spec: Invalid value: "object": failed rule: self.a__dot__b > 0 && self.a__slash__b > 0`,
			}},
		{name: "unescapable property keeps its own rules", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      "1abc":
        type: string
        x-kubernetes-validations:
        - rule: "self == 'x'"
`, obj: cronMeta + "spec: {'1abc': yy}",
			want: []string{`spec.1abc: Invalid value: "string": failed rule: self == 'x'`}},
		{name: "map keys are not escaped", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "'a-b' in self && self['a-b'] == 1 && self.all(k, k != 'x__dash__y')"
    additionalProperties: {type: integer}
`, obj: cronMeta + "spec: {a-b: 1, x-y: 2}"},
	})
}

func TestReferenceListTypes(t *testing.T) {
	const s = `
type: object
properties:
  spec:
    type: object
    properties:
      set: {type: array, x-kubernetes-list-type: set, items: {type: integer}}
      atomic: {type: array, items: {type: integer}}
      map:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [k]
        items:
          type: object
          required: [k]
          properties:
            k: {type: string}
            v: {type: integer}
`
	rules := func(rs ...string) string {
		out := s + "    x-kubernetes-validations:\n"
		for _, r := range rs {
			out += "    - rule: " + quote(r) + "\n"
		}
		return out
	}
	obj := cronMeta + "spec: {set: [1, 2], atomic: [1, 2], map: [{k: a, v: 1}, {k: b, v: 2}]}"
	runRuleCases(t, []ruleCase{
		{name: "set equality ignores order", schema: rules("self.set == [2, 1]", "self.atomic == [2, 1]"), obj: obj,
			want: []string{`spec: Invalid value: "object": failed rule: self.atomic == [2, 1]`}},
		{name: "set union", schema: rules("self.set + [3, 1, 4] == [1, 2, 3, 4]", "(self.set + [3, 1]).size() == 3"), obj: obj},
		{name: "set union keeps order", schema: rules("(self.set + [3, 1])[2] == 3"), obj: obj},
		{name: "atomic concatenation", schema: rules("self.atomic + [1] == [1, 2, 1]"), obj: obj},
		{name: "map equality ignores order", schema: rules("self.map == oldSelf.map", "self.set == oldSelf.set", "self.atomic == oldSelf.atomic"), obj: obj,
			old:  cronMeta + "spec: {set: [2, 1], atomic: [2, 1], map: [{k: b, v: 2}, {k: a, v: 1}]}",
			want: []string{`spec: Invalid value: "object": failed rule: self.atomic == oldSelf.atomic`}},
		{name: "map merge", schema: rules(
			"(oldSelf.map + self.map).size() == 3",
			"(oldSelf.map + self.map)[0].k == 'c' && (oldSelf.map + self.map)[0].v == 3",
			"(oldSelf.map + self.map)[1].k == 'a' && (oldSelf.map + self.map)[1].v == 1",
			"(oldSelf.map + self.map)[2].k == 'b'",
			"(oldSelf.set + self.set) == [3, 1, 2] && (oldSelf.set + self.set)[2] == 2"), obj: obj,
			old: cronMeta + "spec: {set: [3, 1], atomic: [], map: [{k: c, v: 3}, {k: a, v: 9}]}"},
	})
}

func quote(s string) string {
	return `"` + s + `"`
}

func TestReferenceTypeMapping(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "types", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "type(self.num) == double && self.num == 1.0"
    - rule: "type(self.int) == int && self.int == 2"
    - rule: "type(self.bool) == bool && self.bool"
    - rule: "type(self.str) == string"
    - rule: "type(self.bytes) == bytes && self.bytes == b'hello'"
    - rule: "type(self.date) == google.protobuf.Timestamp && self.date == timestamp('2024-02-03T00:00:00Z')"
    - rule: "type(self.datetime) == google.protobuf.Timestamp && self.datetime.getHours() == 4"
    - rule: "type(self.duration) == google.protobuf.Duration && self.duration == duration('90s')"
    - rule: "type(self.ios) == int && self.ios == 3"
    - rule: "type(self.ios2) == string && self.ios2 == '3%'"
    - rule: "type(self.list) == list && type(self.obj) == map && type(self.map) == map"
    properties:
      num: {type: number}
      int: {type: integer, format: int32}
      bool: {type: boolean}
      str: {type: string}
      bytes: {type: string, format: byte}
      date: {type: string, format: date}
      datetime: {type: string, format: date-time}
      duration: {type: string, format: duration}
      ios: {x-kubernetes-int-or-string: true}
      ios2: {x-kubernetes-int-or-string: true}
      list: {type: array, items: {type: string}}
      obj: {type: object, properties: {a: {type: string}}}
      map: {type: object, additionalProperties: {type: string}}
`, obj: cronMeta + `spec:
  num: 1
  int: 2
  bool: true
  str: s
  bytes: aGVsbG8=
  date: "2024-02-03"
  datetime: "2024-02-03T04:05:06Z"
  duration: 1m30s
  ios: 3
  ios2: 3%
  list: [a]
  obj: {a: b}
  map: {c: d}
`},
		{name: "int-or-string runtime overload error", schema: `
type: object
properties:
  spec:
    type: object
    properties:
      ios:
        x-kubernetes-int-or-string: true
        x-kubernetes-validations:
        - rule: "self + 1 > 2"
`, obj: cronMeta + "spec: {ios: '5'}",
			want: []string{`spec.ios: Invalid value: "": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self + 1 > 2`}},
		{name: "runtime errors", schema: `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.a / self.b > 0"
    - rule: "self.list[3] == 'x'"
      message: fourth must be x
    - rule: "self.a + 9223372036854775807 > 0"
    properties:
      a: {type: integer}
      b: {type: integer}
      list: {type: array, items: {type: string}}
`, obj: cronMeta + "spec: {a: 1, b: 0, list: [a]}",
			want: []string{
				`spec: Invalid value: "object": division by zero evaluating rule: self.a / self.b > 0`,
				`spec: Invalid value: "object": index out of bounds: 3 evaluating rule: fourth must be x`,
				`spec: Invalid value: "object": integer overflow evaluating rule: self.a + 9223372036854775807 > 0`,
			}},
	})
}
