package grpcx

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/crdplane/crdplane/pkg/enduser"
)

// Direct in-process calls.
//
// Services that run in one process (crdplane run, the tests) are reachable
// at "inproc://<name>" two ways: through a gRPC server behind an in-memory
// listener (ListenInProcess), and, when published with an InProcess, by
// calling their handlers directly. A connection from Dial takes the direct
// way whenever the name is published: no HTTP/2 framing, no serialization
// and, for unary calls, no goroutine hand-off, while keeping what a gRPC
// call guarantees: each side gets its own copy of every message, errors
// arrive as gRPC statuses (non-status errors as Unknown, context errors as
// Canceled or DeadlineExceeded), a panicking handler fails its call with
// Internal (RecoverUnary), messages over the size limits fail with
// ResourceExhausted (MaxRequestMessageSize, MaxResponseMessageSize), the
// handler's context ends with the
// caller's and carries its deadline, outgoing metadata arrives as incoming
// metadata and headers and trailers set by the handler reach grpc.Header
// and grpc.Trailer call options, server interceptors run, and every call is
// traced (client and server spans named as otelgrpc names them) and counted
// in the crdplane_grpc_* metrics.

var inprocTracer = otel.Tracer("github.com/crdplane/crdplane/pkg/grpcx")

// inprocStreamBuffer is how many messages a stream's sender may be ahead
// of its receiver (gRPC's flow-control window plays this part on a wire).
const inprocStreamBuffer = 64

// InProcessConfig configures an InProcess.
type InProcessConfig struct {
	// UnaryInterceptor and StreamInterceptor run around the handlers, as
	// the server's interceptors do (chain several with ChainUnary or
	// ChainStream).
	UnaryInterceptor  grpc.UnaryServerInterceptor
	StreamInterceptor grpc.StreamServerInterceptor
}

// InProcess serves the services registered on it to Dial("inproc://<name>")
// connections in the same process, by direct calls, once published.
// Register every service before Publish.
type InProcess struct {
	cfg     InProcessConfig
	unary   map[string]*inprocUnary
	streams map[string]*inprocStreamMethod

	ctx    context.Context // parent of every handler's context; cancelled by Stop
	cancel context.CancelFunc

	closing atomic.Bool
	mu      sync.Mutex
	active  int
	idle    chan struct{} // closed once closing with no call active
}

type inprocUnary struct {
	impl    any
	handler grpc.MethodHandler
	stats   *inprocStats
}

type inprocStreamMethod struct {
	impl  any
	desc  grpc.StreamDesc
	info  grpc.StreamServerInfo
	stats *inprocStats
}

// NewInProcess returns an InProcess with nothing registered.
func NewInProcess(cfg InProcessConfig) *InProcess {
	ctx, cancel := context.WithCancel(context.Background())
	return &InProcess{cfg: cfg, unary: map[string]*inprocUnary{}, streams: map[string]*inprocStreamMethod{},
		ctx: ctx, cancel: cancel, idle: make(chan struct{})}
}

// RegisterService registers a service implementation (grpc.ServiceRegistrar).
func (p *InProcess) RegisterService(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		full := "/" + desc.ServiceName + "/" + m.MethodName
		p.unary[full] = &inprocUnary{impl: impl, handler: m.Handler, stats: newInprocStats(full, "unary")}
	}
	for _, s := range desc.Streams {
		full := "/" + desc.ServiceName + "/" + s.StreamName
		p.streams[full] = &inprocStreamMethod{impl: impl, desc: s,
			info:  grpc.StreamServerInfo{FullMethod: full, IsClientStream: s.ClientStreams, IsServerStream: s.ServerStreams},
			stats: newInprocStats(full, rpcType(s.ClientStreams, s.ServerStreams))}
	}
}

// Publish makes p what Dial("inproc://<name>") connections call, replacing
// an earlier InProcess of that name.
func (p *InProcess) Publish(name string) {
	inprocMu.Lock()
	defer inprocMu.Unlock()
	inprocDirect[name] = p
}

