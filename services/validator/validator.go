// Package validator is crdplane's ValidatorService: admission of one custom
// resource against its CRD version's structural schema and CEL rules
// (prune, default, validate, with upstream's error types, paths and
// messages; ratcheting on update; fieldValidation of unknown fields), and
// the CRD write-time checks of defaults and CEL rules (ValidateCRD). CRDs
// come from the registry's watch (or, to run alone, from manifest files);
// compiled schemas and CEL programs are cached by CRD uid + generation +
// version.
package validator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/crdplane/crdplane/pkg/budgetcache"
	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/grpcx"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// DefaultCRDWaitTimeout bounds how long Admit waits for the CRD generation
// a request names to reach the validator's cache.
const DefaultCRDWaitTimeout = 5 * time.Second

// DefaultConverterAddr is --converter-addr's default: the converter's port
// on this host.
const DefaultConverterAddr = "localhost:7004"

// Config configures the validator.
type Config struct {
	// RegistryAddr is the registry's gRPC address; the validator follows its
	// CRD watch. Exactly one of RegistryAddr, CRDDir and Source is used.
	RegistryAddr string
	// CRDDir is a directory of CRD manifests (YAML or JSON) to serve instead
	// of the registry's CRDs, so the validator runs alone (load tests).
	CRDDir string
	// ConverterAddr is the converter service's gRPC address: the field
	// managers convert managedFields entries recorded at another version
	// of a CRD converted by webhook (or by conversion rules) through it.
	// Required with RegistryAddr; optional for a validator alone (CRDDir)
	// and in code (Source): without it such conversions fail with 503.
	ConverterAddr string
	// CRDWaitTimeout bounds the wait for a CRD generation (default 5s).
	CRDWaitTimeout time.Duration
	// Source, when set, supplies CRDs instead (all-in-one mode, tests).
	Source Source
	// CompiledMemoryLimit bounds the estimated bytes of the compiled CRD
	// versions the validator keeps (crdlimits.EstimateCompiledSize); least
	// recently used CRDs are evicted beyond it. Zero: DefaultCompiledMemoryLimit.
	CompiledMemoryLimit int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultCompiledMemoryLimit is the compiled-schema cache's budget when
// none is configured (budgetcache.DefaultLimit): half of GOMEMLIMIT when
// it is set, else 512 MiB; never less than two CRDs of the largest size
// the registry accepts (crdlimits.MaxCompiledBytes).
func DefaultCompiledMemoryLimit() int64 { return budgetcache.DefaultLimit() }

// RegisterFlags adds the configuration's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.RegistryAddr, "registry-addr", c.RegistryAddr,
		"gRPC address of the registry, whose CRD watch feeds the validator (host:port, dns:///host:port or inproc://name)")
	fs.StringVar(&c.CRDDir, "crd-dir", c.CRDDir,
		"directory of CustomResourceDefinition manifests (YAML or JSON) to serve instead of the registry's (standalone mode, e.g. load tests)")
	if c.ConverterAddr == "" {
		c.ConverterAddr = DefaultConverterAddr
	}
	fs.StringVar(&c.ConverterAddr, "converter-addr", c.ConverterAddr,
		"gRPC address of the converter, which converts managedFields entries recorded at another version of a CRD converted by webhook or conversion rules (host:port, dns:///host:port or inproc://name)")
	if c.CRDWaitTimeout == 0 {
		c.CRDWaitTimeout = DefaultCRDWaitTimeout
	}
	fs.DurationVar(&c.CRDWaitTimeout, "crd-wait-timeout", c.CRDWaitTimeout,
		"how long a request waits for the CRD generation it names before failing with 503")
	fs.Var(budgetcache.QuantityFlag{V: &c.CompiledMemoryLimit}, budgetcache.FlagName,
		"memory budget of the compiled CRD schemas, CEL programs and type converters (estimated, e.g. 512Mi); least recently used CRDs are evicted beyond it and compile again on demand; 0: half of GOMEMLIMIT, else 512Mi")
}

// Validate checks the configuration of a validator process: its CRDs come
// from the registry (--registry-addr) or, for a validator alone, from a
// directory (--crd-dir); exactly one of them.
func (c *Config) Validate() error {
	switch {
	case c.Source != nil:
		if c.RegistryAddr != "" || c.CRDDir != "" {
			return errors.New("a CRD source set in code excludes --registry-addr and --crd-dir")
		}
	case c.RegistryAddr != "" && c.CRDDir != "":
		return errors.New("--registry-addr and --crd-dir exclude each other: CRDs come from the registry or from a directory")
	case c.RegistryAddr == "" && c.CRDDir == "":
		return errors.New("--registry-addr is required: the validator follows the registry's CRD watch (or --crd-dir, for a validator alone)")
	case c.RegistryAddr != "" && c.ConverterAddr == "":
		return errors.New("--converter-addr is required: managedFields entries recorded at another version of a CRD converted by webhook convert through the converter")
	}
	return nil
}

