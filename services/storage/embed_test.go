package storage

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestEmbeddedEtcdHasNoOpenListener: by default the embedded etcd serves
// clients on a unix socket inside the private data directory (no TCP port a
// local user could write through), and its peer listener refuses a TLS
// client without the certificate only this process has.
func TestEmbeddedEtcdHasNoOpenListener(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(c *Config) { c.DataDir = dir })
	eps := e.svc.Client().Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "unix://") {
		t.Fatalf("embedded etcd endpoints %v, want one unix socket", eps)
	}
	sock := strings.TrimPrefix(eps[0], "unix://")
	if filepath.Dir(sock) != dir {
		t.Errorf("socket %s is not in the data directory %s", sock, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the socket's directory is %o, want 700", fi.Mode().Perm())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.svc.Client().Put(ctx, "/probe", "x"); err != nil {
		t.Fatalf("put over the socket: %v", err)
	}

	peers := e.svc.embed.etcd.Peers
	if len(peers) != 1 {
		t.Fatalf("%d peer listeners", len(peers))
	}
	addr := peers[0].Addr().String()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probing our own listener
	resp, err := c.Get("https://" + addr + "/members")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the peer listener answered %s to a client without a certificate", resp.Status)
	}
}
