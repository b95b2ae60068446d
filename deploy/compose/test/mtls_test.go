package composetest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/grpcx"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// mtlsRefusals: internal gRPC is mutual TLS with an allow-list. From the
// host, a call to a storage replica's gRPC port (published on loopback by
// docker-compose.test.yaml)
//
//   - in plaintext fails (no TLS handshake);
//   - over TLS without a client certificate is Unauthenticated;
//   - with the validator's certificate (a service storage does not answer)
//     is PermissionDenied, and the replica logs the refusal;
//   - with the gateway's certificate succeeds.
//
// The certificates are the pki step's, copied out of its (exited)
// container.
func (s *stack) mtlsRefusals() {
	t := s.t
	t.Helper()
	pkiC := s.MustContainers("pki")
	if len(pkiC) != 1 {
		t.Fatalf("pki containers: %v", pkiC)
	}
	dir := t.TempDir()
	for _, svc := range []string{"gateway", "validator"} {
		s.MustDocker("cp", pkiC[0]+":/internal/"+svc, filepath.Join(dir, svc))
	}
	storage := s.MustContainers("storage")[0]
	addr := s.MustHostAddr(storage, "7001")
	load := func(svc string) *grpcx.TLS {
		d := filepath.Join(dir, svc)
		tl, err := grpcx.LoadTLS(grpcx.TLSFiles{CertFile: filepath.Join(d, "tls.crt"), KeyFile: filepath.Join(d, "tls.key"), CAFile: filepath.Join(d, "ca.crt")})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "gateway", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	asService := func(svc string) credentials.TransportCredentials {
		c := load(svc).ClientConfig()
		c.ServerName = "storage" // the name the services dial it by
		return credentials.NewTLS(c)
	}
	list := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cc.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = storagev1.NewStorageServiceClient(cc).List(ctx, &storagev1.ListRequest{Prefix: "/registry/apiextensions.k8s.io/customresourcedefinitions/"})
		return err
	}

	if err := list(insecure.NewCredentials()); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext call to storage: %v, want Unavailable (no TLS handshake)", err)
	} else {
		t.Logf("plaintext: refused: %v", err)
	}
	noCert := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "storage", MinVersion: tls.VersionTLS13})
	if err := list(noCert); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "storage requires mutual TLS") {
		t.Errorf("call to storage without a client certificate: %v, want Unauthenticated", err)
	} else {
		t.Logf("no client certificate: %v", err)
	}
	if err := list(asService("validator")); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "storage does not answer validator") {
		t.Errorf("call to storage with the validator's certificate: %v, want PermissionDenied", err)
	} else {
		t.Logf("validator's certificate: %v", err)
	}
	if err := list(asService("gateway")); err != nil {
		t.Errorf("call to storage with the gateway's certificate: %v", err)
	}
	logs, err := s.Docker("logs", storage)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "refused a gRPC call from a caller not allowed") || !strings.Contains(logs, "caller=validator") {
		t.Errorf("storage %s did not log the validator's refused call", storage)
	}
}