// Service implements crdplane.validator.v1.ValidatorService.
type Service struct {
	validatorv1.UnimplementedValidatorServiceServer

	log      *slog.Logger
	src      Source
	compiled *compiledCache

	conn   grpcx.Conn         // registry connection, when we own it
	cancel context.CancelFunc // stops the CRD watch, when we run it
	done   chan struct{}

	converter     converterv1.ConverterServiceClient // nil: none configured
	converterConn grpcx.Conn

	crds *crdcache.Cache // the cache it follows and runs (RegistryAddr), or nil
}

// New builds the validator. With RegistryAddr it starts following the
// registry's CRD watch (Ready reports when the first list arrived); with
// CRDDir it reads and compiles every CRD up front, failing on any error.
func New(ctx context.Context, cfg Config) (*Service, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", "validator")
	if cfg.CRDWaitTimeout <= 0 {
		cfg.CRDWaitTimeout = DefaultCRDWaitTimeout
	}
	limit := cfg.CompiledMemoryLimit
	if limit <= 0 {
		limit = DefaultCompiledMemoryLimit()
	}
	if limit < crdlimits.MaxCompiledBytes {
		log.Warn("the compiled-CRD memory limit is below the largest CRD the registry accepts; such CRDs will be refused here",
			"limit", limit, "max_crd", crdlimits.MaxCompiledBytes)
	}
	s := &Service{log: log, compiled: newCompiledCache(limit)}
	if cfg.ConverterAddr != "" {
		// Connected on first use: the validator starts and is ready
		// without the converter (CRDs converted by webhook need it only
		// for writes meeting managedFields entries at another version).
		conn, err := grpcx.Dial(cfg.ConverterAddr)
		if err != nil {
			return nil, fmt.Errorf("validator: dial converter %s: %w", cfg.ConverterAddr, err)
		}
		s.converterConn, s.converter = conn, converterv1.NewConverterServiceClient(conn)
	}
	ok := false
	defer func() {
		if !ok && s.converterConn != nil {
			_ = s.converterConn.Close()
		}
	}()

	set := 0
	for _, v := range []bool{cfg.RegistryAddr != "", cfg.CRDDir != "", cfg.Source != nil} {
		if v {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("validator: configure exactly one CRD source: --registry-addr or --crd-dir")
	}

	switch {
	case cfg.Source != nil:
		s.src = cfg.Source
		s.src.OnChange(s.compiled.onChange)
	case cfg.CRDDir != "":
		src, err := NewDirSource(cfg.CRDDir, log)
		if err != nil {
			return nil, err
		}
		for _, crd := range src.(*dirSource).list() {
			for _, v := range crd.Spec.Versions {
				if _, err := s.compiled.get(crd, v.Name); err != nil {
					return nil, fmt.Errorf("validator: %w", err)
				}
			}
		}
		s.src = src
	default:
		conn, err := grpcx.Dial(cfg.RegistryAddr)
		if err != nil {
			return nil, fmt.Errorf("validator: dial registry %s: %w", cfg.RegistryAddr, err)
		}
		cache := crdcache.New(registryv1.NewRegistryServiceClient(conn), log)
		cache.OnChange(s.compiled.onChange)
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.conn, s.cancel, s.done = conn, cancel, make(chan struct{})
		go func() {
			defer close(s.done)
			cache.Run(runCtx)
		}()
		s.src = NewCacheSource(cache, cfg.CRDWaitTimeout)
		s.crds = cache
	}
	ok = true
	return s, nil
}

// CRDs is the CRD cache the validator follows and runs when it watches the
// registry itself (RegistryAddr), for a process to share; nil otherwise.
func (s *Service) CRDs() *crdcache.Cache { return s.crds }

// Register adds the ValidatorService to srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	validatorv1.RegisterValidatorServiceServer(srv, s)
}

// Ready reports whether the validator can admit objects (its CRD source is
// synced).
func (s *Service) Ready() error { return s.src.Ready() }

// Close stops the CRD watch and closes the registry and converter
// connections.
func (s *Service) Close() error {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	var errs []error
	if s.converterConn != nil {
		errs = append(errs, s.converterConn.Close())
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	return errors.Join(errs...)
}
