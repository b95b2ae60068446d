package storage

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		key, gr, ns, name string
		bad               bool
	}{
		{key: "/registry/stable.example.com/crontabs/default/x", gr: "crontabs.stable.example.com", ns: "default", name: "x"},
		{key: "/registry/stable.example.com/clusterthings/x", gr: "clusterthings.stable.example.com", name: "x"},
		{key: "/registry/apiextensions.k8s.io/customresourcedefinitions/crontabs.stable.example.com", gr: "customresourcedefinitions.apiextensions.k8s.io", name: "crontabs.stable.example.com"},
		// the core group's namespaces, kube-apiserver's layout
		{key: "/registry/namespaces/team-a", gr: "namespaces", name: "team-a"},
		{key: "/registry/namespaces/team-a/x", bad: true},
		{key: "/registry/namespaces/", bad: true},
		// rbac.authorization.k8s.io, kube-apiserver's layout
		{key: "/registry/roles/team-a/reader", gr: "roles.rbac.authorization.k8s.io", ns: "team-a", name: "reader"},
		{key: "/registry/rolebindings/team-a/reader", gr: "rolebindings.rbac.authorization.k8s.io", ns: "team-a", name: "reader"},
		{key: "/registry/clusterroles/admin", gr: "clusterroles.rbac.authorization.k8s.io", name: "admin"},
		{key: "/registry/clusterrolebindings/admin", gr: "clusterrolebindings.rbac.authorization.k8s.io", name: "admin"},
		{key: "/registry/roles/reader", bad: true},
		{key: "/registry/clusterroles/ns/admin", bad: true},
		{key: "/registry/g/p", bad: true},
		{key: "/registry/g/p/ns/name/extra", bad: true},
		{key: "/registry/g/p/", bad: true},
		{key: "/registry/g//x", bad: true},
		{key: "/other/g/p/x", bad: true},
		{key: "", bad: true},
	}
	for _, tt := range tests {
		k, err := parseKey(tt.key)
		if tt.bad {
			if !apierrors.IsBadRequest(err) {
				t.Errorf("%q: want BadRequest, got %v", tt.key, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.key, err)
		}
		if k.resource.String() != tt.gr || k.namespace != tt.ns || k.name != tt.name || k.raw != tt.key {
			t.Errorf("%q: got %+v", tt.key, k)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"/registry/g/p/", "/registry/g/p/ns/", "/registry/namespaces/", "/registry/roles/", "/registry/roles/team-a/", "/registry/clusterrolebindings/"} {
		if err := checkPrefix(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"/registry/g/p", "/registry/g/", "/registry/", "/registry/g/p/ns/x/", "/registry//p/", "/registry/namespaces/x/", "/registry/clusterroles/x/", "/registry/roles/a/b/", "/x/g/p/", ""} {
		if err := checkPrefix(p); !apierrors.IsBadRequest(err) {
			t.Errorf("%q: want BadRequest, got %v", p, err)
		}
	}
	if gr := prefixResource("/registry/g.io/things/ns/"); gr.String() != "things.g.io" {
		t.Errorf("prefixResource: %v", gr)
	}
	if gr := prefixResource("/registry/namespaces/"); gr.String() != "namespaces" {
		t.Errorf("prefixResource of namespaces: %v", gr)
	}
	if p := resourcePrefix("/registry/roles/team-a/"); p != "/registry/roles/" {
		t.Errorf("resourcePrefix of roles: %q", p)
	}
	if p := resourcePrefix("/registry/namespaces/"); p != "/registry/namespaces/" {
		t.Errorf("resourcePrefix of namespaces: %q", p)
	}
}
