// Package egresstest is an HTTP CONNECT proxy for tests of egress
// selection: a konnectivity-style proxy in front of a network the client
// cannot reach, which counts the tunnels it opens.
package egresstest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crdplane/crdplane/pkg/etcdtls/etcdtlstest"
)

// Options configures a Proxy.
type Options struct {
	// Network and Addr are where it listens ("tcp" and "127.0.0.1:0" when
	// empty; "unix" and a socket path for a UDS proxy).
	Network, Addr string
	// TLS, when set, serves the proxy over TLS (set ClientAuth to require
	// the client's certificate, as a konnectivity server does).
	TLS *tls.Config
	// Hosts maps the host:port a client asks for to the address dialled:
	// names only the proxy resolves.
	Hosts map[string]string
	// LocalAddr, when set, is the source address of the proxy's own
	// connections (a backend can then accept the proxy only).
	LocalAddr *net.TCPAddr
}

// Proxy is a running HTTP CONNECT proxy.
type Proxy struct {
	// Addr is the listening address (host:port, or the socket path).
	Addr string
	// URL is http://Addr or https://Addr (TCP only).
	URL string

	opts     Options
	ln       net.Listener
	connects atomic.Int64
	mu       sync.Mutex
	targets  []string
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// Start starts a proxy; it stops when t ends.
func Start(t testing.TB, opts Options) *Proxy {
	t.Helper()
	p, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Listen starts a proxy (Close stops it).
func Listen(opts Options) (*Proxy, error) {
	if opts.Network == "" {
		opts.Network = "tcp"
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen(opts.Network, opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("egresstest: %w", err)
	}
	p := &Proxy{opts: opts, ln: ln, Addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	if opts.TLS != nil {
		p.ln = tls.NewListener(ln, opts.TLS)
		p.URL = "https://" + p.Addr
	} else {
		p.URL = "http://" + p.Addr
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Connects is the number of CONNECT requests the proxy answered 200.
func (p *Proxy) Connects() int64 { return p.connects.Load() }

// Targets lists the addresses asked for in CONNECT requests, in order.
func (p *Proxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c)
		}()
	}
}

func (p *Proxy) handle(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	target := req.RequestURI
	p.mu.Lock()
	p.targets = append(p.targets, target)
	p.mu.Unlock()
	addr := target
	if a, ok := p.opts.Hosts[target]; ok {
		addr = a
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if p.opts.LocalAddr != nil {
		d.LocalAddr = p.opts.LocalAddr
	}
	back, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	p.track(back)
	defer p.untrack(back)
	p.connects.Add(1)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(back, br) // br: bytes already buffered, then c
		closeWrite(back)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, back)
		closeWrite(c)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// ServerTLS is the TLS of a proxy serving pki's server certificate and
// requiring a client certificate issued by pki's CA.
func ServerTLS(t testing.TB, pki *etcdtlstest.PKI) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(pki.ServerCertFile, pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

// WriteConfig writes an EgressSelectorConfiguration (YAML or JSON) to a
// file in t's temporary directory and returns its path.
func WriteConfig(t testing.TB, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "egress-selector.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
