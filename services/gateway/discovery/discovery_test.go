package discovery

import (
	"testing"

	"github.com/crdplane/crdplane/pkg/kubewire"
)

// TestDiscoveryTarget: the groups crdplane serves itself negotiate as
// kube-apiserver's built-in groups (go-restful's 406 for an Accept it
// refuses), the custom resources' groups as the CRD handler's.
func TestDiscoveryTarget(t *testing.T) {
	for _, tc := range []struct {
		group string
		want  kubewire.Target
	}{
		{"", kubewire.TargetRootDiscovery},
		{"apiextensions.k8s.io", kubewire.TargetBuiltinDiscovery},
		{"authentication.k8s.io", kubewire.TargetBuiltinDiscovery},
		{"authorization.k8s.io", kubewire.TargetBuiltinDiscovery},
		{"stable.example.com", kubewire.TargetDiscovery},
		{"authentication.k8s.io.example.com", kubewire.TargetDiscovery},
	} {
		if got := discoveryTarget(tc.group); got != tc.want {
			t.Errorf("discoveryTarget(%q) = %v, want %v", tc.group, got, tc.want)
		}
	}
}

// TestNoneMatchFails: If-None-Match as net/http's ServeContent reads it.
func TestNoneMatchFails(t *testing.T) {
	const etag = `"ABC"`
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{[]string{`"ABC"`}, true},
		{[]string{`W/"ABC"`}, true},
		{[]string{`"x", "ABC"`}, true},
		{[]string{`"x"`, `"ABC"`}, true},
		{[]string{"*"}, true},
		{[]string{`"x"`}, false},
		{[]string{`"abc"`}, false},
		{[]string{""}, false},
	} {
		if got := noneMatchFails(tc.values, etag); got != tc.want {
			t.Errorf("noneMatchFails(%q) = %v, want %v", tc.values, got, tc.want)
		}
	}
	if noneMatchFails([]string{`""`}, "") {
		t.Error("an empty ETag matched")
	}
}
