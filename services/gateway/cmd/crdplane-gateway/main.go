// Command crdplane-gateway serves the Kubernetes API (HTTPS) in front of
// the registry, validator, converter and storage services.
package main

import (
	"context"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/services/gateway"
)

func main() {
	var cfg gateway.Config
	app.Main(app.Binary{
		// No gRPC server: the gateway serves HTTPS (--listen), and its
		// operations endpoints there and, when set, on --http-listen.
		Name:          "gateway",
		RegisterFlags: cfg.RegisterFlags,
		Validate:      cfg.Validate,
		New:           func(ctx context.Context) (app.Service, error) { return gateway.New(ctx, cfg) },
	})
}
