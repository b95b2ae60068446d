package modules

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestOrder(t *testing.T) {
	all, err := Modules.Order(All)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(all), []string{Storage, Registry, Validator, Converter, Gateway}; !slices.Equal(got, want) {
		t.Fatalf("start order %v, want %v", got, want)
	}
	// Every module starts after what it needs to be ready; lazy calls may go
	// either way (the registry calls the validator, which watches the
	// registry).
	pos := map[string]int{}
	for i, m := range all {
		pos[m.Name] = i
	}
	for _, m := range all {
		for _, d := range m.Deps {
			if !d.Lazy && pos[d.Module] >= pos[m.Name] {
				t.Errorf("%s starts before %s, which it needs", m.Name, d.Module)
			}
		}
	}
	if !Modules.Lookup(Registry).Dep(Validator).Lazy || Modules.Lookup(Validator).Dep(Registry).Lazy {
		t.Error("the registry calls the validator lazily (CRD writes); the validator needs the registry's CRD watch")
	}

	for _, tc := range []struct {
		name    string
		table   Table
		target  string
		want    []string
		wantErr string
	}{
		{name: "one module", table: Modules, target: Registry, want: []string{Registry}},
		{name: "the gateway alone", table: Modules, target: Gateway, want: []string{Gateway}},
		{name: "unknown target", table: Modules, target: "apiserver", wantErr: `unknown target "apiserver": want all or storage, registry, validator, converter, gateway`},
		{name: "empty target", table: Modules, target: "", wantErr: `unknown target ""`},
		{
			name:   "dependencies first, else table order",
			table:  Table{{Name: "c", Deps: []Dep{{Module: "b"}}}, {Name: "a"}, {Name: "b", Deps: []Dep{{Module: "a"}}}},
			target: All, want: []string{"a", "b", "c"},
		},
		{
			name:   "a lazy cycle is no cycle",
			table:  Table{{Name: "a", Deps: []Dep{{Module: "b", Lazy: true}}}, {Name: "b", Deps: []Dep{{Module: "a"}}}},
			target: All, want: []string{"a", "b"},
		},
		{
			name:    "a cycle",
			table:   Table{{Name: "a", Deps: []Dep{{Module: "b"}}}, {Name: "b", Deps: []Dep{{Module: "c"}}}, {Name: "c", Deps: []Dep{{Module: "a"}}}},
			target:  All,
			wantErr: "dependency cycle a -> b -> c -> a",
		},
		{
			name:    "an unknown dependency",
			table:   Table{{Name: "a", Deps: []Dep{{Module: "z"}}}},
			target:  All,
			wantErr: `a depends on unknown module "z"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.table.Order(tc.target)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tc.want) {
				t.Fatalf("order %v, want %v", names(got), tc.want)
			}
		})
	}
}

// TestDependencies: the table's dependencies are the issue's, each named by
// a flag of the module's binary that sets the address the module dials.
func TestDependencies(t *testing.T) {
	want := map[string][]string{
		Storage:   nil,
		Registry:  {Storage, Validator},
		Validator: {Registry, Converter},
		Converter: {Registry},
		Gateway:   {Registry, Validator, Converter, Storage},
	}
	if got := Modules.Names(); len(got) != len(want) {
		t.Fatalf("modules %v", got)
	}
	for _, m := range Modules {
		var deps []string
		for _, d := range m.Deps {
			deps = append(deps, d.Module)
		}
		if !slices.Equal(deps, want[m.Name]) {
			t.Errorf("%s depends on %v, want %v", m.Name, deps, want[m.Name])
		}
		for _, d := range m.Deps {
			var c Config
			fs := flagSet(m, &c)
			if fs.Lookup(d.Flag) == nil {
				t.Errorf("%s: no flag --%s for its %s address", m.Name, d.Flag, d.Module)
				continue
			}
			if err := fs.Set(d.Flag, "dns:///"+d.Module+":1"); err != nil {
				t.Fatal(err)
			}
			if got := *d.addr(&c); got != "dns:///"+d.Module+":1" {
				t.Errorf("%s: --%s sets %q, not the address the table wires", m.Name, d.Flag, got)
			}
			if d.Calls == "" {
				t.Errorf("%s: say what it calls %s for", m.Name, d.Module)
			}
		}
	}
}

// TestRequiredAddresses: a module given every dependency's address
// validates; without any one of them it does not start, and says which flag
// is missing.
func TestRequiredAddresses(t *testing.T) {
	for _, m := range Modules {
		t.Run(m.Name, func(t *testing.T) {
			args := []string{}
			for _, d := range m.Deps {
				args = append(args, "--"+d.Flag+"=dns:///"+d.Module+":1")
			}
			var c Config
			if err := flagSet(m, &c).Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(&c); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			for _, d := range m.Deps {
				var c Config
				if err := flagSet(m, &c).Parse(append(slices.Clone(args), "--"+d.Flag+"=")); err != nil {
					t.Fatal(err)
				}
				err := m.Validate(&c)
				if err == nil || !strings.HasPrefix(err.Error(), m.Name+": --"+d.Flag+" is required") {
					t.Errorf("without --%s: %v", d.Flag, err)
				}
			}
		})
	}
	// The registry's validator address was once optional (CRD writes then
	// skipped their CEL checks): it is required, and has a default like
	// every other address but the validator's registry (or --crd-dir).
	c := Config{Target: Registry}
	fs := flagSet(Modules.Lookup(Registry), &c)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.Registry.ValidatorAddr != "localhost:7003" {
		t.Errorf("--validator-addr defaults to %q", c.Registry.ValidatorAddr)
	}
	if err := fs.Parse([]string{"--validator-addr", ""}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || err.Error() != "registry: --validator-addr is required: the validator checks the CEL rules and defaults of CRD writes (ValidateCRD)" {
		t.Errorf("registry without a validator: %v", err)
	}
	c = Config{Target: Validator}
	fs = flagSet(Modules.Lookup(Validator), &c)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "validator: --registry-addr is required") {
		t.Errorf("validator without a registry: %v", err)
	}
	c = Config{Target: Validator}
	fs = flagSet(Modules.Lookup(Validator), &c)
	if err := fs.Parse([]string{"--registry-addr", "dns:///registry:7002", "--converter-addr", ""}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "validator: --converter-addr is required") {
		t.Errorf("validator without a converter: %v", err)
	}
}

// TestTarget: --target selects the flags: a module's are those of its
// binary; services that share flag names (--storage-addr) are never
// registered together.
func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		target       string
		has, hasNot  []string
		validateWant string
	}{
		{target: Registry, has: []string{"target", "storage-addr", "validator-addr", "controller-workers"}, hasNot: []string{"listen", "data-dir", "crd-dir"}},
		{target: Gateway, has: []string{"target", "listen", "storage-addr", "converter-addr", "max-requests-inflight"}, hasNot: []string{"controller-workers", "data-dir"}},
		{target: Storage, has: []string{"target", "data-dir", "etcd-endpoints", "watch-cache"}, hasNot: []string{"storage-addr", "registry-addr"}},
		{target: All, has: []string{"target"}, hasNot: []string{"storage-addr", "listen"}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			c := Config{Target: tc.target}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			c.RegisterFlags(fs)
			for _, f := range tc.has {
				if fs.Lookup(f) == nil {
					t.Errorf("no --%s", f)
				}
			}
			for _, f := range tc.hasNot {
				if fs.Lookup(f) != nil {
					t.Errorf("--%s registered", f)
				}
			}
			if err := fs.Parse([]string{"--target=" + tc.target}); err != nil || c.Target != tc.target {
				t.Fatalf("target %q: %v", c.Target, err)
			}
		})
	}

	// A module's process has its binary's flags; --target is crdplane run's.
	var c Config
	b := Modules.Lookup(Registry).Binary(&c)
	if c.Target != Registry || b.Name != Registry || b.GRPCAddr != ":7002" || b.HTTPAddr != ":7102" {
		t.Fatalf("binary %+v, target %q", b, c.Target)
	}
	fs := b.FlagSet()
	for _, f := range []string{"grpc-listen", "http-listen", "log-format", "log-level", "check-flags", "validator-addr"} {
		if fs.Lookup(f) == nil {
			t.Errorf("crdplane-registry: no --%s", f)
		}
	}
	if fs.Lookup("target") != nil {
		t.Error("crdplane-registry has no --target")
	}
	if Modules.Lookup(Gateway).Binary(&Config{}).FlagSet().Lookup("grpc-listen") != nil {
		t.Error("the gateway has no gRPC server")
	}
	if err := b.Run([]string{"--check-flags", "--validator-addr="}); err == nil || !strings.Contains(err.Error(), "registry: --validator-addr is required") {
		t.Errorf("--check-flags without the validator's address: %v", err)
	}
	if err := b.Run([]string{"--check-flags", "--validator-addr=dns:///validator:7003"}); err != nil {
		t.Error(err)
	}
}

// TestWire: the all-in-one process wires every dependency the table names;
// unwired, every missing address is reported.
func TestWire(t *testing.T) {
	c := Config{Target: All}
	err := c.Validate()
	if err == nil {
		t.Fatal("no addresses, no error")
	}
	for _, m := range Modules {
		if len(m.Deps) > 0 && !strings.Contains(err.Error(), m.Name+": --"+m.Deps[0].Flag+" is required") {
			t.Errorf("unwired: %s: --%s not reported:\n%v", m.Name, m.Deps[0].Flag, err)
		}
	}
	c.Wire(func(module string) string { return "inproc://" + module + "-1" })
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Registry.ValidatorAddr != "inproc://validator-1" || c.Gateway.ConverterAddr != "inproc://converter-1" || c.Validator.RegistryAddr != "inproc://registry-1" {
		t.Fatalf("wired %+v", c)
	}
}

func flagSet(m *Module, c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet(m.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m.RegisterFlags(c, fs)
	return fs
}

func names(ms []*Module) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

// TestCallers: the allow-lists of internal mutual TLS are the table's
// edges, and each module's binary defaults --grpc-allowed-callers to them.
func TestCallers(t *testing.T) {
	want := map[string][]string{
		Storage:   {Registry, Gateway},
		Registry:  {Validator, Converter, Gateway},
		Validator: {Registry, Gateway},
		Converter: {Validator, Gateway},
		Gateway:   nil,
	}
	for name, callers := range want {
		if got := Modules.Callers(name); !slices.Equal(got, callers) {
			t.Errorf("Callers(%s) = %v, want %v", name, got, callers)
		}
		fs := Modules.Lookup(name).Binary(&Config{}).FlagSet()
		f := fs.Lookup("grpc-allowed-callers")
		if name == Gateway {
			if f != nil {
				t.Errorf("the gateway serves no gRPC, yet has --grpc-allowed-callers")
			}
			continue
		}
		if f == nil || f.DefValue != strings.Join(callers, ",") {
			t.Errorf("%s: --grpc-allowed-callers %+v, want default %q", name, f, strings.Join(callers, ","))
		}
	}
}
