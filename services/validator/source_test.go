package validator

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
)

func TestDirSourceMultiDocument(t *testing.T) {
	dir := t.TempDir()
	a, err := os.ReadFile("testdata/crds/crontab-validation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/crds/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	multi := string(a) + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored}\n---\n" + string(b)
	if err := os.WriteFile(filepath.Join(dir, "all.yml"), []byte(multi), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := NewDirSource(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"crontabs.stable.example.com", "widgets.example.com"} {
		crd, err := src.Get(context.Background(), &commonv1.CRDRef{Name: name, Uid: "ignored", Generation: 7})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(crd.UID) != "crddir-"+name || crd.Generation != 1 || crd.Status.AcceptedNames.Kind == "" {
			t.Errorf("%s: uid %q generation %d names %v", name, crd.UID, crd.Generation, crd.Status.AcceptedNames)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "dup.json"), []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDirSource(dir, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("duplicate CRD: %v", err)
	}
}

func TestNewConfig(t *testing.T) {
	ctx := context.Background()
	if _, err := New(ctx, Config{}); err == nil {
		t.Error("no source: no error")
	}
	if _, err := New(ctx, Config{CRDDir: "testdata/crds", RegistryAddr: "localhost:1"}); err == nil {
		t.Error("two sources: no error")
	}
	dir := t.TempDir()
	bad := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"bad.example.com"},
"spec":{"group":"example.com","names":{"kind":"Bad","plural":"bad"},"scope":"Cluster","versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","properties":{"a":{"type":"string","default":5},"b":{"$ref":"#/x"}}}}}]}}`
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, Config{CRDDir: dir, Logger: slog.New(slog.DiscardHandler)}); err == nil || !strings.Contains(err.Error(), "$ref") {
		t.Errorf("uncompilable CRD: %v", err)
	}
}
