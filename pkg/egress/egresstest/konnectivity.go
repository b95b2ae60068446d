package egresstest

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	konnectivity "sigs.k8s.io/apiserver-network-proxy/konnectivity-client/proto/client"
)

// Konnectivity is a minimal konnectivity server (the GRPC proxy protocol
// of apiserver-network-proxy) on a Unix socket: each ProxyService.Proxy
// stream dials one connection (DIAL_REQ, DIAL_RSP), carries its bytes
// (DATA both ways) and closes it (CLOSE_REQ, CLOSE_RSP).
type Konnectivity struct {
	konnectivity.UnimplementedProxyServiceServer

	// Socket is the Unix socket the server listens on.
	Socket string
	// LocalAddr, when set before the first tunnel, is the source address
	// of the server's connections.
	LocalAddr *net.TCPAddr

	hosts  map[string]string
	srv    *grpc.Server
	dials  atomic.Int64
	nextID atomic.Int64
	mu     sync.Mutex
	asked  []string
}

// StartKonnectivity serves a konnectivity server on socket; hosts maps
// the addresses asked for to the addresses dialled. It stops when t ends.
func StartKonnectivity(t testing.TB, socket string, hosts map[string]string) *Konnectivity {
	t.Helper()
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	k := &Konnectivity{Socket: socket, hosts: hosts, srv: grpc.NewServer()}
	konnectivity.RegisterProxyServiceServer(k.srv, k)
	go func() { _ = k.srv.Serve(ln) }()
	t.Cleanup(k.srv.Stop)
	return k
}

// Stop stops the server and closes its tunnels.
func (k *Konnectivity) Stop() { k.srv.Stop() }

// Dials is the number of connections the server opened for its clients.
func (k *Konnectivity) Dials() int64 { return k.dials.Load() }

// Targets lists the addresses asked for in dial requests, in order.
func (k *Konnectivity) Targets() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.asked...)
}

// Proxy serves one tunnel.
func (k *Konnectivity) Proxy(stream konnectivity.ProxyService_ProxyServer) error {
	var sendMu sync.Mutex
	send := func(p *konnectivity.Packet) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(p)
	}
	pkt, err := stream.Recv()
	if err != nil {
		return err
	}
	req := pkt.GetDialRequest()
	if pkt.Type != konnectivity.PacketType_DIAL_REQ || req == nil {
		return errors.New("egresstest: the first packet is not a DIAL_REQ")
	}
	k.mu.Lock()
	k.asked = append(k.asked, req.Address)
	k.mu.Unlock()
	addr := req.Address
	if a, ok := k.hosts[addr]; ok {
		addr = a
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if k.LocalAddr != nil {
		d.LocalAddr = k.LocalAddr
	}
	back, err := d.DialContext(stream.Context(), req.Protocol, addr)
	if err != nil {
		return send(&konnectivity.Packet{Type: konnectivity.PacketType_DIAL_RSP, Payload: &konnectivity.Packet_DialResponse{
			DialResponse: &konnectivity.DialResponse{Random: req.Random, Error: err.Error()}}})
	}
	defer func() { _ = back.Close() }()
	k.dials.Add(1)
	id := k.nextID.Add(1)
	if err := send(&konnectivity.Packet{Type: konnectivity.PacketType_DIAL_RSP, Payload: &konnectivity.Packet_DialResponse{
		DialResponse: &konnectivity.DialResponse{Random: req.Random, ConnectID: id}}}); err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := back.Read(buf)
			if n > 0 {
				data := append([]byte(nil), buf[:n]...)
				if send(&konnectivity.Packet{Type: konnectivity.PacketType_DATA, Payload: &konnectivity.Packet_Data{
					Data: &konnectivity.Data{ConnectID: id, Data: data}}}) != nil {
					return
				}
			}
			if err != nil {
				_ = send(&konnectivity.Packet{Type: konnectivity.PacketType_CLOSE_RSP, Payload: &konnectivity.Packet_CloseResponse{
					CloseResponse: &konnectivity.CloseResponse{ConnectID: id}}})
				return
			}
		}
	}()
	for {
		pkt, err := stream.Recv()
		if err != nil {
			return nil // the client is gone
		}
		switch pkt.Type {
		case konnectivity.PacketType_DATA:
			if _, err := back.Write(pkt.GetData().GetData()); err != nil {
				return nil
			}
		case konnectivity.PacketType_CLOSE_REQ:
			_ = back.Close()
			return send(&konnectivity.Packet{Type: konnectivity.PacketType_CLOSE_RSP, Payload: &konnectivity.Packet_CloseResponse{
				CloseResponse: &konnectivity.CloseResponse{ConnectID: id}}})
		}
	}
}
