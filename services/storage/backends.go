package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/etcdtls"
)

// Storage by group across etcd clusters: kube-apiserver's
// --etcd-servers-overrides. An override sends the keys of one resource
// (group/resource) or of every resource of a group (group/*, crdplane's
// addition) to its own etcd cluster; everything else, the CRDs included,
// stays on the main cluster. A resource's resourceVersions are its own
// cluster's revisions, which is all the API promises: resourceVersions are
// compared only within one resource.
//
// The CRD objects stay with the main cluster (unless
// apiextensions.k8s.io/customresourcedefinitions is itself overridden), as
// upstream keeps them with apiextensions' storage: a list or watch of CRDs
// has one resourceVersion and one order of events, which a collection split
// over two clusters could not give, and every other group's serving depends
// on that watch. When an override's cluster is down only its resources
// fail; the storage service stays ready (upstream adds a readiness check per
// override, which in a replicated deployment would take every group down
// with one).

// EtcdOverride routes a resource, or with Resource "*" a whole group, to
// the etcd cluster at Endpoints.
type EtcdOverride struct {
	Resource  schema.GroupResource
	Endpoints []string
}

// String is the override in the flag's format.
func (o EtcdOverride) String() string {
	return o.Resource.Group + "/" + o.Resource.Resource + "#" + strings.Join(o.Endpoints, ";")
}

// RegisterOverridesFlag adds --etcd-servers-overrides to fs; each value
// (it may be repeated) appends its overrides to dst. crdplane-storage and
// crdplane run share it.
func RegisterOverridesFlag(fs *flag.FlagSet, dst *[]EtcdOverride) {
	fs.Func("etcd-servers-overrides", "per-resource etcd servers, comma separated, as kube-apiserver's: group/resource#servers, servers URLs separated by semicolons; "+
		`group/*#servers routes every resource of a group (CRDs stay on the main cluster), e.g. "stable.example.com/*#http://etcd-b:2379;http://etcd-c:2379"; may be repeated`, func(s string) error {
		o, err := ParseEtcdOverrides(s)
		*dst = append(*dst, o...)
		return err
	})
}

// errOverridesInvalid is upstream's wording (k8s.io/apiserver
// ParseEtcdServersOverrides), with crdplane's group/* form.
var errOverridesInvalid = errors.New("--etcd-servers-overrides invalid, must be of format: group/resource#servers, where servers are URLs, semicolon separated (group/*#servers: every resource of the group)")

// ParseEtcdOverrides parses the overrides of one --etcd-servers-overrides
// value: comma-separated group/resource#servers, servers separated by
// semicolons ("/namespaces#..." for the core group).
func ParseEtcdOverrides(s string) ([]EtcdOverride, error) {
	var out []EtcdOverride
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		target, servers, ok := strings.Cut(item, "#")
		if !ok || strings.Contains(servers, "#") {
			return nil, errOverridesInvalid
		}
		group, resource, ok := strings.Cut(target, "/")
		if !ok || strings.Contains(resource, "/") || resource == "" {
			return nil, errOverridesInvalid
		}
		o := EtcdOverride{Resource: schema.GroupResource{Group: group, Resource: resource}}
		for _, e := range strings.Split(servers, ";") {
			if e = strings.TrimSpace(e); e == "" {
				return nil, errOverridesInvalid
			}
			o.Endpoints = append(o.Endpoints, e)
		}
		out = append(out, o)
	}
	return out, nil
}

// checkOverrides rejects two overrides of the same resource or group.
func checkOverrides(overrides []EtcdOverride) error {
	seen := map[schema.GroupResource]bool{}
	for _, o := range overrides {
		if seen[o.Resource] {
			return fmt.Errorf("--etcd-servers-overrides: %s/%s is given twice", o.Resource.Group, o.Resource.Resource)
		}
		seen[o.Resource] = true
	}
	return nil
}

// backend is one etcd cluster the service stores in.
type backend struct {
	name      string // "main", or "override-N" as upstream names its checks
	endpoints []string
	client    *clientv3.Client
}

// router picks the backend of a resource: its own override, else its
// group's, else the main cluster.
type router struct {
	main      *backend
	resources map[schema.GroupResource]*backend
	groups    map[string]*backend
	overrides []*backend // distinct clusters of the overrides
}

