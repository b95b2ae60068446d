package celrules

// Test helpers: a schema and its objects in YAML, validated by this
// package and by upstream's CEL validator (k8s.io/apiextensions-apiserver,
// test-only) on the same input.

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	upstreamcel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/warning"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/structural"
)

func parseSchema(t testing.TB, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var p apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(y), &p); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return &p
}

func parseObject(t testing.TB, y string) any {
	t.Helper()
	if y == "" {
		return nil
	}
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("object: %v", err)
	}
	var v any
	if err := utiljson.Unmarshal(j, &v); err != nil {
		t.Fatalf("object: %v", err)
	}
	return v
}

// ours is this package's validation of obj (old on update).
type ours struct {
	v *Validator
	s *structural.Schema
}

func compileOurs(t testing.TB, props *apiextensionsv1.JSONSchemaProps, opts ...CompileOption) *ours {
	t.Helper()
	v, err := Compile(props, opts...)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	s, err := structural.Compile(props)
	if err != nil {
		t.Fatalf("structural.Compile: %v", err)
	}
	return &ours{v: v, s: s}
}

func (o *ours) validate(obj, old any, budget int64) Result {
	var corr *structural.Correlation
	if old != nil {
		corr = structural.NewCorrelation(obj, old, o.s)
	}
	return o.v.Validate(context.Background(), nil, obj, old, corr, budget)
}

// upstream is upstream's CEL validator of the same schema.
type upstream struct {
	v *upstreamcel.Validator
	s *structuralschema.Structural
}

func compileUpstream(t testing.TB, props *apiextensionsv1.JSONSchemaProps, perCallLimit uint64) *upstream {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		t.Fatal(err)
	}
	return &upstream{v: upstreamcel.NewValidator(s, true, perCallLimit), s: s}
}

type recorder struct {
	mu       sync.Mutex
	warnings []string
}

func (r *recorder) AddWarning(_, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, text)
}

func (u *upstream) validate(obj, old any, budget int64) Result {
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)
	var opts []upstreamcel.Option
	if old != nil {
		opts = append(opts, upstreamcel.WithRatcheting(common.NewCorrelatedObject(obj, old, &model.Structural{Structural: u.s})))
	}
	errs, remaining := u.v.Validate(ctx, nil, u.s, obj, old, budget, opts...)
	return Result{Errors: errs, Warnings: rec.warnings, RemainingBudget: remaining}
}

func errStrings(r Result) []string {
	var out []string
	for _, e := range r.Errors {
		out = append(out, normalizeTypeNames(fielderr.Error(e)))
	}
	return out
}

// valueRE matches the value of an Invalid or Duplicate error: a quoted
// string, a number, a boolean or null, or none (omitted).
var valueRE = regexp.MustCompile(`^(.*?: (?:Invalid|Duplicate) value)(?:: (?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null))?(: |$)`)

// withoutValues drops the values of Invalid and Duplicate errors. The
// upstream library this module builds with (v0.37) reports the failing
// value of a rule (omitted for objects and arrays) where upstream v1.33,
// the specification, reports the schema's type name ("object", "string",
// ...); the cases' want lists check the v1.33 values, the comparison with
// the library everything else.
func withoutValues(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = valueRE.ReplaceAllString(s, "$1$2")
	}
	return out
}

var selfTypeRE = regexp.MustCompile(`selfType\d+`)

// normalizeTypeNames drops the unique number of self types (upstream
// derives it from the clock).
func normalizeTypeNames(s string) string {
	return selfTypeRE.ReplaceAllString(s, "selfType")
}

// sameSet reports whether a and b hold the same strings (upstream visits
// map keys in random order).
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func show(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return "\n\t" + strings.Join(l, "\n\t")
}
