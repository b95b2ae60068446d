package webhook

import (
	"flag"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/crdplane/crdplane/pkg/egress"
)

// Defaults of Config's zero values.
const (
	// DefaultTimeout is upstream's conversion webhook timeout.
	DefaultTimeout = 30 * time.Second
	// DefaultBatchWindow is the longest a conversion waits to share a
	// review: at most one coalesced review per key leaves per window.
	DefaultBatchWindow = 3500 * time.Microsecond
	// DefaultMaxBatch is the most objects in one ConversionReview.
	DefaultMaxBatch = 256
	// DefaultMaxParallelChunks bounds the chunks of one list in flight.
	DefaultMaxParallelChunks = 8
	// DefaultCacheBytes bounds the cache of converted objects.
	DefaultCacheBytes = 64 << 20
	// DefaultServiceDNSPattern dials a clientConfig.service by its
	// in-cluster DNS name.
	DefaultServiceDNSPattern = "{name}.{namespace}.svc:{port}"
)

// Config configures webhook conversion. The zero value is usable: every
// zero field takes its default.
type Config struct {
	// Timeout bounds one webhook call (0: 30s, upstream's).
	Timeout time.Duration
	// BatchWindow paces coalesced reviews: conversions of the same CRD
	// generation between the same versions share reviews, at most one
	// leaving per window, so none waits longer than the window; a
	// conversion finding its key quiet (nothing waiting, and nothing in
	// flight or nothing sent within the window) goes at once (0: 3.5ms;
	// negative: never coalesce nor share a conversion in flight, one review
	// per request as upstream).
	BatchWindow time.Duration
	// MaxBatch is the most objects sent in one ConversionReview: a
	// coalesced batch is sent once it holds this many, and a larger request
	// (a list) is split into chunks of this size converted in parallel
	// (0: 256; negative: no limit, a list is one call as upstream).
	MaxBatch int
	// MaxParallelChunks bounds the chunks of one request in flight at once
	// (0: 8).
	MaxParallelChunks int
	// MaxInflight, when positive, caps the coalesced reviews in flight at
	// once for one CRD generation and pair of versions: while that many are
	// in flight, conversions queue up (past the batch window) and go
	// together when one returns (0: no cap; the window alone paces reviews).
	MaxInflight int
	// CacheBytes bounds the cache of converted objects: the result of a
	// webhook conversion of an object with a uid and resourceVersion is
	// kept, keyed by the CRD's uid and generation, the object's uid and
	// resourceVersion and the desired apiVersion (and checked against a
	// hash of the object converted), least recently used first out
	// (0: 64 MiB; negative: no cache, every conversion reaches the
	// webhook as upstream's).
	CacheBytes int64
	// ServiceEndpoints maps a clientConfig.service to the address dialled
	// for it, for servers outside the cluster (docker compose, a laptop).
	ServiceEndpoints EndpointMap
	// Observe, when set, is called after every coalesced review with how
	// long each of its conversions waited to be sent (what coalescing adds)
	// and the review's round trip (for metrics and benchmarks).
	Observe func(waits []time.Duration, roundTrip time.Duration)
	// ServiceDNSPattern is the address dialled for a service that has no
	// ServiceEndpoints entry; {name}, {namespace} and {port} are replaced
	// ("": "{name}.{namespace}.svc:{port}", the in-cluster name). A pattern
	// without a port gets the service's port.
	ServiceDNSPattern string
	// EgressSelectorConfigFile is kube-apiserver's
	// --egress-selector-config-file: an EgressSelectorConfiguration whose
	// cluster selection carries the calls to webhooks named by
	// clientConfig.service and whose controlplane selection those to
	// webhooks named by clientConfig.url (Direct when absent). Read by
	// LoadEgress into Egress.
	EgressSelectorConfigFile string
	// Egress routes the webhooks' connections (nil: every one Direct).
	Egress *egress.Selector
}

// LoadEgress reads EgressSelectorConfigFile into Egress (nothing without
// a file), with kube-apiserver's checks and wording.
func (c *Config) LoadEgress() error {
	if c.EgressSelectorConfigFile == "" || c.Egress != nil {
		return nil
	}
	sel, err := egress.Load(c.EgressSelectorConfigFile)
	c.Egress = sel
	return err
}

