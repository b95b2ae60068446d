package grpcx

import (
	"sync"
	"time"

	"google.golang.org/grpc/resolver"
)

// DNSRefreshInterval is how often a "dns:///" connection from Dial
// re-resolves its name. grpc's DNS resolver otherwise re-resolves only when a
// connection fails, so replicas added behind the name (a scaled-up Deployment
// behind a headless Service, a restarted compose replica) would get no
// traffic until then. grpc never re-resolves more often than every 30s.
var DNSRefreshInterval = 30 * time.Second

// refreshingDNS wraps grpc's "dns" resolver builder: its resolvers are asked
// to re-resolve every interval.
type refreshingDNS struct {
	resolver.Builder
	interval time.Duration
}

func newRefreshingDNS(interval time.Duration) resolver.Builder {
	return refreshingDNS{Builder: resolver.Get("dns"), interval: interval}
}

func (b refreshingDNS) Build(target resolver.Target, cc resolver.ClientConn, opts resolver.BuildOptions) (resolver.Resolver, error) {
	r, err := b.Builder.Build(target, cc, opts)
	if err != nil {
		return nil, err
	}
	rr := &refreshingResolver{Resolver: r, stop: make(chan struct{})}
	go rr.refresh(b.interval)
	return rr, nil
}

type refreshingResolver struct {
	resolver.Resolver
	stop chan struct{}
	once sync.Once
}

func (r *refreshingResolver) refresh(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.ResolveNow(resolver.ResolveNowOptions{})
		}
	}
}

func (r *refreshingResolver) Close() {
	r.once.Do(func() { close(r.stop) })
	r.Resolver.Close()
}
