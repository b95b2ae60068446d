package fieldmanager

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	tests := []struct{ fieldManager, userAgent, want string }{
		{"mgr-a", "kubectl/v1.33.0", "mgr-a"},
		{"", "kubectl/v1.33.0 (linux/amd64) kubernetes/abc", "kubectl"}, // upstream: "kubectl"
		{"", "kubectl-edit/v1.33.0", "kubectl-edit"},                    // upstream: "kubectl-edit"
		{"", "Mozilla", "Mozilla"},                                      // upstream: "Mozilla"
		{"", "", ""},
		{"", "a\x00b\tc/1", "abc"},
		{"", long, strings.Repeat("é", 64)},
	}
	for _, tt := range tests {
		if got := Name(tt.fieldManager, tt.userAgent); got != tt.want {
			t.Errorf("Name(%q, %q) = %q, want %q", tt.fieldManager, tt.userAgent, got, tt.want)
		}
	}
}
