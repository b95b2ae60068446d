package main

import (
	"strings"
	"testing"
)

func TestTargetOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "all"},
		{[]string{"--listen", ":0"}, "all"},
		{[]string{"--target=registry"}, "registry"},
		{[]string{"-target=gateway", "--listen", ":0"}, "gateway"},
		{[]string{"--data-dir", "x", "--target", "storage"}, "storage"},
		{[]string{"--target=all"}, "all"},
		{[]string{"--target="}, ""},
		{[]string{"--", "--target=registry"}, "all"},
		{[]string{"--targets=registry"}, "all"},
	} {
		if got := targetOf(tc.args); got != tc.want {
			t.Errorf("targetOf(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestRunTarget(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--target=registry", "--check-flags"}, ""},
		{[]string{"--target=registry", "--validator-addr=", "--check-flags"}, "registry: --validator-addr is required"},
		{[]string{"--target", "gateway", "--converter-addr", "", "--check-flags"}, "gateway: --converter-addr is required"},
		{[]string{"--target=validator", "--check-flags"}, "validator: --registry-addr is required"},
		{[]string{"--target=validator", "--registry-addr=dns:///registry:7002", "--check-flags"}, ""},
		{[]string{"--target=storage", "--etcd-cafile=/ca.crt", "--check-flags"}, "are for an external etcd (--etcd-endpoints)"},
		{[]string{"--target=apiserver"}, `unknown target "apiserver": want all or storage, registry, validator, converter, gateway`},
	} {
		err := run(tc.args)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("run %q: %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
