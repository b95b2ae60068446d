package httpx

import (
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/kstatus"
)

func TestDecodeBody(t *testing.T) {
	const dupYAML = "apiVersion: v1\nkind: K\nspec:\n  a: 1\n  a: 2\n"
	for _, tc := range []struct {
		name, contentType, body string
		json                    string // "" with convErr
		convErr                 bool
		strict, warn            []string
	}{
		{name: "json", contentType: "application/json", body: `{"a":1}`, json: `{"a":1}`},
		{name: "no content type", body: `{"a":1}`, json: `{"a":1}`},
		{name: "json duplicates", contentType: "application/json", body: `{"spec":{"x":1,"x":2}}`, json: `{"spec":{"x":1,"x":2}}`,
			strict: []string{`duplicate field "spec.x"`}, warn: []string{`duplicate field "spec.x"`}},
		{name: "yaml", contentType: "application/yaml", body: "a: 1\n", json: `{"a":1}`},
		{name: "yaml alias type", contentType: "text/yaml; charset=utf-8", body: "a: 1\n", json: `{"a":1}`},
		{name: "yaml duplicates", contentType: "application/yaml", body: dupYAML, json: `{"apiVersion":"v1","kind":"K","spec":{"a":2}}`,
			strict: []string{"yaml: unmarshal errors:\n  line 5: key \"a\" already set in map"},
			warn:   []string{`line 5: key "a" already set in map`}},
		{name: "yaml that does not convert", contentType: "application/yaml", body: "a: [", convErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBody(tc.contentType, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(b.Raw) != tc.body {
				t.Errorf("raw %q", b.Raw)
			}
			if tc.convErr {
				if b.ConvErr == nil || b.JSON != nil {
					t.Fatalf("conversion error %v, JSON %q", b.ConvErr, b.JSON)
				}
				if s := kstatus.FromError(b.YAMLError()); s.Code != http.StatusBadRequest || s.Message != "the object provided is unrecognized (must be of type CustomResourceDefinition): "+b.ConvErr.Error()+" (613a205b)" {
					// upstream's wording, observed: the body in hex
					t.Errorf("YAMLError %+v", s)
				}
				return
			}
			if b.ConvErr != nil || b.YAMLError() != nil || string(b.JSON) != tc.json {
				t.Fatalf("JSON %q, conversion error %v", b.JSON, b.ConvErr)
			}
			if got := b.StrictErrors(metav1.FieldValidationStrict); !slices.Equal(got, tc.strict) {
				t.Errorf("Strict: %q, want %q", got, tc.strict)
			}
			if got := b.StrictErrors(metav1.FieldValidationWarn); !slices.Equal(got, tc.warn) {
				t.Errorf("Warn: %q, want %q", got, tc.warn)
			}
			if got := b.StrictErrors(metav1.FieldValidationIgnore); got != nil {
				t.Errorf("Ignore: %q", got)
			}
		})
	}
	for _, ct := range []string{"application/vnd.kubernetes.protobuf", "text/plain", "application/json; charset"} {
		_, err := DecodeBody(ct, []byte(`{}`))
		if s := kstatus.FromError(err); s == nil || s.Code != http.StatusUnsupportedMediaType ||
			s.Message != "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml" {
			t.Errorf("%s: %v", ct, err)
		}
	}
}

var benchObject = []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","namespace":"default","labels":{"app":"bench"}},"spec":{"cronSpec":"* * * * */5","image":"registry.example.com/team/my-awesome-cron-image:v1.2.3","replicas":5}}`)

var benchYAML = []byte("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: a\n  namespace: default\n  labels:\n    app: bench\nspec:\n  cronSpec: '* * * * */5'\n  image: registry.example.com/team/my-awesome-cron-image:v1.2.3\n  replicas: 5\n")

// BenchmarkDecodeBody: a create body read and its strict errors found
// (fieldValidation Warn, the default).
func BenchmarkDecodeBody(b *testing.B) {
	for _, bc := range []struct {
		name, contentType string
		body              []byte
	}{{"json", ContentTypeJSON, benchObject}, {"yaml", ContentTypeYAML, benchYAML}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				body, err := DecodeBody(bc.contentType, bc.body)
				if err != nil || body.ConvErr != nil {
					b.Fatal(err, body.ConvErr)
				}
				if errs := body.StrictErrors(metav1.FieldValidationWarn); len(errs) != 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