func (r *router) forResource(gr schema.GroupResource) *backend {
	if len(r.overrides) == 0 {
		return r.main
	}
	if b, ok := r.resources[gr]; ok {
		return b
	}
	if b, ok := r.groups[gr.Group]; ok {
		return b
	}
	return r.main
}

// etcdFor is the etcd client that stores gr.
func (s *Service) etcdFor(gr schema.GroupResource) *clientv3.Client {
	return s.router.forResource(gr).client
}

// etcdForPrefix is the etcd client that stores a (valid) collection prefix.
func (s *Service) etcdForPrefix(prefix string) *clientv3.Client {
	return s.etcdFor(prefixResource(prefix))
}

// newEtcdClient connects a client to endpoints (lazily: see checkEtcd).
func (s *Service) newEtcdClient(name string, endpoints []string, tlsCfg *tls.Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsCfg,
		DialTimeout: s.cfg.EtcdDialTimeout,
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler()), etcdMetricsDialOption(name)},
		Logger:      s.etcdLog.Logger,
		// Watches and leases detect a dead connection.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		// etcd's default request limit is 1.5 MiB; lists can be much larger.
		MaxCallSendMsgSize: 2 << 20,
		MaxCallRecvMsgSize: 1 << 30,
	})
}

// checkEtcd waits (at most the dial timeout) for a connection to endpoints:
// a cluster that cannot be reached, or refuses the certificates, says why.
func (s *Service) checkEtcd(ctx context.Context, client *clientv3.Client, tlsCfg *tls.Config, endpoints []string) error {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.EtcdDialTimeout)
	defer cancel()
	if err := etcdtls.CheckConnection(cctx, client.ActiveConnection(), tlsCfg, endpoints); err != nil {
		return fmt.Errorf("etcd %s: no connection within %s: %w", strings.Join(endpoints, ","), s.cfg.EtcdDialTimeout, err)
	}
	return nil
}

// connectOverrides makes a client per distinct cluster of the overrides
// (overrides naming the same servers, in any order, share one). A cluster
// that does not answer yet is logged, not fatal: the other groups are
// served meanwhile, and its resources once it answers.
func (s *Service) connectOverrides(ctx context.Context, tlsCfg *tls.Config) error {
	r := &s.router
	r.resources = map[schema.GroupResource]*backend{}
	r.groups = map[string]*backend{}
	byServers := map[string]*backend{}
	for _, o := range s.cfg.EtcdServersOverrides {
		sorted := slices.Sorted(slices.Values(o.Endpoints))
		id := strings.Join(sorted, ";")
		b, ok := byServers[id]
		if !ok {
			name := fmt.Sprintf("override-%d", len(r.overrides))
			client, err := s.newEtcdClient(name, o.Endpoints, tlsCfg)
			if err != nil {
				return fmt.Errorf("etcd client for --etcd-servers-overrides %s: %w", o, err)
			}
			b = &backend{name: name, endpoints: o.Endpoints, client: client}
			byServers[id] = b
			r.overrides = append(r.overrides, b)
			etcdBackendInfo.WithLabelValues(b.name, strings.Join(b.endpoints, ",")).Set(1)
			if err := s.checkEtcd(ctx, client, tlsCfg, o.Endpoints); err != nil {
				s.log.Warn("etcd of an override does not answer yet; its resources fail until it does", "backend", b.name, "err", err)
			}
		}
		if o.Resource.Resource == "*" {
			r.groups[o.Resource.Group] = b
		} else {
			r.resources[o.Resource] = b
		}
		s.log.Info("etcd override", "resource", o.Resource.Group+"/"+o.Resource.Resource, "backend", b.name, "endpoints", strings.Join(o.Endpoints, ","))
	}
	return nil
}

// closeBackends closes every etcd client.
func (s *Service) closeBackends() []error {
	var errs []error
	closeOne := func(b *backend) {
		if b == nil || b.client == nil {
			return
		}
		if err := b.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("close etcd client (%s): %w", b.name, err))
		}
		b.client = nil
	}
	closeOne(s.router.main)
	for _, b := range s.router.overrides {
		closeOne(b)
	}
	return errs
}
