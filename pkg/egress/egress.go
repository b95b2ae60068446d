// Package egress routes a server's outgoing connections as kube-apiserver's
// --egress-selector-config-file does: an EgressSelectorConfiguration
// (apiserver.k8s.io/v1beta1, v1alpha1 or v1) names, per egress selection
// (cluster, controlplane, etcd), how a connection is made: Direct, or
// through a proxy speaking HTTPConnect (over TCP, http:// or https:// with
// a client certificate, or over a Unix socket) or GRPC (konnectivity, over
// a Unix socket).
//
// The API:
//
//	cfg, err := egress.ReadConfigFile(path) // upstream's decoding and validation
//	sel, err := egress.New(cfg)             // nil cfg: every selection Direct
//	d := sel.Dialer(egress.Cluster)         // never nil; also on a nil *Selector
//	conn, err := d.DialContext(ctx, "tcp", "webhook.ns.svc:443")
//
// A Dialer's DialContext fits http.Transport.DialContext: the address is
// the one the connection is for (the proxy gets it in its CONNECT request
// or dial request and resolves it on its side), and the context bounds
// the dial, proxy handshake included.
//
// Which selection to use is upstream's: a webhook named by
// clientConfig.service dials through Cluster, a webhook named by
// clientConfig.url through ControlPlane (k8s.io/apiserver's
// NewDefaultAuthenticationInfoResolverWrapper), and the aggregator proxies
// to an APIService's Service through Cluster.
//
// Everything but plain-HTTP HTTPConnect is k8s.io/apiserver's
// pkg/server/egressselector (dialers, errors, spans, and its
// apiserver_egress_dialer_* metrics, which go to component-base's legacy
// registry: crdplane's /metrics serves it beside its own, pkg/metrics). An HTTPConnect proxy at an http:// URL is dialled here, with
// upstream's CONNECT exchange and wording, over plain TCP: upstream v0.37
// validates that configuration and then dereferences its absent tlsConfig
// (kubernetes/kubernetes#92690, #136470).
package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/server/egressselector"
	egressmetrics "k8s.io/apiserver/pkg/server/egressselector/metrics"
)

// Name is an egress selection's name.
type Name string

// The egress selections kube-apiserver knows.
const (
	// Cluster is for traffic to the system Kubernetes manages: webhooks
	// named by a Service, aggregated APIServices, nodes and pods.
	Cluster Name = "cluster"
	// ControlPlane is for traffic to the control plane: webhooks named by a
	// URL.
	ControlPlane Name = "controlplane"
	// Etcd is for traffic to etcd.
	Etcd Name = "etcd"
)

// DialFunc dials addr on network; it fits http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer makes the connections of one egress selection.
type Dialer struct {
	name     Name
	protocol string // apiserver.ProtocolDirect, ProtocolHTTPConnect or ProtocolGRPC
	dial     DialFunc
}

// DialContext connects to addr on network, through the selection's proxy
// if it has one.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.dial(ctx, network, addr)
}

// Direct reports whether the selection dials without a proxy.
func (d *Dialer) Direct() bool { return d.protocol == string(apiserver.ProtocolDirect) }

// Name is the selection's name.
func (d *Dialer) Name() Name { return d.name }

// Protocol is the selection's proxy protocol: Direct, HTTPConnect or GRPC.
func (d *Dialer) Protocol() string { return d.protocol }

// Selector holds the dialer of every egress selection.
type Selector struct {
	dialers map[Name]*Dialer
}

// directDial is upstream's Direct dialer: net/http's default transport's
// (30s connect timeout, 30s keep-alive).
var directDial DialFunc = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext

// ReadConfigFile reads an EgressSelectorConfiguration file as
// kube-apiserver reads --egress-selector-config-file: strictly decoded
// (apiserver.k8s.io v1beta1, v1alpha1 or v1), then validated, with
// upstream's error wording. An empty path is no configuration (nil).
func ReadConfigFile(path string) (*apiserver.EgressSelectorConfiguration, error) {
	if path == "" {
		return nil, nil
	}
	cfg, err := egressselector.ReadEgressSelectorConfiguration(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read egress selector config: %w", err)
	}
	if errs := egressselector.ValidateEgressSelectorConfiguration(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("failed to validate egress selector configuration: %w", errs.ToAggregate())
	}
	return cfg, nil
}

// Load reads the configuration file at path and builds its dialers, as
// kube-apiserver's --egress-selector-config-file (ReadConfigFile, then
// New, with upstream's wording). An empty path is no selector (nil: every
// selection Direct).
func Load(path string) (*Selector, error) {
	cfg, err := ReadConfigFile(path)
	if err != nil || cfg == nil {
		return nil, err
	}
	sel, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to setup egress selector with config %#v: %w", cfg, err)
	}
	return sel, nil
}