// GracefulStop refuses new calls (Unavailable) and waits for the calls in
// progress to end.
func (p *InProcess) GracefulStop() {
	p.beginClose()
	<-p.idle
}

// Stop refuses new calls and cancels the contexts of those in progress.
func (p *InProcess) Stop() {
	p.beginClose()
	p.cancel()
}

func (p *InProcess) beginClose() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closing.Swap(true) && p.active == 0 {
		close(p.idle)
	}
}

func (p *InProcess) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing.Load() {
		return false
	}
	p.active++
	return true
}

func (p *InProcess) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
	if p.active == 0 && p.closing.Load() {
		close(p.idle)
	}
}

func errStopped() error {
	return status.Error(codes.Unavailable, "in-process server stopped")
}

// serverCall is what a handler's context carries: the server side of one
// call (grpc.ServerTransportStream, for grpc.SetHeader and friends).
type serverCall struct {
	method     string
	mu         sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent chan struct{}
	sentOnce   sync.Once
}

func newServerCall(method string) *serverCall {
	return &serverCall{method: method, headerSent: make(chan struct{})}
}

func (c *serverCall) Method() string { return c.method }

func (c *serverCall) SetHeader(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.headerSent:
		return errors.New("transport: the stream is done or SendHeader was already called")
	default:
	}
	c.header = metadata.Join(c.header, md)
	return nil
}

func (c *serverCall) SendHeader(md metadata.MD) error {
	if err := c.SetHeader(md); err != nil {
		return err
	}
	c.sendHeader()
	return nil
}

func (c *serverCall) sendHeader() { c.sentOnce.Do(func() { close(c.headerSent) }) }

func (c *serverCall) SetTrailer(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trailer = metadata.Join(c.trailer, md)
	return nil
}

func (c *serverCall) headers() (header, trailer metadata.MD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.header.Copy(), c.trailer.Copy()
}

// serverContext is the handler's context for a call made with ctx: ended
// with ctx (and by Stop), with ctx's deadline, trace context, baggage and
// outgoing metadata (as incoming metadata), and nothing else of ctx's.
func (p *InProcess) serverContext(ctx context.Context, call *serverCall) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancel(p.ctx)
	unlink := context.AfterFunc(ctx, func() {
		// A deadline ends the handler's context by its own copy of the
		// deadline (DeadlineExceeded, as on a wire), not as a cancellation.
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	if dl, ok := ctx.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		sctx, cancelDeadline = context.WithDeadline(sctx, dl)
		prev := cancel
		cancel = func() { cancelDeadline(); prev() }
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		sctx = trace.ContextWithRemoteSpanContext(sctx, sc)
	}
	if b := baggage.FromContext(ctx); b.Len() > 0 {
		sctx = baggage.ContextWithBaggage(sctx, b)
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		sctx = metadata.NewIncomingContext(sctx, md)
	}
	sctx = grpc.NewContextWithServerTransportStream(sctx, call)
	return sctx, func() { unlink(); cancel() }
}

// toStatus is the status a gRPC server sends for a handler's error.
func toStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return s
	}
	return status.FromContextError(err)
}

// copyStatus is s as the client receives it (its own copy).
func copyStatus(s *status.Status) error { return status.ErrorProto(s.Proto()) }

func copyInto(dst, src any) error {
	d, ok1 := dst.(proto.Message)
	s, ok2 := src.(proto.Message)
	if !ok1 || !ok2 {
		return status.Errorf(codes.Internal, "in-process call: %T or %T is not a protobuf message", dst, src)
	}
	proto.Reset(d)
	proto.Merge(d, s)
	return nil
}

