package grpcx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// TLSFiles name the PEM files of a service's internal mutual TLS: its
// certificate and key (issued for its identity, see IdentityPrefix) and the
// CA that issued every service's certificate, which verifies both the
// servers it dials and the callers it serves.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// Enabled reports whether any file is named (then all must be).
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// TLS is a service's internal mutual TLS: credentials for its gRPC server
// (TLS 1.3, client certificates verified against the CA) and for its
// connections (its certificate presented, the server's verified against
// the CA for the dial target's host name). The key pair is read again
// when its files change (a rotated Secret is used from the next
// handshake); the CA is read once.
type TLS struct {
	roots *x509.CertPool
	pair  *keyPair
}

// LoadTLS reads f's files.
func LoadTLS(f TLSFiles) (*TLS, error) {
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, fmt.Errorf("internal TLS needs a certificate, a key and a CA file (got cert %q, key %q, CA %q)", f.CertFile, f.KeyFile, f.CAFile)
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("internal TLS CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("internal TLS CA %s: no PEM certificate", f.CAFile)
	}
	kp := &keyPair{certFile: f.CertFile, keyFile: f.KeyFile}
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	return &TLS{roots: roots, pair: kp}, nil
}

// Identity is the service the certificate names (Identity of its leaf; ""
// when it names none).
func (t *TLS) Identity() string {
	c, err := t.pair.get()
	if err != nil || c.Leaf == nil {
		return ""
	}
	return Identity(c.Leaf)
}

// ServerConfig is the tls.Config of a gRPC server: a client certificate is
// verified against the CA when presented. One that is not presented lets
// the handshake finish, so that the call can be refused with a status that
// says why (Unauthenticated, by the Authorizer) rather than a bare TLS
// alert.
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  t.roots,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.pair.get()
		},
	}
}

// ClientConfig is the tls.Config of a connection: the service's
// certificate presented, the server's verified against the CA (the server
// name is the dial target's host, filled in by gRPC).
func (t *TLS) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    t.roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.pair.get()
		},
	}
}

// ServerCredentials are the gRPC server credentials of ServerConfig.
func (t *TLS) ServerCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(t.ServerConfig())
}

// ClientCredentials are the gRPC client credentials of ClientConfig.
func (t *TLS) ClientCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(t.ClientConfig())
}

var clientTLS atomic.Pointer[TLS]

// SetClientTLS makes every connection Dial opens from now on (but
// in-process ones) use t's client credentials (nil: plaintext). A process
// runs one service, whose identity its certificate is: pkg/app sets it
// from the service's flags before the service is built.
func SetClientTLS(t *TLS) { clientTLS.Store(t) }

// keyPair is a certificate and key read from files, read again when
// either file's modification time or size changes (checked at most once a
// second).
type keyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	if k.cert != nil && now.Sub(k.checked) < time.Second {
		return k.cert, nil
	}
	k.checked = now
	stamp, err := fileStamp(k.certFile, k.keyFile)
	if err == nil && k.cert != nil && stamp == k.stamp {
		return k.cert, nil
	}
	pair, lerr := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err = errors.Join(err, lerr); err != nil {
		if k.cert != nil {
			return k.cert, nil // mid-rotation: keep the pair that worked
		}
		return nil, fmt.Errorf("internal TLS certificate: %w", err)
	}
	k.cert, k.stamp = &pair, stamp
	return k.cert, nil
}

func fileStamp(files ...string) (string, error) {
	var s string
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return s, nil
}