// New builds the dialers of cfg's egress selections. A nil cfg, or a
// selection cfg does not name, dials directly (as upstream). cfg is
// expected to be validated (ReadConfigFile does); New still refuses what
// it cannot build, with upstream's wording.
func New(cfg *apiserver.EgressSelectorConfiguration) (*Selector, error) {
	s := &Selector{dialers: map[Name]*Dialer{}}
	if cfg == nil {
		return s, nil
	}
	for _, sel := range cfg.EgressSelections {
		name := Name(strings.ToLower(sel.Name))
		switch name {
		case Cluster, ControlPlane, Etcd:
		default:
			return nil, fmt.Errorf("unrecognized service name %s", sel.Name)
		}
		d := &Dialer{name: name, protocol: string(sel.Connection.ProxyProtocol)}
		if c := sel.Connection; c.ProxyProtocol == apiserver.ProtocolHTTPConnect && c.Transport != nil &&
			c.Transport.TCP != nil && c.Transport.UDS == nil && strings.HasPrefix(c.Transport.TCP.URL, "http://") {
			u, err := url.Parse(c.Transport.TCP.URL)
			if err != nil {
				return nil, fmt.Errorf("failed to create dialer for egressSelection %q: invalid proxy server url %q: %w", name, c.Transport.TCP.URL, err)
			}
			d.dial = plainHTTPConnect(u.Host)
		} else {
			one, err := egressselector.NewEgressSelector(&apiserver.EgressSelectorConfiguration{
				EgressSelections: []apiserver.EgressSelection{sel},
			})
			if err != nil {
				return nil, err
			}
			dial, err := one.Lookup(egressType(name).AsNetworkContext())
			if err != nil {
				return nil, fmt.Errorf("egress selection %q: %w", name, err)
			}
			d.dial = DialFunc(dial)
		}
		s.dialers[name] = d
	}
	return s, nil
}

// Dialer returns the dialer of selection name: Direct when the
// configuration does not name it, or s is nil.
func (s *Selector) Dialer(name Name) *Dialer {
	if s != nil {
		if d, ok := s.dialers[name]; ok {
			return d
		}
	}
	return &Dialer{name: name, protocol: string(apiserver.ProtocolDirect), dial: directDial}
}

func egressType(n Name) egressselector.EgressType {
	switch n {
	case ControlPlane:
		return egressselector.ControlPlane
	case Etcd:
		return egressselector.Etcd
	default:
		return egressselector.Cluster
	}
}

// plainHTTPConnect dials an HTTPConnect proxy at proxyAddr over plain TCP
// and asks it for a tunnel, as upstream's dialer does over TLS (same
// request, limits, errors and metrics).
func plainHTTPConnect(proxyAddr string) DialFunc {
	var d net.Dialer
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		m := egressmetrics.Metrics
		start := m.Clock().Now()
		m.ObserveDialStart(egressmetrics.ProtocolHTTPConnect, egressmetrics.TransportTCP)
		conn, err := d.DialContext(ctx, "tcp", proxyAddr)
		if err != nil {
			m.ObserveDialFailure(egressmetrics.ProtocolHTTPConnect, egressmetrics.TransportTCP, egressmetrics.StageConnect)
			return nil, err
		}
		tunnel, err := tunnelHTTPConnect(ctx, conn, proxyAddr, addr)
		if err != nil {
			m.ObserveDialFailure(egressmetrics.ProtocolHTTPConnect, egressmetrics.TransportTCP, egressmetrics.StageProxy)
			return nil, err
		}
		m.ObserveDialLatency(m.Clock().Now().Sub(start), egressmetrics.ProtocolHTTPConnect, egressmetrics.TransportTCP)
		return tunnel, nil
	}
}

// tunnelHTTPConnect is upstream's CONNECT exchange (egress_selector.go):
// the same request (Host 127.0.0.1), the response headers bounded by
// http.DefaultMaxHeaderBytes, the same errors. The context's deadline
// bounds the exchange.
func tunnelHTTPConnect(ctx context.Context, proxyConn net.Conn, proxyAddress, addr string) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = proxyConn.SetDeadline(deadline)
		defer func() { _ = proxyConn.SetDeadline(time.Time{}) }()
	}
	if _, err := fmt.Fprintf(proxyConn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, "127.0.0.1"); err != nil {
		_ = proxyConn.Close()
		return nil, fmt.Errorf("writing CONNECT to %s via proxy %s failed: %w", addr, proxyAddress, err)
	}
	br := bufio.NewReader(io.LimitReader(proxyConn, http.DefaultMaxHeaderBytes))
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = proxyConn.Close()
		return nil, fmt.Errorf("reading HTTP response from CONNECT to %s via proxy %s failed: %w",
			addr, proxyAddress, err)
	}
	if res.StatusCode != http.StatusOK {
		_ = proxyConn.Close()
		return nil, fmt.Errorf("proxy error from %s while dialing %s, code %d: %v",
			proxyAddress, addr, res.StatusCode, res.Status)
	}
	if br.Buffered() > 0 {
		_ = proxyConn.Close()
		return nil, fmt.Errorf("unexpected %d bytes of buffered data from CONNECT proxy %q",
			br.Buffered(), proxyAddress)
	}
	return proxyConn, nil
}
