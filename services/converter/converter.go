// Package converter is the converter service: it converts custom resources
// between the versions of their CRD with the CRD's conversion strategy. CRDs
// come from the registry's watch (pkg/crdcache), never from a per-request
// lookup.
package converter

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdplane/crdplane/pkg/celconv"
	"github.com/crdplane/crdplane/pkg/convert"
	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	converterv1 "github.com/crdplane/crdplane/proto/crdplane/converter/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	"github.com/crdplane/crdplane/services/converter/webhook"
)

// Config configures the converter service.
type Config struct {
	// RegistryAddr is the registry's gRPC address (its CRD watch feeds the cache).
	RegistryAddr string
	// CRDWait bounds how long a request waits for the cache to reach the
	// CRD generation it names.
	CRDWait time.Duration
	// Webhook configures webhook conversion (timeouts, coalescing,
	// chunking, service endpoints).
	Webhook webhook.Config
	// CRDs, when set, is a CRD cache shared with other services of the
	// process, run by its owner: the converter follows it instead of
	// watching the registry itself (RegistryAddr is then not dialed).
	CRDs *crdcache.Cache
}

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.RegistryAddr, "registry-addr", "localhost:7002", "registry gRPC address (CRDs are followed by watch)")
	fs.DurationVar(&c.CRDWait, "crd-wait", 5*time.Second, "how long a request waits for the CRD generation it names to reach the local cache")
	c.Webhook.RegisterFlags(fs)
}

// Validate checks the configuration of a converter process.
func (c *Config) Validate() error {
	if c.RegistryAddr == "" {
		return errors.New("--registry-addr is required: the converter follows the registry's CRD watch")
	}
	if err := c.Webhook.LoadEgress(); err != nil {
		return fmt.Errorf("--egress-selector-config-file: %w", err)
	}
	return nil
}

// Service implements crdplane.converter.v1.ConverterService.
type Service struct {
	converterv1.UnimplementedConverterServiceServer

	cfg     Config
	conn    grpcx.Conn
	crds    *crdcache.Cache
	webhook *webhook.Converter
	rules   *RuleCache
	cancel  context.CancelFunc
}

// New dials the registry and starts following its CRD watch.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.RegistryAddr == "" && cfg.CRDs == nil {
		return nil, errors.New("converter: registry address is required")
	}
	if cfg.CRDWait <= 0 {
		cfg.CRDWait = 5 * time.Second
	}
	if err := cfg.Webhook.LoadEgress(); err != nil {
		return nil, fmt.Errorf("converter: --egress-selector-config-file: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Service{
		cfg:     cfg,
		crds:    cfg.CRDs,
		webhook: webhook.New(cfg.Webhook),
		rules:   NewRuleCache(),
		cancel:  cancel,
	}
	own := s.crds == nil
	if own {
		conn, err := grpcx.Dial(cfg.RegistryAddr)
		if err != nil {
			cancel()
			s.webhook.Close()
			return nil, fmt.Errorf("converter: %w", err)
		}
		s.conn = conn
		s.crds = crdcache.New(registryv1.NewRegistryServiceClient(conn), slog.Default().With("service", "converter"))
	}
	s.crds.OnChange(func(old, new *crdcache.CRD) {
		if new == nil && old != nil {
			s.webhook.Forget(string(old.UID))
			s.rules.Forget(string(old.UID))
		}
	})
	if own {
		go s.crds.Run(ctx)
	}
	return s, nil
}

// CRDs is the CRD cache the converter follows (for a process to share).
func (s *Service) CRDs() *crdcache.Cache { return s.crds }

// Register adds the ConverterService to srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	converterv1.RegisterConverterServiceServer(srv, s)
}

// Ready reports whether the CRD cache has synced.
func (s *Service) Ready() error {
	if !s.crds.Synced() {
		return errors.New("CRD cache not synced")
	}
	return nil
}

// Close stops the CRD watch and closes the registry and webhook connections.
func (s *Service) Close() error {
	s.cancel()
	s.webhook.Close()
	if s.conn == nil {
		return nil
	}
	return s.conn.Close()
}

// WebhookStats counts the conversion webhook calls made so far.
func (s *Service) WebhookStats() webhook.Stats { return s.webhook.Stats() }

// Convert converts every object to the desired apiVersion.
func (s *Service) Convert(ctx context.Context, req *converterv1.ConvertRequest) (*converterv1.ConvertResponse, error) {
	ref := req.GetCrd()
	wctx, cancel := context.WithTimeout(ctx, s.cfg.CRDWait)
	defer cancel()
	crd, err := s.crds.WaitFor(wctx, ref.GetName(), ref.GetUid(), ref.GetGeneration())
	if err != nil {
		return nil, kstatus.ToGRPC(apierrors.NewServiceUnavailable(err.Error()))
	}
	objs, err := ConvertObjects(ctx, s.webhook, s.rules, crd, req.GetDesiredApiVersion(), req.GetObjects())
	if err != nil {
		return nil, kstatus.ToGRPC(err)
	}
	return &converterv1.ConvertResponse{Objects: objs}, nil
}

// ConvertObjects converts objects of crd to desiredAPIVersion with the CRD's
// strategy (Webhook through wh; nil: unavailable). Under None, a CRD with
// conversion rules (the annotation conversion.crdplane.dev/rules, package
// celconv) converts with them, in process (compiled once per CRD version
// in rules; nil: compiled for this call). The desired version must be one
// of the CRD's versions.
func ConvertObjects(ctx context.Context, wh *webhook.Converter, rules *RuleCache, crd *apiextensionsv1.CustomResourceDefinition, desiredAPIVersion string, objects [][]byte) ([][]byte, error) {
	gv, err := schema.ParseGroupVersion(desiredAPIVersion)
	if err != nil || gv.Group != crd.Spec.Group || !hasVersion(crd, gv.Version) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid desired apiVersion %q for %s", desiredAPIVersion, crd.Name))
	}
	strategy := apiextensionsv1.NoneConverter
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != "" {
		strategy = crd.Spec.Conversion.Strategy
	}
	switch strategy {
	case apiextensionsv1.NoneConverter:
		if celconv.HasRules(crd) {
			r, err := rules.Get(crd)
			if err != nil {
				return nil, err
			}
			if r != nil {
				return convertWithRules(ctx, r, desiredAPIVersion, objects)
			}
		}
		out := make([][]byte, len(objects))
		for i, obj := range objects {
			c, err := convert.None(obj, desiredAPIVersion)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			out[i] = c
		}
		return out, nil
	case apiextensionsv1.WebhookConverter:
		if wh == nil {
			break
		}
		return wh.Convert(ctx, crd, desiredAPIVersion, objects)
	}
	return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("conversion strategy %q of %s is not available on this server", strategy, crd.Name))
}

func hasVersion(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return true
		}
	}
	return false
}
