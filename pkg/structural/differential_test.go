package structural

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"math/rand/v2"
	"reflect"
	"testing"
)

// richSchema exercises most of what a CRD schema can say.
const richSchema = `
type: object
properties:
  spec:
    type: object
    required: [name]
    properties:
      name: {type: string, minLength: 1, maxLength: 10, pattern: '^[a-z]+$'}
      replicas: {type: integer, minimum: 0, maximum: 5, default: 1, format: int32}
      ratio: {type: number, multipleOf: 0.5, exclusiveMaximum: true, maximum: 10}
      mode: {type: string, enum: [a, b, c], default: a}
      port:
        x-kubernetes-int-or-string: true
        anyOf: [{type: integer}, {type: string}]
        default: 80
      tags: {type: array, x-kubernetes-list-type: set, maxItems: 4, items: {type: string}}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            port: {type: integer, default: 8080, minimum: 1}
            protocol: {type: string, nullable: true, default: TCP}
      labels: {type: object, additionalProperties: {type: string, maxLength: 5}, maxProperties: 3}
      counts: {type: object, additionalProperties: {type: integer, default: 7}}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        x-kubernetes-preserve-unknown-fields: true
        properties:
          spec: {type: object, properties: {image: {type: string}}}
      raw: {type: object, x-kubernetes-preserve-unknown-fields: true}
      nested:
        type: object
        nullable: true
        properties:
          a: {type: integer, default: 3}
          b: {type: array, items: {type: object, properties: {c: {type: string, default: x}}}}
        oneOf:
        - required: [a]
        - required: [b]
      when: {type: string, format: date-time}
      choice:
        type: string
        not: {enum: [forbidden]}
      embeddedList:
        type: array
        items:
          type: object
          x-kubernetes-embedded-resource: true
          properties:
            data: {type: string}
  status:
    type: object
    properties:
      phase: {type: string, enum: [Pending, Ready]}
      conditions:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [type]
        items:
          type: object
          properties:
            type: {type: string}
            status: {type: string, enum: ["True", "False"]}
`

type gen struct{ r *rand.Rand }

var (
	genInts    = []any{int64(-1), int64(0), int64(1), int64(3), int64(5), int64(6), int64(10), int64(3000000000)}
	genFloats  = []any{0.5, 1.5, 2.0, 9.5, 10.0, 1e39}
	genStrings = []any{"", "abc", "ABC", "a/b", "2017-05-31T12:56:35Z", "forbidden", "a", "b", "Pending",
		"toolongstring", "v1", "Pod", "True", "http"}
)

func (g gen) pick(l []any) any { return l[g.r.IntN(len(l))] }

func (g gen) scalar() any {
	switch g.r.IntN(5) {
	case 0:
		return g.pick(genInts)
	case 1:
		return g.pick(genFloats)
	case 2:
		return g.r.IntN(2) == 0
	case 3:
		return nil
	}
	return g.pick(genStrings)
}

// value generates a value for s, mostly of the right shape.
func (g gen) value(s *Schema, depth int) any {
	if s == nil || g.r.IntN(8) == 0 || depth > 5 {
		if depth < 4 && g.r.IntN(4) == 0 {
			return g.object(nil, depth+1)
		}
		return g.scalar()
	}
	if len(s.enum) > 0 && g.r.IntN(2) == 0 {
		return g.pick(s.enum)
	}
	switch s.typ {
	case "object":
		return g.object(s, depth+1)
	case "array":
		n := g.r.IntN(4)
		l := make([]any, n)
		for i := range l {
			l[i] = g.value(s.items, depth+1)
		}
		if n > 1 && g.r.IntN(3) == 0 {
			l[n-1] = deepCopyJSON(l[0])
		}
		return l
	case "integer":
		return g.pick(genInts)
	case "number":
		if g.r.IntN(2) == 0 {
			return g.pick(genInts)
		}
		return g.pick(genFloats)
	case "string":
		return g.pick(genStrings)
	case "boolean":
		return g.r.IntN(2) == 0
	}
	if s.intOrString {
		if g.r.IntN(2) == 0 {
			return g.pick(genInts)
		}
		return g.pick(genStrings)
	}
	return g.scalar()
}

func (g gen) object(s *Schema, depth int) map[string]any {
	m := map[string]any{}
	if s != nil {
		for _, name := range s.propertyNames {
			if g.r.IntN(10) < 7 {
				m[name] = g.value(s.properties[name], depth)
			}
		}
		if s.additionalProperties != nil {
			for i := g.r.IntN(4); i > 0; i-- {
				m[fmt.Sprintf("k%d", g.r.IntN(5))] = g.value(s.additionalProperties, depth)
			}
		}
		if s.embeddedResource {
			if g.r.IntN(4) > 0 {
				m["apiVersion"] = g.pick([]any{"v1", "apps/v1", "a/b/c", "", int64(1)})
			}
			if g.r.IntN(4) > 0 {
				m["kind"] = g.pick([]any{"Pod", "pod", "Bad_Kind", ""})
			}
			if g.r.IntN(2) == 0 {
				m["metadata"] = g.metadata()
			}
		}
	}
	if g.r.IntN(5) == 0 {
		m[fmt.Sprintf("unknown%d", g.r.IntN(3))] = g.scalar()
	}
	return m
}