func (p *InProcess) invoke(ctx context.Context, method string, args, reply any, opts []grpc.CallOption) error {
	m := p.unary[method]
	if m == nil {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	if !p.enter() {
		return errStopped()
	}
	defer p.leave()
	start := time.Now()
	ctx, span := m.stats.startClient(ctx)
	call := newServerCall(method)
	sctx, done := p.serverContext(ctx, call)
	sctx, sspan := m.stats.startServer(sctx)

	resp, err := p.callUnary(sctx, m, method, args)
	st := toStatus(err)
	m.stats.end(sspan, &m.stats.server, st, start)
	done()
	call.sendHeader()
	deliverHeaders(call, opts)
	// The caller's context ending decides the caller's outcome, as with a
	// gRPC client.
	if ctxErr := ctx.Err(); ctxErr != nil {
		st = status.FromContextError(ctxErr)
	} else if st == nil {
		if err := copyInto(reply, resp); err != nil {
			st = toStatus(err)
		}
	}
	m.stats.end(span, &m.stats.client, st, start)
	if st != nil {
		return copyStatus(st)
	}
	return nil
}

// callUnary runs a unary handler (and the interceptor) as a gRPC server
// would: the request within the size limit, a panic recovered as Internal,
// the response within the size limit.
func (p *InProcess) callUnary(ctx context.Context, m *inprocUnary, method string, args any) (resp any, err error) {
	if err := checkSize(args, maxRecvMsgSize, "received"); err != nil {
		return nil, err
	}
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, recovered(method, v)
		}
	}()
	dec := func(in any) error { return copyInto(in, args) }
	resp, err = m.handler(m.impl, ctx, dec, p.cfg.UnaryInterceptor)
	if err == nil {
		if serr := checkSize(resp, maxSendMsgSize, "trying to send"); serr != nil {
			return nil, serr
		}
	}
	return resp, err
}

// callStream runs a stream handler (and the interceptor), a panic
// recovered as Internal.
func (p *InProcess) callStream(m *inprocStreamMethod, ss *inprocServerStream) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered(m.info.FullMethod, v)
		}
	}()
	if p.cfg.StreamInterceptor != nil {
		return p.cfg.StreamInterceptor(m.impl, ss, &m.info, m.desc.Handler)
	}
	return m.desc.Handler(m.impl, ss)
}

// The size limits of a server from NewServer, which direct calls keep too.
const (
	maxRecvMsgSize = MaxRequestMessageSize
	maxSendMsgSize = MaxResponseMessageSize
)

// checkSize fails a message over limit as a gRPC server does (the same
// code and wording: "grpc: received message larger than max (N vs. M)").
func checkSize(m any, limit int, verb string) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	if n := proto.Size(msg); n > limit {
		return status.Errorf(codes.ResourceExhausted, "grpc: %s message larger than max (%d vs. %d)", verb, n, limit)
	}
	return nil
}

func deliverHeaders(call *serverCall, opts []grpc.CallOption) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr, _ = call.headers()
		case grpc.TrailerCallOption:
			_, *o.TrailerAddr = call.headers()
		}
	}
}

