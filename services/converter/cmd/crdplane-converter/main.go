// Command crdplane-converter serves crdplane's ConverterService: version
// conversion of custom resources (None, and Webhook with batching).
package main

import (
	"context"
	"flag"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/services/converter"
)

func main() {
	var cfg converter.Config
	app.Main(app.Binary{
		Name: "converter", GRPCAddr: ":7004", HTTPAddr: ":7104",
		// Over internal mutual TLS it answers these (the component table's
		// modules that call it; deploy/internal/wiring checks it).
		Callers:       []string{"validator", "gateway"},
		RegisterFlags: func(fs *flag.FlagSet) { cfg.RegisterFlags(fs) },
		Validate:      cfg.Validate,
		New:           func(ctx context.Context) (app.Service, error) { return converter.New(ctx, cfg) },
	})
}
