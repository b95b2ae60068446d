package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dumpCase writes a validation case's prepared objects to the directory in
// $CRDPLANE_DUMP_CASES (when set), so that the expected messages can be
// checked against upstream's validation with the very same input.
func dumpCase(t *testing.T, name string, crd, old *CRD) {
	dir := os.Getenv("CRDPLANE_DUMP_CASES")
	if dir == "" || crd == nil {
		return
	}
	write := func(suffix string, c *CRD) {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		file := strings.NewReplacer("/", "_", " ", "_").Replace(name) + suffix
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if old == nil {
		write(".json", crd)
		return
	}
	write(".old.json", old)
	write(".new.json", crd)
}

// dumpGot records the message a case produced next to its objects.
func dumpGot(t *testing.T, name, got string) {
	dir := os.Getenv("CRDPLANE_DUMP_CASES")
	if dir == "" {
		return
	}
	file := strings.NewReplacer("/", "_", " ", "_").Replace(name) + ".got"
	if err := os.WriteFile(filepath.Join(dir, file), []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
}