func (p *InProcess) newStream(ctx context.Context, method string, opts []grpc.CallOption) (grpc.ClientStream, error) {
	m := p.streams[method]
	if m == nil {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	if !p.enter() {
		return nil, errStopped()
	}
	start := time.Now()
	ctx, span := m.stats.startClient(ctx)
	call := newServerCall(method)
	sctx, done := p.serverContext(ctx, call)
	sctx, sspan := m.stats.startServer(sctx)
	cs := &inprocClientStream{ctx: ctx, call: call, opts: opts,
		up: make(chan proto.Message, 1), down: make(chan proto.Message, inprocStreamBuffer), done: make(chan struct{})}
	ss := &inprocServerStream{ctx: sctx, cs: cs}
	go func() {
		defer p.leave()
		st := toStatus(p.callStream(m, ss))
		m.stats.end(sspan, &m.stats.server, st, start)
		done()
		call.sendHeader()
		if ctx.Err() != nil {
			st = status.FromContextError(ctx.Err())
		}
		cs.status = st
		close(cs.done)
		m.stats.end(span, &m.stats.client, st, start)
	}()
	return cs, nil
}

// inprocClientStream is the caller's side of a direct stream.
type inprocClientStream struct {
	ctx       context.Context
	call      *serverCall
	opts      []grpc.CallOption
	up        chan proto.Message // client → handler
	down      chan proto.Message // handler → client
	closeOnce sync.Once
	done      chan struct{}  // closed when the handler has returned
	status    *status.Status // the handler's outcome (nil: OK), set before done closes
}

func (s *inprocClientStream) Header() (metadata.MD, error) {
	select {
	case <-s.call.headerSent:
	case <-s.done:
	case <-s.ctx.Done():
		return nil, status.FromContextError(s.ctx.Err()).Err()
	}
	h, _ := s.call.headers()
	return h, nil
}

func (s *inprocClientStream) Trailer() metadata.MD {
	select {
	case <-s.done:
		_, t := s.call.headers()
		return t
	default:
		return nil
	}
}

func (s *inprocClientStream) CloseSend() error {
	s.closeOnce.Do(func() { close(s.up) })
	return nil
}

func (s *inprocClientStream) Context() context.Context { return s.ctx }

func (s *inprocClientStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "in-process call: %T is not a protobuf message", m)
	}
	select {
	case s.up <- proto.Clone(msg):
		return nil
	case <-s.done:
		return io.EOF // the outcome is RecvMsg's
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

func (s *inprocClientStream) RecvMsg(m any) error {
	select {
	case msg := <-s.down:
		return copyInto(m, msg)
	case <-s.done:
		// Messages sent before the handler returned come first.
		select {
		case msg := <-s.down:
			return copyInto(m, msg)
		default:
		}
		deliverHeaders(s.call, s.opts)
		if s.status != nil {
			return copyStatus(s.status)
		}
		return io.EOF
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

// inprocServerStream is the handler's side of a direct stream.
type inprocServerStream struct {
	ctx context.Context
	cs  *inprocClientStream
}

func (s *inprocServerStream) SetHeader(md metadata.MD) error  { return s.cs.call.SetHeader(md) }
func (s *inprocServerStream) SendHeader(md metadata.MD) error { return s.cs.call.SendHeader(md) }
func (s *inprocServerStream) SetTrailer(md metadata.MD)       { _ = s.cs.call.SetTrailer(md) }
func (s *inprocServerStream) Context() context.Context        { return s.ctx }

func (s *inprocServerStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "in-process call: %T is not a protobuf message", m)
	}
	if err := checkSize(msg, maxSendMsgSize, "trying to send"); err != nil {
		return err
	}
	s.cs.call.sendHeader()
	select {
	case s.cs.down <- proto.Clone(msg):
		return nil
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

func (s *inprocServerStream) RecvMsg(m any) error {
	select {
	case msg, ok := <-s.cs.up:
		if !ok {
			return io.EOF
		}
		if err := checkSize(msg, maxRecvMsgSize, "received"); err != nil {
			return err
		}
		return copyInto(m, msg)
	case <-s.ctx.Done():
		return status.FromContextError(s.ctx.Err()).Err()
	}
}

// inprocStats traces and counts the calls of one method, both sides, as
// the otelgrpc and metrics stats handlers do for calls on a wire.
type inprocStats struct {
	spanName string
	attrs    []attribute.KeyValue
	client   sideStats
	server   sideStats
}

type sideStats struct {
	m                *rpcMetrics
	typ, svc, method string
	started, ok      prometheus.Counter
	inFlight         prometheus.Gauge
	seconds          prometheus.Observer
}

func newInprocStats(full, typ string) *inprocStats {
	svc, method := splitMethod(full)
	side := func(m *rpcMetrics) sideStats {
		return sideStats{m: m, typ: typ, svc: svc, method: method,
			started:  m.started.WithLabelValues(typ, svc, method),
			ok:       m.handled.WithLabelValues(typ, svc, method, codes.OK.String()),
			inFlight: m.inFlight.WithLabelValues(typ, svc, method),
			seconds:  m.seconds.WithLabelValues(typ, svc, method)}
	}
	return &inprocStats{
		spanName: full[1:],
		attrs:    []attribute.KeyValue{attribute.String("rpc.system", "grpc"), attribute.String("rpc.service", svc), attribute.String("rpc.method", method)},
		client:   side(clientMetrics),
		server:   side(serverMetrics),
	}
}

func (s *inprocStats) startClient(ctx context.Context) (context.Context, trace.Span) {
	s.client.started.Inc()
	s.client.inFlight.Inc()
	return inprocTracer.Start(ctx, s.spanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(s.attrs...))
}

func (s *inprocStats) startServer(ctx context.Context) (context.Context, trace.Span) {
	s.server.started.Inc()
	s.server.inFlight.Inc()
	return inprocTracer.Start(ctx, s.spanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(s.attrs...))
}

func (s *inprocStats) end(span trace.Span, side *sideStats, st *status.Status, start time.Time) {
	code := codes.OK
	if st != nil {
		code = st.Code()
	}
	side.inFlight.Dec()
	side.seconds.Observe(time.Since(start).Seconds())
	if code == codes.OK {
		side.ok.Inc()
	} else {
		side.m.handled.WithLabelValues(side.typ, side.svc, side.method, code.String()).Inc()
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("rpc.grpc.status_code", int64(code)))
		if code != codes.OK {
			span.SetStatus(otelcodes.Error, st.Message())
		}
	}
	span.End()
}

// Conn is a client connection from Dial: a *grpc.ClientConn, or for
// "inproc://" targets a connection that calls published services directly.
type Conn interface {
	grpc.ClientConnInterface
	Close() error
}

// inprocConn is Dial's connection to "inproc://<name>": direct calls when
// an InProcess is published under name, else gRPC over the in-memory
// listener of that name.
type inprocConn struct {
	name     string
	cached   atomic.Pointer[InProcess]
	dialWire func() (*grpc.ClientConn, error)

	mu   sync.Mutex
	wire *grpc.ClientConn
}

// direct is the InProcess published under c's name, if any.
func (c *inprocConn) direct() *InProcess {
	if p := c.cached.Load(); p != nil && !p.closing.Load() {
		return p
	}
	inprocMu.Lock()
	p := inprocDirect[c.name]
	inprocMu.Unlock()
	if p != nil {
		c.cached.Store(p)
	}
	return p
}

func (c *inprocConn) wireConn() (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wire == nil {
		cc, err := c.dialWire()
		if err != nil {
			return nil, err
		}
		c.wire = cc
	}
	return c.wire, nil
}

func (c *inprocConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if p := c.direct(); p != nil {
		ctx = enduser.Propagate(ctx) // the wire connection's interceptor does it there
		return p.invoke(ctx, method, args, reply, opts)
	}
	cc, err := c.wireConn()
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, method, args, reply, opts...)
}

func (c *inprocConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if p := c.direct(); p != nil {
		ctx = enduser.Propagate(ctx)
		return p.newStream(ctx, method, opts)
	}
	cc, err := c.wireConn()
	if err != nil {
		return nil, err
	}
	return cc.NewStream(ctx, desc, method, opts...)
}

func (c *inprocConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wire != nil {
		return c.wire.Close()
	}
	return nil
}

// Registrars registers services on every registrar (a gRPC server and an
// InProcess, say).
func Registrars(rs ...grpc.ServiceRegistrar) grpc.ServiceRegistrar { return registrars(rs) }

type registrars []grpc.ServiceRegistrar

func (rs registrars) RegisterService(desc *grpc.ServiceDesc, impl any) {
	for _, r := range rs {
		r.RegisterService(desc, impl)
	}
}

// IsInProcess reports whether addr is an "inproc://<name>" address, and
// its name.
func IsInProcess(addr string) (name string, ok bool) {
	if len(addr) > len(inprocScheme) && addr[:len(inprocScheme)] == inprocScheme {
		return addr[len(inprocScheme):], true
	}
	return "", false
}
