// Package flagcheck runs the binaries of the deployment manifests with the
// arguments the manifests give them, in a parse-only mode, so that a
// misspelt or removed flag fails the tests instead of a rollout:
// crdplane-<service> --check-flags, etcd --version (etcd parses its flags
// before printing its version).
package flagcheck

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Binaries finds or builds the binaries the manifests run.
type Binaries struct {
	t     testing.TB
	root  string // the repository
	dir   string // $CRDPLANE_BIN_DIR
	tmp   string
	paths map[string]string
}

// New returns the binaries of $CRDPLANE_BIN_DIR (make test-deploy puts them
// in ./bin); a missing one is built into a temporary directory.
func New(t testing.TB) *Binaries {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return &Binaries{t: t, root: root, dir: os.Getenv("CRDPLANE_BIN_DIR"), paths: map[string]string{}}
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// packageOf is the main package of a binary name.
func packageOf(name string) (string, bool) {
	switch name {
	case "etcd":
		return "./deploy/etcd", true
	case "crdplane":
		return "./cmd/crdplane", true
	}
	if svc, ok := strings.CutPrefix(name, "crdplane-"); ok {
		switch svc {
		case "gateway", "registry", "validator", "converter", "storage":
			return "./services/" + svc + "/cmd/" + name, true
		}
	}
	return "", false
}

// Path is the path of the binary name (crdplane-<service>, crdplane or
// etcd).
func (b *Binaries) Path(name string) string {
	b.t.Helper()
	if p, ok := b.paths[name]; ok {
		return p
	}
	pkg, ok := packageOf(name)
	if !ok {
		b.t.Fatalf("no binary %q in this repository", name)
	}
	if b.dir != "" {
		if p := filepath.Join(b.dir, name); isFile(p) {
			b.paths[name] = p
			return p
		}
	}
	if b.tmp == "" {
		b.tmp = b.t.TempDir()
	}
	p := filepath.Join(b.tmp, name)
	cmd := exec.Command("go", "build", "-o", p, pkg)
	cmd.Dir = b.root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	b.paths[name] = p
	return p
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Check runs binary name with args in its parse-only mode and reports an
// error on t when it does not exit 0. where names the manifest.
func (b *Binaries) Check(t testing.TB, where, name string, args []string) {
	t.Helper()
	check := "--check-flags"
	if name == "etcd" {
		check = "--version"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.Path(name), append(append([]string(nil), args...), check)...)
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: %s does not accept its arguments %q: %v\n%s", where, name, args, err, out.String())
	}
}
