package celconv

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func tutorialCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile("../../examples/crontab-cel-conversion/crontab-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

func withRules(t testing.TB, rules string) *apiextensionsv1.CustomResourceDefinition {
	crd := tutorialCRD(t)
	crd.Annotations[Annotation] = rules
	return crd
}

func obj(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The objects of the versions tutorial's ConversionReview example, and the
// converted objects of its response.
const (
	localV1beta1  = `{"kind":"CronTab","apiVersion":"example.com/v1beta1","metadata":{"creationTimestamp":"2019-09-04T14:03:02Z","name":"local-crontab","namespace":"default","resourceVersion":"143","uid":"3415a7fc-162b-4300-b5da-fd6083580d66"},"hostPort":"localhost:1234"}`
	localV1       = `{"kind":"CronTab","apiVersion":"example.com/v1","metadata":{"creationTimestamp":"2019-09-04T14:03:02Z","name":"local-crontab","namespace":"default","resourceVersion":"143","uid":"3415a7fc-162b-4300-b5da-fd6083580d66"},"host":"localhost","port":"1234"}`
	remoteV1beta1 = `{"kind":"CronTab","apiVersion":"example.com/v1beta1","metadata":{"creationTimestamp":"2019-09-03T13:02:01Z","name":"remote-crontab","resourceVersion":"12893","uid":"359a83ec-b575-460d-b553-d859cedde8a0"},"hostPort":"example.com:2345"}`
	remoteV1      = `{"kind":"CronTab","apiVersion":"example.com/v1","metadata":{"creationTimestamp":"2019-09-03T13:02:01Z","name":"remote-crontab","resourceVersion":"12893","uid":"359a83ec-b575-460d-b553-d859cedde8a0"},"host":"example.com","port":"2345"}`
)

// prune drops what the target version does not have, as the API server
// does after every conversion (here: the two fields that move).
func prune(m map[string]any) map[string]any {
	if strings.HasSuffix(m["apiVersion"].(string), "/v1") {
		delete(m, "hostPort")
	} else {
		delete(m, "host")
		delete(m, "port")
	}
	return m
}

func TestConvertTutorialExamples(t *testing.T) {
	rules, errs := Compile(tutorialCRD(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		name     string
		in, want string
		to       string
	}{
		{"local to v1", localV1beta1, localV1, "example.com/v1"},
		{"remote to v1", remoteV1beta1, remoteV1, "example.com/v1"},
		{"local to v1beta1", localV1, localV1beta1, "example.com/v1beta1"},
		{"remote to v1beta1", remoteV1, remoteV1beta1, "example.com/v1beta1"},
		{"same version", localV1, localV1, "example.com/v1"},
		{"no hostPort", `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"},"spec":{"replicas":3}}`,
			`{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"a"},"spec":{"replicas":3}}`, "example.com/v1"},
		{"only host", `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"a"},"host":"h"}`,
			`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"}}`, "example.com/v1beta1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := obj(t, tt.in)
			before := obj(t, tt.in)
			got, err := rules.Convert(context.Background(), in, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, before) {
				t.Fatalf("source object changed: %v", in)
			}
			if want := obj(t, tt.want); !reflect.DeepEqual(prune(got), want) {
				t.Fatalf("got  %v\nwant %v", got, want)
			}
			// and back
			back, err := rules.Convert(context.Background(), got, apiVersionOf(before))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tt.name, "only") {
				return // host without port does not come back: hostPort needs both
			}
			if !reflect.DeepEqual(prune(back), before) {
				t.Fatalf("round trip: got %v, want %v", back, before)
			}
		})
	}
}

func TestConvertErrors(t *testing.T) {
	rules, errs := Compile(tutorialCRD(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	_, err := rules.Convert(context.Background(), obj(t, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"},"hostPort":"nocolon"}`), "example.com/v1")
	if err == nil || !strings.HasPrefix(err.Error(), "host: ") {
		t.Fatalf("got %v", err)
	}
}

func TestCompileErrors(t *testing.T) {
	const prefix = "metadata.annotations[conversion.crdplane.dev/rules]"
	quadratic := "self.spec.cronSpec.split('').map(a, self.spec.cronSpec.split('').map(b, a + b)).size() > 0 ? 'x' : 'y'"
	tests := []struct {
		name    string
		rules   string
		webhook bool
		want    string
	}{
		{"missing source field", `[{from: v1beta1, to: v1, fields: [{path: host, expression: "self.hostPrt"}]}]`, false,
			prefix + "[0].fields[0].expression: Invalid value: \"self.hostPrt\": compilation failed: ERROR: <input>:1:5: undefined field 'hostPrt'\n | self.hostPrt\n | ....^"},
		{"missing target field", `[{from: v1beta1, to: v1, fields: [{path: spec.hostname, expression: "self.hostPort"}]}]`, false,
			prefix + "[0].fields[0].path: Invalid value: \"spec.hostname\": no such field in the schema of version v1: <root>.spec has no property \"hostname\""},
		{"cost", `[{from: v1beta1, to: v1, fields: [{path: host, expression: "` + quadratic + `"}]}]`, false,
			prefix + "[0].fields[0].expression: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"},
		{"type", `[{from: v1beta1, to: v1, fields: [{path: host, expression: "self.spec.replicas"}]}]`, false,
			prefix + "[0].fields[0].expression: Invalid value: \"self.spec.replicas\": must evaluate to string (the type of host in version v1), not int"},
		{"unknown version", `[{from: v2, to: v1, fields: []}]`, false,
			prefix + "[0].from: Unsupported value: \"v2\": supported values: \"v1beta1\", \"v1\""},
		{"same version", `[{from: v1, to: v1, fields: []}]`, false,
			prefix + "[0].to: Invalid value: \"v1\": must not be the same version as from"},
		{"duplicate pair", `[{from: v1, to: v1beta1, fields: []}, {from: v1, to: v1beta1, fields: []}]`, false,
			prefix + "[1]: Duplicate value: \"v1 to v1beta1\""},
		{"metadata", `[{from: v1, to: v1beta1, fields: [{path: metadata.name, expression: "'x'"}]}]`, false,
			prefix + "[0].fields[0].path: Forbidden: apiVersion, kind and metadata are not converted by rules"},
		{"webhook strategy", `[]`, true,
			prefix + ": Forbidden: conversion rules require spec.conversion.strategy None, not Webhook"},
		{"not a list", `from: v1`, false,
			prefix + ": Invalid value: \"from: v1\": must be a YAML or JSON list of conversion rules (from, to, fields: path, expression): error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go value of type []celconv.Rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := withRules(t, tt.rules)
			if tt.webhook {
				crd.Spec.Conversion.Strategy = apiextensionsv1.WebhookConverter
			}
			_, errs := Compile(crd)
			if len(errs) != 1 || errs[0].Error() != tt.want {
				t.Fatalf("got  %v\nwant %s", errs, tt.want)
			}
		})
	}
}

func TestRoundTripWarnings(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		want  []string
	}{
		{"tutorial", "", nil},
		{"port not restored", `[{from: v1beta1, to: v1, fields: [{path: host, expression: "self.hostPort"}]}, {from: v1, to: v1beta1, fields: [{path: hostPort, expression: "self.host + ':' + self.port"}]}]`,
			[]string{Annotation + ": v1 field port does not round-trip through v1beta1: the rule from v1beta1 back to v1 does not set it"}},
		{"one direction", `[{from: v1beta1, to: v1, fields: [{path: host, expression: "self.hostPort"}, {path: port, expression: "'80'"}]}]`,
			[]string{
				Annotation + ": v1 field host does not round-trip through v1beta1: v1beta1 has no such field and no rule converts to v1beta1",
				Annotation + ": v1 field port does not round-trip through v1beta1: v1beta1 has no such field and no rule converts to v1beta1",
				Annotation + ": v1beta1 field hostPort does not round-trip through v1: no rule converts v1 back to v1beta1",
			}},
		{"overwritten and not read", `[{from: v1beta1, to: v1, fields: [{path: spec.replicas, expression: "1"}, {path: host, expression: "self.hostPort"}, {path: port, expression: "'1'"}]}, {from: v1, to: v1beta1, fields: [{path: hostPort, expression: "self.host + ':' + self.port"}]}]`,
			[]string{Annotation + ": v1beta1 field spec.replicas does not round-trip through v1: the rule to v1 does not read it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := tutorialCRD(t)
			if tt.rules != "" {
				crd.Annotations[Annotation] = tt.rules
			}
			rules, errs := Compile(crd)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if got := RoundTripWarnings(crd, rules); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func BenchmarkConvert(b *testing.B) {
	rules, errs := Compile(tutorialCRD(b))
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	in := obj(b, localV1beta1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rules.Convert(context.Background(), in, "example.com/v1"); err != nil {
			b.Fatal(err)
		}
	}
}
