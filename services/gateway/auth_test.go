package gateway

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthStartup: a file the authentication or authorization flags name
// that does not exist stops the gateway at startup; the modes are checked
// with the flags.
func TestAuthStartup(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range [][]string{
		{"--token-file", missing},
		{"--client-ca-file", missing},
		{"--requestheader-client-ca-file", missing},
		{"--authentication-token-webhook-config-file", missing},
		{"--authorization-mode", "Webhook", "--authorization-webhook-config-file", missing},
		{"--authorization-mode", "Webhook", "--authorization-kubeconfig", missing},
		{"--authentication-kubeconfig", missing},
	} {
		var cfg Config
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(append(args, "--listen=")); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%v: Validate: %v", args, err)
		}
		_, err := New(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), args[len(args)-2]) || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{
		{"--authorization-mode", "RBAC2"},
		{"--authorization-mode", "Webhook"},
		{"--authorization-webhook-config-file", missing},
		{"--requestheader-allowed-names", "front-proxy"},
		{"--authorization-kubeconfig", missing},
		{"--authorization-mode", "Webhook", "--authorization-kubeconfig", missing, "--authorization-webhook-config-file", missing},
		{"--authentication-skip-lookup"},
		{"--authentication-tolerate-lookup-failure"},
	} {
		var cfg Config
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
