// Command crdplane-registry serves crdplane's RegistryService (CRDs, their
// conditions, discovery) and OpenAPIService.
package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/services/registry"
)

func main() {
	var cfg registry.Config
	app.Main(app.Binary{
		Name: "registry", GRPCAddr: ":7002", HTTPAddr: ":7102",
		// Over internal mutual TLS it answers these (the component table's
		// modules that call it; deploy/internal/wiring checks it).
		Callers:       []string{"validator", "converter", "gateway"},
		RegisterFlags: func(fs *flag.FlagSet) { cfg.RegisterFlags(fs) },
		Validate:      cfg.Validate,
		New: func(ctx context.Context) (app.Service, error) {
			cfg.Logger = slog.Default()
			return registry.New(ctx, cfg)
		},
	})
}
