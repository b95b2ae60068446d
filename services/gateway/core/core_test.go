package core

import (
	"net/url"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	gatewayv1 "github.com/crdplane/crdplane/proto/crdplane/gateway/v1"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

func TestCheckSubresource(t *testing.T) {
	cases := []struct {
		sub     string
		allowed []string
		ok      bool
	}{
		{"", nil, true},
		{"status", []string{"status"}, true},
		{"finalize", []string{"status"}, false},
		{"finalize", []string{"status", "finalize"}, true},
		{"pods", []string{"status", "finalize"}, false},
	}
	for _, tc := range cases {
		err := checkSubresource(tc.sub, tc.allowed...)
		if (err == nil) != tc.ok {
			t.Errorf("%q %v: %v", tc.sub, tc.allowed, err)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("%q: want 404, got %v", tc.sub, err)
		}
	}
	if err := checkVersion("v2"); !apierrors.IsNotFound(err) {
		t.Errorf("v2: %v", err)
	}
}

func TestPatchTypes(t *testing.T) {
	for pt, want := range map[string]bool{
		"application/json-patch+json":            true,
		"application/merge-patch+json":           true,
		"application/strategic-merge-patch+json": true,
		"application/apply-patch+yaml":           true,
		"application/json":                       false,
	} {
		if got := httpx.BuiltinPatchTypeAllowed(pt); got != want {
			t.Errorf("%s: %v, want %v", pt, got, want)
		}
	}
}

func TestDeleteOptions(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		query   url.Values
		req     *gatewayv1.DeleteRequest
		orphan  *bool
		policy  string
		invalid bool
	}{
		{name: "none", req: &gatewayv1.DeleteRequest{}},
		{name: "query orphan", query: url.Values{"orphanDependents": {"true"}}, req: &gatewayv1.DeleteRequest{}, orphan: ptr(true)},
		{name: "query policy", req: &gatewayv1.DeleteRequest{PropagationPolicy: "Foreground"}, policy: "Foreground"},
		{name: "body", body: `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Orphan"}`, req: &gatewayv1.DeleteRequest{}, policy: "Orphan"},
		{name: "both", body: `{"orphanDependents":true,"propagationPolicy":"Orphan"}`, req: &gatewayv1.DeleteRequest{}, invalid: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := deleteOptions([]byte(tc.body), tc.query, tc.req)
			if tc.invalid {
				if !apierrors.IsInvalid(err) {
					t.Fatalf("want 422, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			//nolint:staticcheck // upstream still honours it
			if (opts.OrphanDependents == nil) != (tc.orphan == nil) || (tc.orphan != nil && *opts.OrphanDependents != *tc.orphan) {
				t.Errorf("orphanDependents %v, want %v", opts.OrphanDependents, tc.orphan)
			}
			if got := ""; opts.PropagationPolicy != nil {
				got = string(*opts.PropagationPolicy)
				if got != tc.policy {
					t.Errorf("policy %q, want %q", got, tc.policy)
				}
			} else if tc.policy != "" {
				t.Errorf("no policy, want %q", tc.policy)
			}
		})
	}
	if !immortal("default") || !immortal("kube-system") || !immortal("kube-public") || immortal("kube-node-lease") {
		t.Error("immortal namespaces")
	}
}

func ptr[T any](v T) *T { return &v }
