package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/crdplane/crdplane/pkg/grpcx/pki"
	"github.com/crdplane/crdplane/platform/modules"
)

// internalPKI is crdplane internal-pki: the internal CA and a certificate
// for each service, for crdplane run --target=<service> (and the
// per-service binaries) over mutual TLS.
func internalPKI(args []string) error {
	fs := flag.NewFlagSet("crdplane internal-pki", flag.ExitOnError)
	dir := fs.String("dir", filepath.Join(".run", "etcd", "pki", "internal"), "directory of ca/ and <service>/{ca.crt,tls.crt,tls.key}; a valid CA and certificates there are kept")
	hosts := fs.String("hosts", "", "extra comma-separated DNS names/IPs for every service's certificate (each already names <service>, crdplane-<service> and its in-cluster names, localhost and the loopback addresses)")
	namespace := fs.String("namespace", "crdplane", "Kubernetes namespace of the in-cluster names (crdplane-<service>.<namespace>.svc)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := pki.Generate(pki.Config{Dir: *dir, Services: modules.Modules.Names(), Namespace: *namespace, Hosts: splitList(*hosts)}); err != nil {
		return err
	}
	fmt.Printf("internal PKI in %s; run a service over mutual TLS with, e.g.:\n", *dir)
	d := filepath.Join(*dir, modules.Storage)
	fmt.Printf("  crdplane run --target=storage --grpc-tls-cert-file=%s --grpc-tls-key-file=%s --grpc-tls-ca-file=%s\n",
		filepath.Join(d, "tls.crt"), filepath.Join(d, "tls.key"), filepath.Join(d, "ca.crt"))
	fmt.Printf("(services: %s)\n", strings.Join(modules.Modules.Names(), ", "))
	return nil
}
