package etcdtls

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// checkRetry is the pause between two attempts of CheckConnection.
const checkRetry = 100 * time.Millisecond

// verdictWait bounds how long Probe waits for the server's verdict on the
// client certificate once the handshake is done.
const verdictWait = 500 * time.Millisecond

// CheckConnection waits until conn, an etcd client's connection
// (clientv3.Client.ActiveConnection) to endpoints, reaches an etcd server: a
// gRPC health check gets an answer, whatever its status. etcd requests wait
// for a connection until their deadline and then report only that;
// CheckConnection instead returns, when ctx ends first, why no connection
// could be made: a server certificate of an unknown authority, a client
// certificate the server refused (found by Probe with tlsCfg, the client's
// TLS configuration, when the connection failed), a refused connection.
func CheckConnection(ctx context.Context, conn grpc.ClientConnInterface, tlsCfg *tls.Config, endpoints []string) error {
	hc := healthpb.NewHealthClient(conn)
	var last, tlsErr error
	probed := false
	for {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if tlsErr != nil {
				return tlsErr
			}
			if last == nil {
				last = err
			}
			return last
		}
		if status.Code(err) != codes.Unavailable {
			return nil // the server answered
		}
		last = err
		if !probed {
			// gRPC may report a refused client certificate as a broken
			// connection only.
			probed = true
			tlsErr = probeAll(ctx, tlsCfg, endpoints)
		}
		select {
		case <-ctx.Done():
		case <-time.After(checkRetry):
		}
	}
}

// probeAll probes the TLS endpoints and returns the first failure.
func probeAll(ctx context.Context, tlsCfg *tls.Config, endpoints []string) error {
	for _, ep := range endpoints {
		scheme, _, _ := strings.Cut(ep, "://")
		if scheme != "https" && (tlsCfg == nil || strings.Contains(ep, "://")) {
			continue // plain text, a unix socket or TLS off
		}
		err := Probe(ctx, tlsCfg, ep)
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			continue // no TLS problem: gRPC's error says it as well
		}
		if err != nil {
			return fmt.Errorf("TLS with %s: %w", ep, err)
		}
	}
	return nil
}

// Probe connects to endpoint (https://host:port or host:port) over TLS with
// cfg (nil: the system roots, no client certificate), as an etcd client
// does, and returns why the connection fails: the handshake's error, or the
// server's refusal of the client certificate, which with TLS 1.3 comes only
// after the handshake (Probe waits up to 500ms for it). nil: the server
// accepted the connection.
func Probe(ctx context.Context, cfg *tls.Config, endpoint string) error {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		host = u.Host
	}
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2"} // as gRPC, which servers may insist on
	}
	if cfg.ServerName == "" {
		name, _, err := net.SplitHostPort(host)
		if err != nil {
			return fmt.Errorf("endpoint %q: %w", endpoint, err)
		}
		cfg.ServerName = name
	}
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }() // a probe connection: nothing written
	deadline := time.Now().Add(verdictWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		return err
	}
	// The server sends nothing to a client it accepts until the client
	// speaks, but an alert to one it refuses.
	_, err = conn.Read(make([]byte, 1))
	switch {
	case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	case errors.Is(err, io.EOF):
		return errors.New("the server closed the connection after the TLS handshake")
	}
	return err
}
