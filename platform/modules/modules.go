// Package modules is crdplane's component table: every service is a module
// that names, once, the services it calls and the flag that gives each one's
// address. Everything that assembles services is built or checked from it:
//
//   - `crdplane run --target=all` (package platform) builds the modules in
//     dependency order in one process and points every address at the
//     in-process one;
//   - `crdplane run --target=<module>` runs one module as its own process,
//     with the flags of its binary (crdplane-<module>), dialing the others at
//     the addresses its flags give;
//   - the deployments (docker compose, the Kubernetes manifests) are checked
//     against it by deploy's tests: every module's required address flags
//     are passed, no flag its binary lacks is, each address names a service
//     running the module it should.
//
// It is in the spirit of Grafana Mimir's pkg/mimir/modules.go and Temporal's
// service registry. It lives in the root module, beside cmd/crdplane and
// platform, because it imports every service: a service imports only proto/
// and pkg/, and pkg/ imports no service.
package modules

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/pkg/crdcache"
	"github.com/crdplane/crdplane/services/converter"
	"github.com/crdplane/crdplane/services/gateway"
	"github.com/crdplane/crdplane/services/registry"
	"github.com/crdplane/crdplane/services/registry/leader"
	"github.com/crdplane/crdplane/services/storage"
	"github.com/crdplane/crdplane/services/validator"
)

// Module names, and All, the target of every module in one process.
const (
	Storage   = "storage"
	Registry  = "registry"
	Validator = "validator"
	Converter = "converter"
	Gateway   = "gateway"
	All       = "all"
)

// Dep is a service a module calls.
type Dep struct {
	// Module is the module called.
	Module string
	// Flag is the dependant's flag that gives its address ("validator-addr":
	// --validator-addr).
	Flag string
	// Lazy: the module calls it only while serving requests (the registry
	// calls the validator's ValidateCRD on a CRD write), so it starts and is
	// ready without it; such calls may go both ways. A dependency that is
	// not lazy is needed to be ready (a CRD watch to sync, storage to
	// answer): the module starts after it.
	Lazy bool
	// Calls says what the module calls it for.
	Calls string
	// addr is the field Flag sets.
	addr func(*Config) *string
}

// Module is one service of the table.
type Module struct {
	// Name is the service, its binary crdplane-<Name>.
	Name string
	// Deps are the services it calls.
	Deps []Dep
	// GRPCListen and HTTPListen are the default listen addresses of its
	// process (--grpc-listen, --http-listen). The gateway has no gRPC
	// server: it serves the Kubernetes API over HTTPS (--listen).
	GRPCListen, HTTPListen string

	registerFlags func(*Config, *flag.FlagSet)
	validate      func(*Config) error
	build         func(context.Context, *Process) (app.Service, error)
}

// Table is a set of modules, in the order they are listed.
type Table []*Module

