package storage

import (
	"os"
	"testing"
)

// TestDataDirMadePrivate: a data directory that already exists with 0755
// (as t.TempDir creates it) is made 0700, as etcd asks of its data.
func TestDataDirMadePrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	newEnv(t, func(c *Config) { c.DataDir = dir })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Fatalf("data dir mode %o, want 700", perm)
	}
}
