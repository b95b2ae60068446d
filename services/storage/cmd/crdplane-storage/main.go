// Command crdplane-storage serves crdplane's StorageService: Kubernetes
// objects in etcd (embedded, or an external cluster with --etcd-endpoints).
package main

import (
	"context"
	"flag"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/services/storage"
)

func main() {
	var cfg storage.Config
	app.Main(app.Binary{
		Name: "storage", GRPCAddr: ":7001", HTTPAddr: ":7101",
		// Over internal mutual TLS it answers these (the component table's
		// modules that call it; deploy/internal/wiring checks it).
		Callers:       []string{"registry", "gateway"},
		RegisterFlags: func(fs *flag.FlagSet) { cfg.RegisterFlags(fs) },
		Validate:      cfg.Validate,
		New:           func(ctx context.Context) (app.Service, error) { return storage.New(ctx, cfg) },
	})
}