// Modules is crdplane's component table.
var Modules = Table{
	{
		Name:       Storage,
		GRPCListen: ":7001", HTTPListen: ":7101",
		registerFlags: func(c *Config, fs *flag.FlagSet) { c.Storage.RegisterFlags(fs) },
		validate:      func(c *Config) error { return c.Storage.Validate() },
		build: func(ctx context.Context, p *Process) (app.Service, error) {
			s, err := storage.New(ctx, p.Cfg.Storage)
			p.Storage = s
			return s, err
		},
	},
	{
		Name: Registry,
		Deps: []Dep{
			{Module: Storage, Flag: "storage-addr", Calls: "CRDs are stored there; its CRD informer lists and watches them",
				addr: func(c *Config) *string { return &c.Registry.StorageAddr }},
			{Module: Validator, Flag: "validator-addr", Lazy: true, Calls: "ValidateCRD: CEL compilation and cost, defaults, of every CRD write",
				addr: func(c *Config) *string { return &c.Registry.ValidatorAddr }},
		},
		GRPCListen: ":7002", HTTPListen: ":7102",
		registerFlags: func(c *Config, fs *flag.FlagSet) { c.Registry.RegisterFlags(fs) },
		validate:      func(c *Config) error { return c.Registry.Validate() },
		build: func(ctx context.Context, p *Process) (app.Service, error) {
			cfg := p.Cfg.Registry
			if cfg.Elector == nil && len(cfg.EtcdEndpoints) == 0 && p.Storage != nil {
				// In the storage's process, the controllers' leader election
				// runs on its etcd: several processes may share an external
				// cluster.
				e, err := leader.New(leader.Config{Client: p.Storage.Client(), LeaseTTL: cfg.LeaderLeaseDuration, Logger: cfg.Logger})
				if err != nil {
					return nil, err
				}
				cfg.Elector = e
			}
			s, err := registry.New(ctx, cfg)
			p.Registry = s
			return s, err
		},
	},
	{
		Name: Validator,
		Deps: []Dep{
			{Module: Registry, Flag: "registry-addr", Calls: "its CRD watch feeds the compiled-schema cache",
				addr: func(c *Config) *string { return &c.Validator.RegistryAddr }},
			{Module: Converter, Flag: "converter-addr", Lazy: true, Calls: "conversion of managedFields entries recorded at another version of a CRD converted by webhook or conversion rules",
				addr: func(c *Config) *string { return &c.Validator.ConverterAddr }},
		},
		GRPCListen: ":7003", HTTPListen: ":7103",
		registerFlags: func(c *Config, fs *flag.FlagSet) { c.Validator.RegisterFlags(fs) },
		validate:      func(c *Config) error { return c.Validator.Validate() },
		build: func(ctx context.Context, p *Process) (app.Service, error) {
			cfg := p.Cfg.Validator
			if p.CRDs != nil && cfg.RegistryAddr != "" {
				cfg.RegistryAddr, cfg.Source = "", validator.NewCacheSource(p.CRDs, cfg.CRDWaitTimeout)
			}
			s, err := validator.New(ctx, cfg)
			p.Validator = s
			if err == nil {
				p.shareCRDs(s.CRDs())
			}
			return s, err
		},
	},
	{
		Name: Converter,
		Deps: []Dep{
			{Module: Registry, Flag: "registry-addr", Calls: "its CRD watch feeds the CRD cache",
				addr: func(c *Config) *string { return &c.Converter.RegistryAddr }},
		},
		GRPCListen: ":7004", HTTPListen: ":7104",
		registerFlags: func(c *Config, fs *flag.FlagSet) { c.Converter.RegisterFlags(fs) },
		validate:      func(c *Config) error { return c.Converter.Validate() },
		build: func(ctx context.Context, p *Process) (app.Service, error) {
			cfg := p.Cfg.Converter
			cfg.CRDs = p.CRDs
			s, err := converter.New(ctx, cfg)
			p.Converter = s
			if err == nil {
				p.shareCRDs(s.CRDs())
			}
			return s, err
		},
	},
	{
		Name: Gateway,
		Deps: []Dep{
			{Module: Registry, Flag: "registry-addr", Calls: "CRD watch (routes), CRD requests, discovery, OpenAPI; readiness follows it",
				addr: func(c *Config) *string { return &c.Gateway.RegistryAddr }},
			{Module: Validator, Flag: "validator-addr", Lazy: true, Calls: "Admit: prune, default, validate every write",
				addr: func(c *Config) *string { return &c.Gateway.ValidatorAddr }},
			{Module: Converter, Flag: "converter-addr", Lazy: true, Calls: "webhook conversion",
				addr: func(c *Config) *string { return &c.Gateway.ConverterAddr }},
			{Module: Storage, Flag: "storage-addr", Calls: "every object read and written; readiness follows it",
				addr: func(c *Config) *string { return &c.Gateway.StorageAddr }},
		},
		// HTTPS on --listen (:6443), its health there too; --http-listen
		// adds a plain HTTP port for them.
		registerFlags: func(c *Config, fs *flag.FlagSet) { c.Gateway.RegisterFlags(fs) },
		validate:      func(c *Config) error { return c.Gateway.Validate() },
		build: func(ctx context.Context, p *Process) (app.Service, error) {
			cfg := p.Cfg.Gateway
			cfg.CRDs = p.CRDs
			s, err := gateway.New(ctx, cfg)
			p.Gateway = s
			if err == nil {
				p.shareCRDs(s.CRDs())
			}
			return s, err
		},
	},
}

// Config is the root configuration of a crdplane process: every service's
// own, and the target that says which of them the process runs.
type Config struct {
	// Target is a module's name, or All.
	Target string

	Storage   storage.Config
	Registry  registry.Config
	Validator validator.Config
	Converter converter.Config
	Gateway   gateway.Config
}

// RegisterFlags adds --target and, for a module's target, that module's
// flags (those of its binary crdplane-<target>) to fs. Set c.Target first:
// the flags depend on it (services share flag names, e.g. --storage-addr).
// The flags of --target=all are crdplane run's own (cmd/crdplane).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Target, "target", c.Target, "what this process runs: all (every service, in-process, embedded etcd) or one of "+strings.Join(Modules.Names(), ", ")+" (with that service's flags)")
	if m := Modules.Lookup(c.Target); m != nil {
		m.registerFlags(c, fs)
	}
}

