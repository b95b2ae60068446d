package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/etcdtls"
	"github.com/crdplane/crdplane/pkg/grpcx"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/registry/leader"
	"github.com/crdplane/crdplane/services/registry/openapi"
)

// Service is the registry service: the RegistryService and OpenAPIService
// gRPC APIs, the CRD informer behind discovery and the OpenAPI documents,
// and the controllers.
type Service struct {
	cfg     Config
	conn    grpcx.Conn
	valConn grpcx.Conn       // the validator's, when configured
	etcd    *clientv3.Client // the leader election's, when the service dialed it
	storage *grpcx.Probe     // readiness: storage serves
	server  *server
	inf     *informer
	ctrl    *controllers
	ns      *nsServer
	nsCtrl  *nsController
	rbac    *rbacServer
	apiReg  *apiRegistrationServer
	// rbacCtrl: the RBAC bootstrap policy and ClusterRole aggregation
	rbacCtrl *rbacController
	openapi  *openapi.Builder

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New dials the storage and starts following CRDs; the controllers run
// whenever cfg.Elector says so. Background work stops when ctx ends or
// Close is called.
func New(ctx context.Context, cfg Config) (_ *Service, err error) {
	cfg.setDefaults()
	if cfg.StorageAddr == "" {
		return nil, errors.New("registry: storage address is required")
	}
	log := cfg.Logger.With("service", "registry")
	s := &Service{cfg: cfg}
	defer func() {
		if err != nil {
			_ = s.closeClients() // the construction error is the one to report
		}
	}()
	if cfg.Elector == nil && len(cfg.EtcdEndpoints) == 0 && cfg.EtcdTLS.Enabled() {
		return nil, fmt.Errorf("registry: etcd TLS files (--%s, --%s, --%s) are for the leader election's etcd (--etcd-endpoints)",
			etcdtls.CAFileFlag, etcdtls.CertFileFlag, etcdtls.KeyFileFlag)
	}
	if cfg.Elector == nil && len(cfg.EtcdEndpoints) > 0 {
		if s.etcd, err = dialEtcd(ctx, cfg.EtcdEndpoints, cfg.EtcdTLS); err != nil {
			return nil, fmt.Errorf("registry: leader election etcd: %w", err)
		}
		if cfg.Elector, err = leader.New(leader.Config{Client: s.etcd, LeaseTTL: cfg.LeaderLeaseDuration, Logger: log}); err != nil {
			return nil, fmt.Errorf("registry: %w", err)
		}
	}
	if cfg.Elector == nil {
		cfg.Elector = AlwaysLeader{}
	}
	s.cfg = cfg // with the elector in use
	if s.conn, err = grpcx.Dial(cfg.StorageAddr); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	var checks schemaChecks
	if cfg.ValidatorAddr != "" {
		if s.valConn, err = grpcx.Dial(cfg.ValidatorAddr); err != nil {
			return nil, fmt.Errorf("registry: validator: %w", err)
		}
		checks = validatorChecks{client: validatorv1.NewValidatorServiceClient(s.valConn)}
	}
	client := storagev1.NewStorageServiceClient(s.conn)
	st := &store{client: client}
	s.inf = newInformer(client, log)
	s.server = &server{st: st, inf: s.inf, discovery: newDiscoveryIndex(), checks: checks, log: log}
	s.inf.addHandler(s.server.discovery.update)
	s.ctrl = newControllers(log, s.inf, st, cfg.Workers, cleanupConfig{timeout: cfg.CleanupTimeout, poll: 100 * time.Millisecond})
	// documents follow the informer, per group-version
	s.openapi = openapi.NewWithCache(cfg.OpenAPICacheBytes)
	s.inf.addHandler(s.openapi.Update)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	s.cancel = func() { stop(); cancel() }
	s.storage = grpcx.NewProbe("storage", s.conn)
	s.wg.Go(func() { s.storage.Run(runCtx) })
	s.wg.Go(func() { s.inf.run(runCtx) })
	nsSt := &nsStore{client: client}
	s.ns = &nsServer{st: nsSt, log: log}
	s.nsCtrl = newNSController(log, nsSt, s.inf)
	s.rbac = &rbacServer{client: client, log: log}
	s.apiReg = newAPIRegistrationServer(client, log)
	s.rbacCtrl = &rbacController{srv: s.rbac, log: log}
	s.wg.Go(func() { cfg.Elector.Run(runCtx, s.lead) })
	return s, nil
}

// lead runs the controllers while this replica leads: the CRD controllers,
// the namespace controller (system namespaces, namespace deletion) and the
// RBAC controller (bootstrap policy, ClusterRole aggregation).
func (s *Service) lead(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.nsCtrl.lead(ctx) })
	wg.Go(func() { s.rbacCtrl.lead(ctx) })
	s.ctrl.lead(ctx)
	wg.Wait()
}

// etcdDialTimeout bounds connecting to the leader election's etcd.
const etcdDialTimeout = 5 * time.Second

// dialEtcd connects to the leader election's etcd, over TLS when tlsFiles
// names files, and checks that it answers.
func dialEtcd(ctx context.Context, endpoints []string, tlsFiles etcdtls.Config) (*clientv3.Client, error) {
	if err := tlsFiles.CheckEndpoints(endpoints); err != nil {
		return nil, err
	}
	tlsCfg, err := tlsFiles.Build()
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsCfg, DialTimeout: etcdDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	// The client connects lazily: a cluster that cannot be reached (or
	// refuses the certificates) fails here, saying why.
	cctx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
	defer cancel()
	if err := etcdtls.CheckConnection(cctx, client.ActiveConnection(), tlsCfg, endpoints); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%s: no connection within %s: %w", strings.Join(endpoints, ","), etcdDialTimeout, err)
	}
	return client, nil
}

// Register adds the RegistryService, the NamespaceService, the
// RBACService, the APIRegistrationService and the OpenAPIService to srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	registryv1.RegisterRegistryServiceServer(srv, s.server)
	registryv1.RegisterNamespaceServiceServer(srv, s.ns)
	registryv1.RegisterRBACServiceServer(srv, s.rbac)
	registryv1.RegisterAPIRegistrationServiceServer(srv, s.apiReg)
	registryv1.RegisterOpenAPIServiceServer(srv, openapi.NewServer(s.openapi))
}

// Ready reports whether the service has a complete view of the CRDs and
// storage, which every write and watch needs, serves (its health check, as
// kube-apiserver's readiness checks etcd).
func (s *Service) Ready() error {
	if !s.inf.hasSynced() {
		return errors.New("registry: CRD watch not synced")
	}
	if err := s.storage.Err(); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// WaitReady waits until Ready or ctx ends.
func (s *Service) WaitReady(ctx context.Context) error {
	return s.inf.waitSynced(ctx)
}

// WaitSystemNamespaces waits until the system namespaces (default,
// kube-system, kube-public, kube-node-lease) exist: the leader creates
// them when it starts. Tests wait for it so that no write of the registry
// races theirs.
func (s *Service) WaitSystemNamespaces(ctx context.Context) error {
	for _, name := range systemNamespaces {
		for {
			_, err := s.ns.st.get(ctx, name)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("registry: system namespace %s: %w", name, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// Close stops the background work and the connections.
func (s *Service) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		err = s.closeClients()
	})
	return err
}

func (s *Service) closeClients() error {
	var errs []error
	for _, c := range []grpcx.Conn{s.conn, s.valConn} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if s.etcd != nil {
		errs = append(errs, s.etcd.Close())
	}
	return errors.Join(errs...)
}
