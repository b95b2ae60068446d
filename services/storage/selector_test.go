package storage

import (
	"strings"
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
		// v1.33's words (330-cr-selectors#22), not the v0.37 library's
		// ("a valid label key must consist of", "63 bytes").
		{"a/b/c=x", "", `unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
		{strings.Repeat("k", 64) + "=x", "", `unable to parse requirement: <nil>: Invalid value: "` + strings.Repeat("k", 64) + `": name part must be no more than 63 characters`},
		{"a=" + strings.Repeat("v", 64), "", `unable to parse requirement: values[0][a]: Invalid value: "` + strings.Repeat("v", 64) + `": must be no more than 63 characters`},
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