// Validate checks c for its target: for a module, its configuration (a
// required address that is missing is an error naming its flag); for All,
// every module's (after Wire).
func (c *Config) Validate() error {
	mods, err := Modules.Order(c.Target)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mods {
		if err := m.Validate(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Wire points every module's dependencies at addr(module): the addresses of
// the services of one process (inproc://...).
func (c *Config) Wire(addr func(module string) string) {
	for _, m := range Modules {
		for _, d := range m.Deps {
			*d.addr(c) = addr(d.Module)
		}
	}
}

// Names are the modules' names, in table order.
func (t Table) Names() []string {
	names := make([]string, len(t))
	for i, m := range t {
		names[i] = m.Name
	}
	return names
}

// Callers are the modules that call module (a Dep on it), in table
// order: over internal mutual TLS, the services it admits
// (--grpc-allowed-callers).
func (t Table) Callers(module string) []string {
	var callers []string
	for _, m := range t {
		if m.Dep(module) != nil {
			callers = append(callers, m.Name)
		}
	}
	return callers
}

// Lookup is the module called name (nil: none).
func (t Table) Lookup(name string) *Module {
	for _, m := range t {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Order is the modules target runs, in start order: All is every module,
// each after the modules it needs to be ready (its dependencies that are not
// lazy), otherwise in table order; a module's name is that module alone (it
// dials the others). A cycle of dependencies that are not lazy is an error.
func (t Table) Order(target string) ([]*Module, error) {
	if target != All {
		m := t.Lookup(target)
		if m == nil {
			return nil, fmt.Errorf("unknown target %q: want %s or %s", target, All, strings.Join(t.Names(), ", "))
		}
		return []*Module{m}, nil
	}
	var order []*Module
	state := map[string]int{} // 1: visiting, 2: placed
	var visit func(m *Module, path []string) error
	visit = func(m *Module, path []string) error {
		switch state[m.Name] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("modules: dependency cycle %s", strings.Join(append(path, m.Name), " -> "))
		}
		state[m.Name] = 1
		for _, d := range m.Deps {
			if d.Lazy {
				continue
			}
			dm := t.Lookup(d.Module)
			if dm == nil {
				return fmt.Errorf("modules: %s depends on unknown module %q", m.Name, d.Module)
			}
			if err := visit(dm, append(path, m.Name)); err != nil {
				return err
			}
		}
		state[m.Name] = 2
		order = append(order, m)
		return nil
	}
	for _, m := range t {
		if err := visit(m, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// Dep is m's dependency on module (nil: none).
func (m *Module) Dep(module string) *Dep {
	i := slices.IndexFunc(m.Deps, func(d Dep) bool { return d.Module == module })
	if i < 0 {
		return nil
	}
	return &m.Deps[i]
}

// RegisterFlags adds m's service flags, bound to c, to fs.
func (m *Module) RegisterFlags(c *Config, fs *flag.FlagSet) { m.registerFlags(c, fs) }

// Validate checks m's part of c; the error starts with m's name.
func (m *Module) Validate(c *Config) error {
	if err := m.validate(c); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	return nil
}

// Build builds m's service from p.Cfg and records it in p (modules built
// before it in the same process are there).
func (m *Module) Build(ctx context.Context, p *Process) (app.Service, error) {
	return m.build(ctx, p)
}

// Binary is m as a process: the command of crdplane-<m> and of crdplane
// run --target=<m>, its flags bound to c (c.Target is set to m).
func (m *Module) Binary(c *Config) app.Binary {
	c.Target = m.Name
	return app.Binary{
		Name:     m.Name,
		GRPCAddr: m.GRPCListen, HTTPAddr: m.HTTPListen,
		Callers:       Modules.Callers(m.Name),
		RegisterFlags: func(fs *flag.FlagSet) { m.registerFlags(c, fs) },
		Validate:      func() error { return m.Validate(c) },
		New: func(ctx context.Context) (app.Service, error) {
			return m.build(ctx, &Process{Cfg: *c})
		},
	}
}

// Process holds the services built for one process, in the order built
// (Mimir's Mimir struct): a module's build sees those built before it.
type Process struct {
	Cfg Config

	Storage   *storage.Service
	Registry  *registry.Service
	Validator *validator.Service
	Converter *converter.Service
	Gateway   *gateway.Service

	// ShareCRDs: the validator, converter and gateway of this process
	// follow one CRD cache, the first one's (one registry watch and one
	// decoded copy of each CRD instead of three). Its owner, built first,
	// is closed last (services close in the reverse of their build
	// order); the others only read it and add change handlers, which see
	// the changes from then on (theirs only invalidate caches that start
	// empty).
	ShareCRDs bool
	// CRDs is the cache shared so far (nil before the first of them).
	CRDs *crdcache.Cache
}

// shareCRDs offers a built service's CRD cache to the services built after
// it.
func (p *Process) shareCRDs(c *crdcache.Cache) {
	if p.ShareCRDs && p.CRDs == nil {
		p.CRDs = c
	}
}
