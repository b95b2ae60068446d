// Command crdplane-validator serves crdplane's ValidatorService: admission
// (prune, default, validate, CEL) of custom resources against their CRD
// schemas, and CRD write-time checks.
package main

import (
	"context"
	"flag"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/services/validator"
)

func main() {
	var cfg validator.Config
	app.Main(app.Binary{
		Name: "validator", GRPCAddr: ":7003", HTTPAddr: ":7103",
		// Over internal mutual TLS it answers these (the component table's
		// modules that call it; deploy/internal/wiring checks it).
		Callers:       []string{"registry", "gateway"},
		RegisterFlags: func(fs *flag.FlagSet) { cfg.RegisterFlags(fs) },
		Validate:      cfg.Validate,
		New:           func(ctx context.Context) (app.Service, error) { return validator.New(ctx, cfg) },
	})
}