func (g gen) metadata() any {
	switch g.r.IntN(8) {
	case 0:
		return map[string]any{"name": "n", "labels": "not-a-map"}
	case 1:
		return map[string]any{"name": "Bad_Name", "unknownMeta": int64(1), "annotations": map[string]any{"a": "b"}}
	case 2:
		return map[string]any{"generateName": "gen-", "namespace": "ns", "creationTimestamp": "2017-05-31T12:56:35.5Z"}
	}
	return map[string]any{"name": "good", "labels": map[string]any{"app": "x"}, "finalizers": []any{"a/b"}}
}

func (g gen) resource(s *Schema) map[string]any {
	obj := g.object(s, 0)
	obj["apiVersion"] = "stable.example.com/v1"
	obj["kind"] = "CronTab"
	obj["metadata"] = map[string]any{"name": "obj", "namespace": "default", "extra": "x"}
	return obj
}

// mutate changes a few values of a copy of obj (for update tests).
func (g gen) mutate(s *Schema, obj map[string]any) map[string]any {
	out := deepCopy(obj)
	spec, ok := out["spec"].(map[string]any)
	if !ok {
		return out
	}
	specSchema := s.properties["spec"]
	for _, name := range specSchema.propertyNames {
		if g.r.IntN(6) == 0 {
			spec[name] = g.value(specSchema.properties[name], 1)
		}
	}
	return out
}

func TestDifferentialRandom(t *testing.T) {
	props := parseProps(t, richSchema)
	s := mustCompile(t, props)
	up := newUpstream(t, props)
	g := gen{rand.New(rand.NewPCG(1, 2))}
	iterations := 3000
	if testing.Short() {
		iterations = 300
	}
	var errCases, validCases int
	for i := range iterations {
		orig := g.resource(s)

		ours, theirs := deepCopy(orig), deepCopy(orig)
		ourUnknown, ourErr := Normalize(ours, s, false)
		theirUnknown, theirErr := up.decode(theirs, false)
		if (ourErr != nil) != (theirErr != nil) {
			t.Fatalf("#%d decode error: ours %v, upstream %v\nobject %v", i, ourErr, theirErr, orig)
		}
		if ourErr != nil {
			continue
		}
		Default(ours, s)
		if !reflect.DeepEqual(ours, theirs) {
			t.Fatalf("#%d decoded objects differ:\n  ours %v\nupstream %v\nobject %v", i, ours, theirs, orig)
		}
		if !reflect.DeepEqual(ourUnknown, theirUnknown) && (len(ourUnknown) > 0 || len(theirUnknown) > 0) {
			t.Fatalf("#%d unknown fields differ:\n  ours %q\nupstream %q", i, ourUnknown, theirUnknown)
		}

		got := errorStrings(Validate(deepCopy(ours), s))
		want := errorStrings(up.validate(deepCopy(theirs)))
		if !reflect.DeepEqual(sortedStrings(got), sortedStrings(want)) {
			t.Fatalf("#%d errors differ:\n  ours %q\nupstream %q\nobject %v", i, got, want, ours)
		}
		if len(got) > 0 {
			errCases++
		} else {
			validCases++
		}

		// Reading from storage drops malformed metadata instead of failing.
		ours2, theirs2 := deepCopy(orig), deepCopy(orig)
		u1, err1 := Normalize(ours2, s, true)
		u2, err2 := up.decode(theirs2, true)
		if err1 != nil || err2 != nil {
			t.Fatalf("#%d decode with dropInvalid: ours %v, upstream %v", i, err1, err2)
		}
		Default(ours2, s)
		if !reflect.DeepEqual(ours2, theirs2) || !reflect.DeepEqual(u1, u2) {
			t.Fatalf("#%d dropInvalid decode differs:\n  ours %v %q\nupstream %v %q", i, ours2, u1, theirs2, u2)
		}

		// Update: the old object is the decoded one, the new a mutation.
		updated := g.mutate(s, ours)
		got = errorStrings(ValidateUpdate(deepCopy(updated), deepCopy(ours), s))
		want = errorStrings(up.validateUpdate(deepCopy(updated), deepCopy(ours)))
		if !reflect.DeepEqual(sortedStrings(got), sortedStrings(want)) {
			t.Fatalf("#%d update errors differ:\n  ours %q\nupstream %q\nnew %v\nold %v", i, got, want, updated, ours)
		}
		// Status update: .status alone against its own schema.
		if st, ok := updated["status"]; ok {
			got = errorStrings(ValidateSchema(field.NewPath("status"), deepCopyJSON(st), s.Property("status"), WithRatcheting(deepCopyJSON(ours["status"]))))
			want = errorStrings(up.validateStatus(deepCopyJSON(st), deepCopyJSON(ours["status"])))
			if !reflect.DeepEqual(sortedStrings(got), sortedStrings(want)) {
				t.Fatalf("#%d status errors differ:\n  ours %q\nupstream %q\nnew %v\nold %v", i, got, want, st, ours["status"])
			}
		}
	}
	t.Logf("%d invalid, %d valid objects", errCases, validCases)
}
