package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/grpcx"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	"github.com/crdplane/crdplane/services/registry/openapi"
)

// Service is the registry service: the RegistryService and OpenAPIService
// gRPC APIs, the CRD informer behind discovery and the OpenAPI documents,
// and the controllers.
type Service struct {
	cfg     Config
	conn    *grpc.ClientConn
	server  *server
	inf     *informer
	ctrl    *controllers
	openapi *openapi.Builder

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New dials the storage and starts following CRDs; the controllers run
// whenever cfg.Elector says so. Background work stops when ctx ends or
// Close is called.
func New(ctx context.Context, cfg Config) (*Service, error) {
	cfg.setDefaults()
	if cfg.StorageAddr == "" {
		return nil, errors.New("registry: storage address is required")
	}
	conn, err := grpcx.Dial(cfg.StorageAddr)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	client := storagev1.NewStorageServiceClient(conn)
	log := cfg.Logger.With("service", "registry")
	st := &store{client: client}
	inf := newInformer(client, log)
	s := &Service{
		cfg:    cfg,
		conn:   conn,
		inf:    inf,
		server: &server{st: st, inf: inf, discovery: &discoveryCache{inf: inf}, log: log},
		ctrl:   newControllers(log, inf, st, cfg.Workers, cleanupConfig{timeout: cfg.CleanupTimeout, poll: 100 * time.Millisecond}),
		// documents follow the informer, per group-version
		openapi: openapi.New(),
	}
	inf.addHandler(s.openapi.Update)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	s.cancel = func() { stop(); cancel() }
	s.wg.Go(func() { inf.run(runCtx) })
	s.wg.Go(func() { cfg.Elector.Run(runCtx, s.ctrl.lead) })
	return s, nil
}

// Register adds the RegistryService and the OpenAPIService to srv.
func (s *Service) Register(srv *grpc.Server) {
	registryv1.RegisterRegistryServiceServer(srv, s.server)
	registryv1.RegisterOpenAPIServiceServer(srv, openapi.NewServer(s.openapi))
}

// Ready reports whether the service has a complete view of the CRDs (and
// hence a working storage connection).
func (s *Service) Ready() error {
	if !s.inf.hasSynced() {
		return errors.New("registry: CRD watch not synced")
	}
	return nil
}

// WaitReady waits until Ready or ctx ends.
func (s *Service) WaitReady(ctx context.Context) error {
	return s.inf.waitSynced(ctx)
}

// Close stops the background work and the storage connection.
func (s *Service) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		err = s.conn.Close()
	})
	return err
}
