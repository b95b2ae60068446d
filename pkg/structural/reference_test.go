package structural

import (
	"reflect"
	"testing"
)

// The examples of the reference page (testdata/reference), our spec.

func TestReferencePruning(t *testing.T) {
	s := mustCompile(t, parseCRDSchema(t, readFile(t, "crontab-basic-crd.yaml")))
	obj := parseObject(t, readFile(t, "pruning-in.yaml"))
	unknown, err := Normalize(obj, s, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := parseObject(t, readFile(t, "pruning-out.yaml")); !reflect.DeepEqual(obj, want) {
		t.Errorf("pruned to %v, want %v", obj, want)
	}
	if want := []string{"spec.someRandomField"}; !reflect.DeepEqual(unknown, want) {
		t.Errorf("unknown fields %q, want %q", unknown, want)
	}
}

func TestReferenceControllingPruning(t *testing.T) {
	s := mustCompile(t, parseProps(t, readFile(t, "controlling-pruning-schema.yaml")))
	obj := parseObject(t, readFile(t, "controlling-pruning-in.yaml"))
	unknown := Prune(obj, s)
	if want := parseObject(t, readFile(t, "controlling-pruning-out.yaml")); !reflect.DeepEqual(obj, want) {
		t.Errorf("pruned to %v, want %v", obj, want)
	}
	if want := []string{"json.spec.something"}; !reflect.DeepEqual(unknown, want) {
		t.Errorf("unknown fields %q, want %q", unknown, want)
	}
}

func TestReferenceDefaulting(t *testing.T) {
	s := mustCompile(t, parseCRDSchema(t, readFile(t, "crontab-defaulting-crd.yaml")))
	obj := parseObject(t, readFile(t, "defaulting-in.yaml"))
	if _, err := Normalize(obj, s, false); err != nil {
		t.Fatal(err)
	}
	Default(obj, s)
	if want := parseObject(t, readFile(t, "defaulting-out.yaml")); !reflect.DeepEqual(obj, want) {
		t.Errorf("defaulted to %v, want %v", obj, want)
	}
	if errs := Validate(obj, s); len(errs) > 0 {
		t.Errorf("defaulted object invalid: %v", errs)
	}
}

func TestReferenceNullable(t *testing.T) {
	s := mustCompile(t, parseProps(t, readFile(t, "nullable-schema.yaml")))
	obj := parseObject(t, readFile(t, "nullable-in.yaml"))
	Prune(obj, s)
	Default(obj, s)
	if want := parseObject(t, readFile(t, "nullable-out.yaml")); !reflect.DeepEqual(obj, want) {
		t.Errorf("got %v, want %v", obj, want)
	}
	if errs := Validate(obj, s); len(errs) > 0 {
		t.Errorf("invalid: %v", errs)
	}
}

func TestReferenceValidation(t *testing.T) {
	s := mustCompile(t, parseCRDSchema(t, readFile(t, "../crds/crontab-validation.yaml")))

	obj := parseObject(t, readFile(t, "validation-invalid.yaml"))
	if _, err := Normalize(obj, s, false); err != nil {
		t.Fatal(err)
	}
	Default(obj, s)
	got := errorStrings(Validate(obj, s))
	want := []string{
		`spec.cronSpec: Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'`,
		`spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %q\nwant %q", got, want)
	}

	obj = parseObject(t, readFile(t, "validation-valid.yaml"))
	if errs := Validate(obj, s); len(errs) > 0 {
		t.Errorf("valid object rejected: %v", errs)
	}
}

func TestReferenceIntOrString(t *testing.T) {
	s := mustCompile(t, parseProps(t, readFile(t, "intorstring-schema.yaml")))
	for _, ok := range []string{"foo: 42", "foo: forty-two", "foo: 2.0"} {
		if errs := Validate(parseObject(t, ok), s); len(errs) > 0 {
			t.Errorf("%s: %v", ok, errs)
		}
	}
	got := errorStrings(Validate(parseObject(t, "foo: true"), s))
	want := []string{`foo: Invalid value: "boolean": foo in body must be of type integer,string: "boolean"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReferenceRawExtension(t *testing.T) {
	s := mustCompile(t, parseProps(t, readFile(t, "rawextension-schema.yaml")))
	obj := parseObject(t, `
foo:
  apiVersion: v1
  kind: Pod
  metadata:
    name: p
    unknownMetaField: x
    labels: {a: b}
  spec:
    containers: [{name: c, image: i}]
`)
	unknown, err := Normalize(obj, s, false)
	if err != nil {
		t.Fatal(err)
	}
	want := parseObject(t, `
foo:
  apiVersion: v1
  kind: Pod
  metadata:
    name: p
    labels: {a: b}
  spec:
    containers: [{name: c, image: i}]
`)
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("got %v, want %v", obj, want)
	}
	if w := []string{"foo.metadata.unknownMetaField"}; !reflect.DeepEqual(unknown, w) {
		t.Errorf("unknown %q, want %q", unknown, w)
	}
	if errs := Validate(obj, s); len(errs) > 0 {
		t.Errorf("invalid: %v", errs)
	}

	got := errorStrings(Validate(parseObject(t, `foo: {metadata: {name: "a/b"}}`), s))
	wantErrs := []string{
		`foo.apiVersion: Required value: must not be empty`,
		`foo.kind: Required value: must not be empty`,
		`foo.metadata.name: Invalid value: "a/b": may not contain '/'`,
	}
	if !reflect.DeepEqual(got, wantErrs) {
		t.Errorf("got %q\nwant %q", got, wantErrs)
	}
}
