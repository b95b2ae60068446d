package registry

import (
	"log/slog"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func namesCRD(name, group string, spec, accepted apiextensionsv1.CustomResourceDefinitionNames) *CRD {
	crd := &CRD{}
	crd.Name = name
	crd.ResourceVersion = "1"
	crd.Spec.Group = group
	crd.Spec.Names = spec
	crd.Status.AcceptedNames = accepted
	return crd
}

func TestCalculateNames(t *testing.T) {
	existing := apiextensionsv1.CustomResourceDefinitionNames{Plural: "foos", Singular: "foo", ShortNames: []string{"f", "fo"}, Kind: "Foo", ListKind: "FooList"}
	tests := []struct {
		name       string
		names      apiextensionsv1.CustomResourceDefinitionNames
		accepted   apiextensionsv1.CustomResourceDefinitionNames
		wantReason string
		wantMsg    string
		want       apiextensionsv1.CustomResourceDefinitionNames
	}{
		{
			name:       "no conflict",
			names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Bar", ListKind: "BarList", Categories: []string{"all"}},
			wantReason: "NoConflicts", wantMsg: "no conflicts found",
			want: apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Bar", ListKind: "BarList", Categories: []string{"all"}},
		},
		{
			name:       "plural is another's singular",
			names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "foo", Singular: "bar", Kind: "Bar", ListKind: "BarList"},
			wantReason: "PluralConflict", wantMsg: `"foo" is already in use`,
			want: apiextensionsv1.CustomResourceDefinitionNames{Singular: "bar", Kind: "Bar", ListKind: "BarList"},
		},
		{
			name:       "short names",
			names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", ShortNames: []string{"f", "b", "fo"}, Kind: "Bar", ListKind: "BarList"},
			wantReason: "ShortNamesConflict", wantMsg: `["f" is already in use, "fo" is already in use]`,
			want: apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Bar", ListKind: "BarList"},
		},
		{
			name:       "kind",
			names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Foo", ListKind: "BarList"},
			wantReason: "KindConflict", wantMsg: `"Foo" is already in use`,
			want: apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", ListKind: "BarList"},
		},
		{
			name:       "names already held stay",
			names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Bar", ListKind: "FooList"},
			accepted:   apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Bar", ListKind: "BarList"},
			wantReason: "ListKindConflict", wantMsg: `"FooList" is already in use`,
			want: apiextensionsv1.CustomResourceDefinitionNames{Plural: "bars", Singular: "bar", Kind: "Bar", ListKind: "BarList"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inf := newInformer(nil, slog.Default())
			crd := namesCRD("bars.example.com", "example.com", tt.names, tt.accepted)
			inf.replace(map[string]*CRD{
				"foos.example.com": namesCRD("foos.example.com", "example.com", existing, existing),
				// the same names in another group do not count
				"bazs.other.com": namesCRD("bazs.other.com", "other.com", tt.names, tt.names),
				crd.Name:         crd,
			})
			c := &controllers{inf: inf}
			names, cond, est := c.calculateNames(crd)
			if cond.Reason != tt.wantReason || cond.Message != tt.wantMsg {
				t.Errorf("condition = %s %q", cond.Reason, cond.Message)
			}
			if !semanticEqual(names, tt.want) {
				t.Errorf("accepted = %+v\nwant       %+v", names, tt.want)
			}
			wantEst := "NotAccepted"
			if tt.wantReason == "NoConflicts" {
				wantEst = "Installing"
			}
			if est.Status != apiextensionsv1.ConditionFalse || est.Reason != wantEst {
				t.Errorf("Established = %+v", est)
			}
		})
	}
}

func TestQueue(t *testing.T) {
	q := newQueue()
	q.add("a")
	q.add("b")
	q.add("a") // deduplicated
	k, _ := q.get()
	if k != "a" {
		t.Fatalf("got %q", k)
	}
	q.add("a") // while processing: comes back after done
	k2, _ := q.get()
	if k2 != "b" {
		t.Fatalf("got %q", k2)
	}
	q.done("b")
	q.done("a")
	k3, _ := q.get()
	if k3 != "a" {
		t.Fatalf("got %q", k3)
	}
	q.done("a")
	q.stop()
	if _, ok := q.get(); ok {
		t.Fatal("get after stop")
	}
}

func TestApprovalCondition(t *testing.T) {
	tests := []struct {
		group, annotation string
		status            apiextensionsv1.ConditionStatus
		reason, message   string
	}{
		{"example.com", "", "", "", ""},
		{"apps.k8s.io", "", "False", "MissingAnnotation", `protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111`},
		{"x.kubernetes.io", "https://github.com/kubernetes/kubernetes/pull/78458", "True", "ApprovedAnnotation", "approved in https://github.com/kubernetes/kubernetes/pull/78458"},
		{"k8s.io", "unapproved, testing", "False", "UnapprovedAnnotation", `not approved: "unapproved, testing"`},
		{"k8s.io", "yes", "False", "InvalidAnnotation", `protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111`},
	}
	for _, tt := range tests {
		crd := &CRD{}
		crd.Spec.Group = tt.group
		if tt.annotation != "" {
			crd.Annotations = map[string]string{approvalAnnotation: tt.annotation}
		}
		c := approvalCondition(crd)
		if tt.reason == "" {
			if c != nil {
				t.Errorf("%s: unexpected condition %+v", tt.group, c)
			}
			continue
		}
		if c == nil || c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
			t.Errorf("%s %q: got %+v", tt.group, tt.annotation, c)
		}
	}
}