// RegisterFlags adds the webhook conversion flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Timeout, "webhook-timeout", DefaultTimeout, "timeout of one conversion webhook call")
	fs.DurationVar(&c.BatchWindow, "batch-window", DefaultBatchWindow, "longest a conversion waits to share a ConversionReview with concurrent conversions of the same CRD and versions: at most one coalesced review per CRD and version pair leaves per window; a lone conversion goes at once (negative: never coalesce nor share conversions in flight: one review per request)")
	fs.IntVar(&c.MaxBatch, "max-batch-objects", DefaultMaxBatch, "most objects in one ConversionReview; larger lists are split into chunks of this size converted in parallel (negative: no limit)")
	fs.IntVar(&c.MaxParallelChunks, "max-parallel-chunks", DefaultMaxParallelChunks, "most chunks of one list converted at once")
	fs.Int64Var(&c.CacheBytes, "conversion-cache-bytes", DefaultCacheBytes, "bytes of webhook-converted objects kept, by CRD uid and generation, object uid and resourceVersion and desired apiVersion (LRU; negative: no cache)")
	fs.IntVar(&c.MaxInflight, "max-inflight-reviews", 0, "when positive, most coalesced ConversionReviews in flight at once per CRD and pair of versions; beyond, conversions queue for the next one (0: no cap)")
	if c.ServiceEndpoints == nil {
		c.ServiceEndpoints = EndpointMap{}
	}
	fs.Var(c.ServiceEndpoints, "service-endpoint", "address to dial for a conversion webhook's clientConfig.service, as name.namespace[:port]=host:port (repeatable, or comma-separated); e.g. crontab-conversion.default=127.0.0.1:9443")
	fs.StringVar(&c.EgressSelectorConfigFile, "egress-selector-config-file", "", "File with apiserver egress selector configuration (kube-apiserver's EgressSelectorConfiguration, apiserver.k8s.io/v1beta1): conversion webhooks named by clientConfig.service are dialled through its cluster selection, those named by clientConfig.url through its controlplane selection (Direct, HTTPConnect over TCP or a Unix socket, GRPC over a Unix socket); none: direct. crdplane run gives it to the gateway too: its token, authorization and audit webhooks through controlplane, APIService backends through cluster")
	fs.StringVar(&c.ServiceDNSPattern, "service-dns-pattern", DefaultServiceDNSPattern, "address dialled for a clientConfig.service without a --service-endpoint entry; {name}, {namespace} and {port} are replaced (docker compose: {name}:{port})")
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.BatchWindow == 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxParallelChunks <= 0 {
		c.MaxParallelChunks = DefaultMaxParallelChunks
	}
	if c.ServiceDNSPattern == "" {
		c.ServiceDNSPattern = DefaultServiceDNSPattern
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	return c
}

// EndpointMap maps services ("name.namespace", or "name.namespace:port"
// for one port only) to the host:port dialled for them. As a flag.Value it
// accepts "key=host:port" entries, repeated or comma-separated.
type EndpointMap map[string]string

// String lists the entries, sorted.
func (m EndpointMap) String() string {
	entries := make([]string, 0, len(m))
	for k, v := range m {
		entries = append(entries, k+"="+v)
	}
	sort.Strings(entries)
	return strings.Join(entries, ",")
}

// Set adds entries.
func (m EndpointMap) Set(s string) error {
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		key, addr, ok := strings.Cut(entry, "=")
		if !ok {
			return fmt.Errorf("service endpoint %q: want name.namespace[:port]=host:port", entry)
		}
		svc, port, hasPort := strings.Cut(key, ":")
		name, namespace, ok := strings.Cut(svc, ".")
		if !ok || name == "" || namespace == "" || strings.Contains(namespace, ".") {
			return fmt.Errorf("service endpoint %q: the key must be name.namespace or name.namespace:port", entry)
		}
		if hasPort {
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return fmt.Errorf("service endpoint %q: invalid port %q", entry, port)
			}
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("service endpoint %q: the address must be host:port: %v", entry, err)
		}
		m[key] = addr
	}
	return nil
}

// serviceAddr is the address dialled for service namespace/name:port.
func (c Config) serviceAddr(namespace, name string, port int32) string {
	p := strconv.Itoa(int(port))
	if a, ok := c.ServiceEndpoints[name+"."+namespace+":"+p]; ok {
		return a
	}
	if a, ok := c.ServiceEndpoints[name+"."+namespace]; ok {
		return a
	}
	addr := strings.NewReplacer("{name}", name, "{namespace}", namespace, "{port}", p).Replace(c.ServiceDNSPattern)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, p)
	}
	return addr
}
