// Command crdplane-pki prepares what a crdplane gateway needs to serve
// users over TLS, for docker compose (its init step) and for creating
// Kubernetes Secrets by hand:
//
//   - in --dir: ca.crt, tls.crt (serving certificate and CA chain), tls.key
//     and tokens.csv (a bearer token for an admin user), generated on the
//     first run and kept afterwards (regenerated when the serving
//     certificate nears its expiry or misses one of --hosts);
//   - with --internal-dir: the internal mutual TLS PKI (pkg/grpcx/pki), a
//     CA and a certificate for each service, kept across runs;
//   - --kubeconfig: a kubeconfig reaching the gateway at --server with that
//     CA and token, rewritten on every run.
//
// Run as root in a container, --owner gives the --dir files to the gateway's
// user, and the kubeconfig is given to the owner of the directory it is
// written to (a bind-mounted host directory), so that the host user can read
// it.
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	internalpki "github.com/crdplane/crdplane/pkg/grpcx/pki"
	"github.com/crdplane/crdplane/services/gateway/localpki"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdplane-pki:", err)
		os.Exit(1)
	}
}

type options struct {
	dir         string
	internalDir string
	namespace   string
	kubeconfig  string
	server      string
	hosts       []string
	owner       string
	user        string
}

func run(args []string) error {
	var o options
	fs := flag.NewFlagSet("crdplane-pki", flag.ExitOnError)
	fs.StringVar(&o.dir, "dir", "pki", "directory of the gateway's ca.crt, tls.crt, tls.key and tokens.csv")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write a kubeconfig for --server (empty: none)")
	fs.StringVar(&o.server, "server", "https://127.0.0.1:6443", "the gateway URL the kubeconfig names")
	hosts := fs.String("hosts", "localhost,127.0.0.1,::1", "comma-separated DNS names and IPs of the serving certificate (the --server host is added)")
	fs.StringVar(&o.owner, "owner", "", "uid:gid to give the --dir files to (empty: leave them to the current user)")
	fs.StringVar(&o.user, "user", "crdplane-admin", "user name of the generated token")
	fs.StringVar(&o.internalDir, "internal-dir", "", "also write the internal mutual TLS PKI there (package pkg/grpcx/pki): ca/ (the CA) and <service>/ca.crt, tls.crt, tls.key for each service, kept across runs (empty: none)")
	fs.StringVar(&o.namespace, "namespace", "crdplane", "Kubernetes namespace of the in-cluster DNS names of the internal certificates (crdplane-<service>.<namespace>.svc)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			o.hosts = append(o.hosts, h)
		}
	}
	if o.kubeconfig != "" {
		u, err := parseServer(o.server)
		if err != nil {
			return err
		}
		o.hosts = append(o.hosts, u)
	}

	uid, gid := -1, -1
	if o.owner != "" {
		var err error
		if uid, gid, err = parseOwner(o.owner); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	ca, token, err := ensurePKI(o, uid, gid)
	if err != nil {
		return err
	}
	if o.internalDir != "" {
		if err := internalpki.Generate(internalpki.Config{Dir: o.internalDir, Namespace: o.namespace, Chown: uid >= 0, UID: uid, GID: gid}); err != nil {
			return err
		}
		fmt.Printf("internal PKI in %s\n", o.internalDir)
	}
	if o.kubeconfig == "" {
		return nil
	}
	if err := writeKubeconfig(o.kubeconfig, o.server, ca, token); err != nil {
		return err
	}
	fmt.Printf("wrote %s for %s\n", o.kubeconfig, o.server)
	return nil
}

// parseServer returns the host of an https:// URL.
func parseServer(server string) (string, error) {
	rest, ok := strings.CutPrefix(server, "https://")
	if !ok {
		return "", fmt.Errorf("--server %q: want an https:// URL", server)
	}
	rest, _, _ = strings.Cut(rest, "/")
	host, _, err := net.SplitHostPort(rest)
	if err != nil {
		host = strings.Trim(rest, "[]")
	}
	return host, nil
}

func parseOwner(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	if uid, err = strconv.Atoi(u); err != nil || !ok {
		return 0, 0, fmt.Errorf("--owner %q: want uid:gid", s)
	}
	if gid, err = strconv.Atoi(g); err != nil {
		return 0, 0, fmt.Errorf("--owner %q: want uid:gid", s)
	}
	return uid, gid, nil
}

// ensurePKI returns the CA certificate and token in o.dir, generating them
// when missing or no longer fit.
func ensurePKI(o options, uid, gid int) (caPEM []byte, token string, err error) {
	path := func(name string) string { return filepath.Join(o.dir, name) }
	caPEM, caErr := os.ReadFile(path("ca.crt"))
	tokens, tokErr := os.ReadFile(path("tokens.csv"))
	if caErr == nil && tokErr == nil && servingCertFits(path("tls.crt"), path("tls.key"), o.hosts) {
		token, _, _ = strings.Cut(strings.TrimSpace(string(tokens)), ",")
		if token != "" {
			return caPEM, token, nil
		}
	}

	var names []string
	var ips []net.IP
	for _, h := range o.hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	pki, err := localpki.Generate(names, ips)
	if err != nil {
		return nil, "", err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, "", err
	}
	token = hex.EncodeToString(b)
	// token,user,uid,groups
	line := fmt.Sprintf("%s,%s,%s,system:masters\n", token, o.user, o.user)
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.crt", pki.CACertPEM, 0o644},
		{"tls.crt", pki.ServingCertPEM, 0o644},
		{"tls.key", pki.ServingKeyPEM, 0o600},
		{"tokens.csv", []byte(line), 0o600},
	} {
		if err := writeFile(path(f.name), f.data, f.mode, uid, gid); err != nil {
			return nil, "", err
		}
	}
	fmt.Printf("generated a CA, a serving certificate for %s and a token in %s\n", strings.Join(o.hosts, ","), o.dir)
	return pki.CACertPEM, token, nil
}

// servingCertFits reports whether the serving certificate loads, covers
// every host and is valid for at least 30 more days.
func servingCertFits(certFile, keyFile string, hosts []string) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || len(pair.Certificate) == 0 {
		return false
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || time.Until(cert.NotAfter) < 30*24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	if blk, _ := pem.Decode(caPEM); blk == nil {
		return errors.New("ca.crt holds no PEM certificate")
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["crdplane"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	kc.AuthInfos["crdplane"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["crdplane"] = &clientcmdapi.Context{Cluster: "crdplane", AuthInfo: "crdplane", Namespace: "default"}
	kc.CurrentContext = "crdplane"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	// Give the file to the owner of its directory (the host user, through a
	// bind mount).
	uid, gid := -1, -1
	if st, err := os.Stat(filepath.Dir(path)); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Getuid() {
			uid, gid = int(sys.Uid), int(sys.Gid)
		}
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return writeFile(path, data, 0o600, uid, gid)
}

// writeFile writes data atomically (a temporary file renamed over path),
// owned by uid:gid when uid >= 0.
func writeFile(path string, data []byte, mode os.FileMode, uid, gid int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone already once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close() // the write error is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	if uid >= 0 {
		if err := os.Chown(tmp.Name(), uid, gid); err != nil {
			return fmt.Errorf("give %s to %d:%d: %w", path, uid, gid, err)
		}
	}
	return os.Rename(tmp.Name(), path)
}
