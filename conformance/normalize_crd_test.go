package conformance

import (
	"strings"
	"testing"
	"time"
)

// A YAML answer is normalised like a JSON one: managedFields kept, uid
// and resourceVersion replaced.
func TestNormalizeYAML(t *testing.T) {
	n := normalizer{now: time.Now()}
	in := `apiVersion: v1
kind: Thing
metadata:
  managedFields:
  - manager: x
    operation: Update
  name: a
  resourceVersion: "42"
  uid: ef64e0f7-e85e-4b50-8962-8aa095d64ec6
spec:
  replicas: 3
`
	got, ok := n.YAML([]byte(in), nil, false)
	if !ok {
		t.Fatal("not YAML")
	}
	want := `apiVersion: v1
kind: Thing
metadata:
  managedFields:
  - manager: x
    operation: Update
  name: a
  resourceVersion: <resourceVersion>
  uid: <uid>
spec:
  replicas: 3`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, ok := n.YAML([]byte("a: [b"), nil, false); ok {
		t.Error("malformed YAML normalised")
	}
}

// Pointers rendered with %#v in upstream's field errors carry heap
// addresses: they become <pointer>; a nil pointer stays.
func TestNormalizePointers(t *testing.T) {
	n := normalizer{now: time.Now()}
	in := `Invalid value: []apiextensions.CustomResourceDefinitionVersion{apiextensions.CustomResourceDefinitionVersion{Name:"v1", DeprecationWarning:(*string)(nil), Schema:(*apiextensions.CustomResourceValidation)(0x1fd161f29d08), Subresources:(*apiextensions.CustomResourceSubresources)(0xc000a1b2c8)}}: must contain unique version names`
	want := `Invalid value: []apiextensions.CustomResourceDefinitionVersion{apiextensions.CustomResourceDefinitionVersion{Name:"v1", DeprecationWarning:(*string)(nil), Schema:(*apiextensions.CustomResourceValidation)(<pointer>), Subresources:(*apiextensions.CustomResourceSubresources)(<pointer>)}}: must contain unique version names`
	if got := n.String("message", in); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := n.String("message", "0x1fd161f29d08"); got != "0x1fd161f29d08" {
		t.Errorf("a bare hex number changed: %s", got)
	}
}

// A failed resourceVersion precondition quotes the server's own
// resourceVersion; the one the request gave stays.
func TestNormalizePreconditionResourceVersion(t *testing.T) {
	n := normalizer{now: time.Now()}
	in := `Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io "a.example.com": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: 16`
	want := `Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io "a.example.com": Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: <resourceVersion>`
	if got := n.String("message", in); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The resources of a discovery document are compared by name, whatever
// order the servers list their CRDs in.
func TestNormalizeAPIResourceListOrder(t *testing.T) {
	n := normalizer{now: time.Now()}
	a, _ := n.JSON([]byte(`{"kind":"APIResourceList","groupVersion":"g/v1","resources":[{"name":"sinks"},{"name":"flows"},{"name":"flows/status"}]}`), nil, false)
	b, _ := n.JSON([]byte(`{"kind":"APIResourceList","groupVersion":"g/v1","resources":[{"name":"flows"},{"name":"flows/status"},{"name":"sinks"}]}`), nil, false)
	if a != b {
		t.Errorf("differ:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "flows/status") || strings.Index(a, "sinks") < strings.Index(a, "flows/status") {
		t.Errorf("not sorted by name:\n%s", a)
	}
}

// The conditions of the CRDs in a list are compared by type too (upstream's
// list items carry no kind).
func TestNormalizeCRDListConditions(t *testing.T) {
	n := normalizer{now: time.Now()}
	a, _ := n.JSON([]byte(`{"kind":"CustomResourceDefinitionList","items":[{"status":{"conditions":[{"type":"NamesAccepted"},{"type":"Established"}]}}]}`), nil, false)
	b, _ := n.JSON([]byte(`{"kind":"CustomResourceDefinitionList","items":[{"status":{"conditions":[{"type":"Established"},{"type":"NamesAccepted"}]}}]}`), nil, false)
	if a != b {
		t.Errorf("differ:\n%s\n%s", a, b)
	}
}
