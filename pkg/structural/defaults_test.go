package structural

import (
	"reflect"
	"testing"
)

// Defaults are pruned when compiled, in the context of the whole object, as
// upstream's PruneDefaults: unknown fields go, metadata of embedded
// resources is normalised, preserve-unknown-fields subtrees are kept.
const defaultsSchema = `
type: object
properties:
  spec:
    type: object
    default: {known: k, unknown: u}
    properties:
      known: {type: string}
      list:
        type: array
        default: [{a: 1, b: 2}]
        items:
          type: object
          properties:
            a: {type: integer}
            c: {type: string, default: c}
      map:
        type: object
        default: {x: {a: 1, z: 3}}
        additionalProperties:
          type: object
          properties:
            a: {type: integer}
      raw:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        default: {anything: {goes: 1}}
      embedded:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          data: {type: string}
        default:
          apiVersion: v1
          kind: ConfigMap
          metadata: {name: cm, bogus: x, creationTimestamp: "2020-01-01T00:00:00.5Z"}
          data: d
          extra: e
      nullableWithDefault: {type: string, nullable: true, default: n}
`

func TestPrunedDefaultsDifferential(t *testing.T) {
	props := parseProps(t, defaultsSchema)
	s := mustCompile(t, props)
	up := newUpstream(t, props)
	for _, src := range []string{
		`{}`,
		`{spec: {}}`,
		`{spec: {list: [{}, null, {a: 2}], map: {y: {}, z: null}, nullableWithDefault: null}}`,
		`{spec: {raw: null, embedded: null, known: null}}`,
	} {
		ours, theirs := parseObject(t, src), parseObject(t, src)
		if _, err := Normalize(ours, s, false); err != nil {
			t.Fatal(err)
		}
		Default(ours, s)
		if _, err := up.decode(theirs, false); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("%s:\n    ours %v\nupstream %v", src, ours, theirs)
		}
	}
	// The default itself is pruned.
	spec := s.Property("spec")
	if want := map[string]any{"known": "k"}; !reflect.DeepEqual(spec.def, want) {
		t.Errorf("spec default %v, want %v", spec.def, want)
	}
}

// Defaults are deep-copied: changing one defaulted object leaves the next
// one alone.
func TestDefaultsDeepCopied(t *testing.T) {
	s := mustCompile(t, parseProps(t, defaultsSchema))
	a := map[string]any{}
	Default(a, s)
	a["spec"].(map[string]any)["list"].([]any)[0].(map[string]any)["a"] = int64(99)
	b := map[string]any{}
	Default(b, s)
	if got := b["spec"].(map[string]any)["list"].([]any)[0].(map[string]any)["a"]; got != int64(1) {
		t.Errorf("default shared between objects: %v", got)
	}
}
