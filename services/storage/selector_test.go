package storage

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestSelector(t *testing.T) {
	obj := []byte(`{"kind":"CronTab","metadata":{"name":"a","namespace":"ns1","labels":{"app":"web","tier":"front"}},"spec":{"color":"blue","size":3,"on":true,"metadata":{"name":"b"}}}`)
	selectable := []string{"spec.color", ".spec.size", "spec.on", "spec.missing"}
	tests := []struct {
		label, field string
		want         bool
	}{
		{"", "", true},
		{"app=web", "", true},
		{"app=db", "", false},
		{"app in (web,db),tier!=back", "", true},
		{"!app", "", false},
		{"missing", "", false},
		{"", "metadata.name=a", true},
		{"", "metadata.name=b", false},
		{"", "metadata.name!=b", true},
		{"", "metadata.namespace=ns1", true},
		{"", "metadata.namespace==ns2", false},
		{"", "spec.color=blue", true},
		{"", "spec.color=red", false},
		{"", "spec.size=3", true},
		{"", "spec.on=true", true},
		{"", "spec.missing=", true},
		{"app=web", "spec.color=blue,metadata.name=a", true},
		{"app=web", "spec.color=blue,metadata.name=b", false},
	}
	for _, tt := range tests {
		sel, err := newSelector(tt.label, tt.field, selectable)
		if err != nil {
			t.Fatalf("%q %q: %v", tt.label, tt.field, err)
		}
		if (tt.label == "" && tt.field == "") != (sel == nil) {
			t.Errorf("%q %q: nil selector expected only without selectors", tt.label, tt.field)
		}
		got, err := sel.matches(obj)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%q %q: got %v want %v", tt.label, tt.field, got, tt.want)
		}
	}
}

func TestSelectorErrors(t *testing.T) {
	tests := []struct {
		label, field, msg string
	}{
		{"", "spec.color=blue", "field label not supported: spec.color"},
		{"", "metadata.labels=x", "field label not supported: metadata.labels"},
		{"a in (", "", ""},
		{"", "a", ""},
	}
	for _, tt := range tests {
		_, err := newSelector(tt.label, tt.field, nil)
		if !apierrors.IsBadRequest(err) {
			t.Fatalf("%q %q: want BadRequest, got %v", tt.label, tt.field, err)
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("%q %q: message %q, want %q", tt.label, tt.field, err.Error(), tt.msg)
		}
	}
}
