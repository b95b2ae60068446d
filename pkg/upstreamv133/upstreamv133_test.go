package upstreamv133

import (
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestFormatsAsV133(t *testing.T) {
	tests := []struct {
		name   string
		format string
		value  any
		errs   int
	}{
		{"kept format checked", "uuid", "not-a-uuid", 1},
		{"kept format with dashes", "date-time", "yesterday", 1},
		{"k8s-short-name dropped", "k8s-short-name", "NOT_A_NAME", 0},
		{"unknown format dropped", "not-a-format", "anything", 0},
		{"valid value", "uuid", "7e8b3b62-2c4e-4b0e-9a0b-6a3a6a7b8c9d", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewSchemaValidator(&apiextensions.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensions.JSONSchemaProps{
					"f": {Type: "string", Format: tt.format},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			errs := apiservervalidation.ValidateCustomResource(nil, map[string]any{"f": tt.value}, v)
			if len(errs) != tt.errs {
				t.Fatalf("errors = %v, want %d", errs, tt.errs)
			}
		})
	}
}

func TestIsRangeError(t *testing.T) {
	tests := []struct {
		err  *field.Error
		want bool
	}{
		{&field.Error{Field: "<nil>", Detail: "Maximum boundary value must be of type integer"}, true},
		{&field.Error{Field: "<nil>", Detail: "MultipleOf value must be of type number"}, true},
		{&field.Error{Field: "spec", Detail: "Checked value must be of type integer"}, false},
		{&field.Error{Field: "<nil>", Detail: "must be of type integer"}, false},
	}
	for _, tt := range tests {
		if got := IsRangeError(tt.err); got != tt.want {
			t.Errorf("IsRangeError(%q at %q) = %v, want %v", tt.err.Detail, tt.err.Field, got, tt.want)
		}
	}
}
