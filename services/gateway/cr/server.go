// Package cr serves the gateway's verbs on custom resources: get, list,
// watch, create, update, patch (JSON, merge, server-side apply), delete and
// deletecollection, and the status and scale subresources. A request's
// resource is resolved from the CRD cache (resource.go), its body, decoded
// once by the root's dispatch (httpx.DecodeBody), is read as upstream's
// custom resource decoder reads it (objects.go), admitted by the validator
// (admit.go), converted to the storage version (convert.go) and written to
// storage; reads convert the stored objects back (convert.go, schemas.go).
package cr

import (
	"log/slog"
	"time"

	"github.com/crdplane/crdplane/pkg/convcache"
	"github.com/crdplane/crdplane/pkg/crdcache"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// Config configures a Server.
type Config struct {
	// Registry is asked for a CRD the cache does not serve yet (nil: the
	// cache alone decides).
	Registry registryv1.RegistryServiceClient
	// Storage holds the objects.
	Storage storagev1.StorageServiceClient
	// Validator admits every write.
	Validator validatorv1.ValidatorServiceClient
	// Converter converts objects between versions (webhook conversion and
	// CEL conversion rules); nil: unavailable (503 when needed).
	Converter converterv1.ConverterServiceClient
	// Converted keeps webhook-converted objects served, so a read of an
	// unchanged object at another version costs no converter call (nil:
	// none kept).
	Converted *convcache.Cache
	// CRDs is the CRD cache requests are resolved from; New registers a
	// change handler on it, so build the Server before the cache runs.
	CRDs *crdcache.Cache
	// Namespaces, when set, turns on NamespaceLifecycle admission of
	// creates (--enable-namespace-lifecycle): a create in a namespace that
	// does not exist, or is being deleted, is refused.
	Namespaces registryv1.NamespaceServiceClient
	// MinRequestTimeout bounds a watch without timeoutSeconds.
	MinRequestTimeout time.Duration
	// CRDWait bounds how long a request waits for the cache to catch up
	// with the registry.
	CRDWait time.Duration
	// CompiledMemoryLimit bounds the estimated bytes of the compiled
	// structural schemas the gateway keeps
	// (crdlimits.EstimateStructuralSize); least recently used CRDs are
	// evicted beyond it. Zero: budgetcache.DefaultLimit().
	CompiledMemoryLimit int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log is the logger (default slog.Default()).
	Log *slog.Logger
}

// Server serves the custom resource verbs.
type Server struct {
	registry  registryv1.RegistryServiceClient
	storage   storagev1.StorageServiceClient
	validator validatorv1.ValidatorServiceClient
	converter converterv1.ConverterServiceClient // nil: webhook conversion unavailable
	converted *convcache.Cache                   // webhook-converted objects served (nil: none kept)
	lifecycle *namespaceLifecycle                // NamespaceLifecycle admission (nil: off)

	crds      *crdcache.Cache
	crdEvents *crdEvents
	schemas   *schemaCache

	minRequestTimeout time.Duration
	crdWait           time.Duration
	now               func() time.Time
	log               *slog.Logger
}

// New builds a Server from cfg.
func New(cfg Config) *Server {
	s := &Server{
		registry:          cfg.Registry,
		storage:           cfg.Storage,
		validator:         cfg.Validator,
		converter:         cfg.Converter,
		converted:         cfg.Converted,
		crds:              cfg.CRDs,
		crdEvents:         newCRDEvents(),
		schemas:           newSchemaCache(cfg.CompiledMemoryLimit),
		minRequestTimeout: cfg.MinRequestTimeout,
		crdWait:           cfg.CRDWait,
		now:               cfg.Now,
		log:               cfg.Log,
	}
	if cfg.Namespaces != nil {
		s.lifecycle = &namespaceLifecycle{namespaces: cfg.Namespaces}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.crds != nil {
		s.crds.OnChange(func(old, new *crdcache.CRD) {
			s.schemas.onChange(old, new)
			s.crdEvents.notify()
		})
	}
	return s
}
