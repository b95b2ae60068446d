package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestKubectlCELConversion drives examples/crontab-cel-conversion with the
// pinned kubectl against a `crdplane run` process: the versions tutorial's
// CronTab (v1beta1 hostPort, v1 host and port) converted by CEL rules, no
// webhook. The tutorial's two objects are written one at each version and
// read, listed and patched at both; bad rules are refused with the
// validator's wording and leave the stored CRD as it was; rules that do not
// round-trip are accepted with warnings; an expression failing at read time
// fails the read with a 500.
func TestKubectlCELConversion(t *testing.T) {
	s := startServer(t, "")
	crdFile := "../examples/crontab-cel-conversion/crontab-crd.yaml"
	s.must(t, "apply", "-f", crdFile)
	s.must(t, "wait", "--for", "condition=established", "--timeout", "60s", "crd/crontabs.example.com")
	s.must(t, "apply", "-f", "../examples/crontab-cel-conversion/crontabs.yaml")

	get := func(t *testing.T, resource, name string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(s.must(t, "get", resource, name, "-n", "default", "-o", "json")), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	fields := func(m map[string]any) string {
		var parts []string
		for _, k := range []string{"apiVersion", "hostPort", "host", "port"} {
			if v, ok := m[k]; ok {
				parts = append(parts, k+"="+v.(string))
			}
		}
		return strings.Join(parts, " ")
	}

	t.Run("tutorial examples both ways", func(t *testing.T) {
		for _, tc := range []struct{ resource, name, want string }{
			{"crontabs.v1beta1.example.com", "local-crontab", "apiVersion=example.com/v1beta1 hostPort=localhost:1234"},
			{"crontabs.v1.example.com", "local-crontab", "apiVersion=example.com/v1 host=localhost port=1234"},
			{"crontabs.v1.example.com", "remote-crontab", "apiVersion=example.com/v1 host=example.com port=2345"},
			{"crontabs.v1beta1.example.com", "remote-crontab", "apiVersion=example.com/v1beta1 hostPort=example.com:2345"},
		} {
			if got := fields(get(t, tc.resource, tc.name)); got != tc.want {
				t.Errorf("%s %s: %s, want %s", tc.resource, tc.name, got, tc.want)
			}
		}
	})

	t.Run("list at v1", func(t *testing.T) {
		out := s.must(t, "get", "crontabs.v1.example.com", "-n", "default", "-o", "jsonpath={range .items[*]}{.metadata.name}={.host}:{.port};{end}")
		if out != "local-crontab=localhost:1234;remote-crontab=example.com:2345;" {
			t.Fatalf("list: %s", out)
		}
	})

	t.Run("patch at v1, read at v1beta1", func(t *testing.T) {
		s.must(t, "patch", "crontabs.v1.example.com", "local-crontab", "-n", "default", "--type", "merge", "-p", `{"port":"4321"}`)
		if got := fields(get(t, "crontabs.v1beta1.example.com", "local-crontab")); got != "apiVersion=example.com/v1beta1 hostPort=localhost:4321" {
			t.Fatalf("after patch: %s", got)
		}
	})

	crdYAML, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	storedRules := func(t *testing.T) string {
		return s.must(t, "get", "crd", "crontabs.example.com", "-o", `jsonpath={.metadata.annotations.conversion\.crdplane\.dev/rules}`)
	}
	before := storedRules(t)

	t.Run("bad rules are refused", func(t *testing.T) {
		for _, tc := range []struct{ name, from, to, want string }{
			{"missing field", "self.hostPort.substring(0,", "self.hostPrt.substring(0,",
				`metadata.annotations[conversion.crdplane.dev/rules][0].fields[0].expression: Invalid value: "self.hostPrt.substring(0, self.hostPort.lastIndexOf(':'))": compilation failed: ERROR: <input>:1:5: undefined field 'hostPrt'`},
			{"cost", "expression: self.host + ':' + self.port",
				"expression: \"self.host.split('').map(a, self.host.split('').map(b, a + b)).size() > 0 ? 'x' : 'y'\"",
				`metadata.annotations[conversion.crdplane.dev/rules][1].fields[0].expression: Forbidden: estimated rule cost exceeds budget by factor of more than 100x`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				doc := strings.Replace(string(crdYAML), tc.from, tc.to, 1)
				if doc == string(crdYAML) {
					t.Fatal("replacement did not apply")
				}
				out, errOut, err := s.kubectl(t, doc, "apply", "-f", "-")
				if err == nil || !strings.Contains(errOut, `The CustomResourceDefinition "crontabs.example.com" is invalid`) || !strings.Contains(errOut, tc.want) {
					t.Fatalf("apply: %v\nstdout: %s\nstderr: %s", err, out, errOut)
				}
				if got := storedRules(t); got != before {
					t.Fatalf("stored rules changed: %s", got)
				}
			})
		}
	})

	t.Run("rules that do not round-trip: warnings", func(t *testing.T) {
		doc := strings.Replace(string(crdYAML), "        - path: port\n          expression: self.hostPort.substring(self.hostPort.lastIndexOf(':') + 1)\n", "", 1)
		if doc == string(crdYAML) {
			t.Fatal("replacement did not apply")
		}
		out, errOut, err := s.kubectl(t, doc, "apply", "-f", "-")
		if err != nil || !strings.Contains(errOut, "Warning: conversion.crdplane.dev/rules: v1 field port does not round-trip through v1beta1: the rule from v1beta1 back to v1 does not set it") {
			t.Fatalf("apply: %v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		s.must(t, "apply", "-f", crdFile)
	})

	t.Run("a write that cannot convert to the storage version is not stored", func(t *testing.T) {
		doc := strings.Replace(string(crdYAML), "expression: self.host + ':' + self.port", `expression: "self.host + ':' + (self.port.matches('^[0-9]+$') ? self.port : self.port.substring(1, 0))"`, 1)
		if doc == string(crdYAML) {
			t.Fatal("replacement did not apply")
		}
		if out, errOut, err := s.kubectl(t, doc, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply: %v\n%s%s", err, out, errOut)
		}
		defer s.must(t, "apply", "-f", crdFile)
		obj := "apiVersion: example.com/v1\nkind: CronTab\nmetadata:\n  name: named-port\n  namespace: default\nhost: localhost\nport: http\n"
		out, errOut, err := s.kubectl(t, obj, "create", "-f", "-")
		if err == nil || !strings.Contains(errOut, "conversion rules for example.com/v1, Kind=CronTab failed: hostPort: ") {
			t.Fatalf("create: %v\n%s%s", err, out, errOut)
		}
		if errOut := s.fails(t, "get", "crontabs.v1beta1.example.com", "named-port", "-n", "default"); !strings.Contains(errOut, `"named-port" not found`) {
			t.Fatalf("get: %s", errOut)
		}
	})

	t.Run("an expression failing at read time", func(t *testing.T) {
		// v1beta1's schema takes any hostPort; one without a colon has no v1 form.
		obj := "apiVersion: example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: nocolon\n  namespace: default\nhostPort: localhost\n"
		if out, errOut, err := s.kubectl(t, obj, "create", "-f", "-"); err != nil {
			t.Fatalf("create: %v\n%s%s", err, out, errOut)
		}
		errOut := s.fails(t, "get", "crontabs.v1.example.com", "nocolon", "-n", "default")
		t.Logf("get at v1: %s", errOut)
		if !strings.Contains(errOut, "Error from server: conversion rules for example.com/v1beta1, Kind=CronTab failed: host: ") {
			t.Fatalf("get at v1: %s", errOut)
		}
		if got := fields(get(t, "crontabs.v1beta1.example.com", "nocolon")); got != "apiVersion=example.com/v1beta1 hostPort=localhost" {
			t.Fatalf("at v1beta1: %s", got)
		}
		s.must(t, "delete", "crontabs.v1beta1.example.com", "nocolon", "-n", "default")
	})
}
