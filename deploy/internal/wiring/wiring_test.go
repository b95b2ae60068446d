package wiring

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crdplane/crdplane/deploy/internal/flagcheck"
	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/platform/modules"
)

const (
	composeFile = "../../compose/docker-compose.yaml"
	kubernetes  = "../../kubernetes"
)

// kustomizations are base and every overlay under root.
func kustomizations(t *testing.T, root string) []string {
	t.Helper()
	dirs := []string{filepath.Join(root, "base")}
	overlays, err := filepath.Glob(filepath.Join(root, "overlays/*/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range overlays {
		dirs = append(dirs, filepath.Dir(k))
	}
	if len(dirs) < 2 {
		t.Fatal("no overlays found")
	}
	return dirs
}

// deployments renders the compose file and every kustomization.
func deployments(t *testing.T, compose, kubernetesRoot string) []*Deployment {
	t.Helper()
	var ds []*Deployment
	if compose != "" {
		d, err := Compose(compose)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if kubernetesRoot != "" {
		for _, dir := range kustomizations(t, kubernetesRoot) {
			d, err := Kustomize(dir)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
	}
	return ds
}

// TestDeploymentsFollowTheTable: docker compose and every kustomization run
// every module with the addresses the table says it needs, pointing at the
// right services, reachable through the network policies, started in order.
func TestDeploymentsFollowTheTable(t *testing.T) {
	for _, d := range deployments(t, composeFile, kubernetes) {
		t.Run(d.Name, func(t *testing.T) {
			if len(d.Processes) < len(modules.Modules) {
				t.Fatalf("%d crdplane processes: %v", len(d.Processes), d.Processes)
			}
			for _, err := range d.Check() {
				t.Error(err)
			}
		})
	}
}

// TestDriftIsCaught edits copies of the deployments and shows each edit
// fails the check, with a message that says what is wrong.
func TestDriftIsCaught(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string // under deploy/
		old  string
		new  string
		want []string // in the errors of every rendered deployment
	}{
		{
			name: "compose: the registry without the validator's address",
			file: "compose/docker-compose.yaml",
			old:  "      - --storage-addr=dns:///storage:7001\n      - --validator-addr=dns:///validator:7003\n",
			new:  "      - --storage-addr=dns:///storage:7001\n",
			want: []string{"docker-compose.yaml: service registry: the registry module needs --validator-addr, the address of the validator (ValidateCRD"},
		},
		{
			name: "compose: a flag the binary does not have",
			file: "compose/docker-compose.yaml",
			old:  "      - --storage-addr=dns:///storage:7001\n      - --validator-addr=dns:///validator:7003\n",
			new:  "      - --storage-addr=dns:///storage:7001\n      - --validator-addr=dns:///validator:7003\n      - --validator-timeout=5s\n",
			want: []string{"service registry: crdplane-registry refuses its arguments: flag provided but not defined: -validator-timeout"},
		},
		{
			name: "compose: an address of the wrong service",
			file: "compose/docker-compose.yaml",
			old:  "      - --http-listen=:7103\n      - --registry-addr=dns:///registry:7002\n",
			new:  "      - --http-listen=:7103\n      - --registry-addr=dns:///converter:7004\n",
			want: []string{"service validator: --registry-addr=dns:///converter:7004 reaches the converter, not the registry"},
		},
		{
			name: "compose: the wrong port",
			file: "compose/docker-compose.yaml",
			old:  "      - --storage-addr=dns:///storage:7001\n      - --registry-addr=dns:///registry:7002\n",
			new:  "      - --storage-addr=dns:///storage:7002\n      - --registry-addr=dns:///registry:7002\n",
			want: []string{"service gateway: --storage-addr=dns:///storage:7002: service storage serves gRPC on port 7001, not 7002"},
		},
		{
			name: "compose: started before what it needs",
			file: "compose/docker-compose.yaml",
			old:  "    depends_on:\n      pki: {condition: service_completed_successfully}\n      registry: {condition: service_healthy}\n\n  converter:",
			new:  "    depends_on: [pki, registry]\n\n  converter:",
			want: []string{"service validator: starts before the registry is healthy, which it needs to be ready (its CRD watch feeds the compiled-schema cache): depends_on registry is service_started, not service_healthy"},
		},
		{
			name: "compose: a service without internal TLS",
			file: "compose/docker-compose.yaml",
			old:  "      - --registry-addr=dns:///registry:7002\n      - --grpc-tls-cert-file=/etc/crdplane/internal-tls/tls.crt\n      - --grpc-tls-key-file=/etc/crdplane/internal-tls/tls.key\n      - --grpc-tls-ca-file=/etc/crdplane/internal-tls/ca.crt\n      - --log-format=text\n    volumes: [pki-converter",
			new:  "      - --registry-addr=dns:///registry:7002\n      - --grpc-tls-ca-file=/etc/crdplane/internal-tls/ca.crt\n      - --log-format=text\n    volumes: [pki-converter",
			want: []string{"service converter: internal gRPC would be plaintext: --grpc-tls-cert-file, --grpc-tls-key-file not given"},
		},
		{
			name: "compose: an allow-list refusing a caller the table names",
			file: "compose/docker-compose.yaml",
			old:  "      - --etcd-endpoints=http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379\n",
			new:  "      - --etcd-endpoints=http://etcd-0:2379,http://etcd-1:2379,http://etcd-2:2379\n      - --grpc-allowed-callers=gateway\n",
			want: []string{"service storage: --grpc-allowed-callers=gateway refuses the registry, which calls the storage (CRDs are stored there"},
		},
		{
			name: "kubernetes: a Deployment without internal TLS",
			file: "kubernetes/base/storage.yaml",
			old:  "            - --grpc-tls-cert-file=/etc/crdplane/internal-tls/tls.crt\n",
			new:  "",
			want: []string{"Deployment/crdplane-storage container storage: internal gRPC would be plaintext: --grpc-tls-cert-file not given"},
		},
		{
			name: "kubernetes: the registry without the validator's address",
			file: "kubernetes/base/registry.yaml",
			old:  "            - --validator-addr=dns:///crdplane-validator:7003\n",
			new:  "",
			want: []string{"Deployment/crdplane-registry container registry: the registry module needs --validator-addr"},
		},
		{
			name: "kubernetes: a positional argument",
			file: "kubernetes/base/registry.yaml",
			old:  "            - --validator-addr=dns:///crdplane-validator:7003\n",
			new:  "            - --validator-addr\n            - dns:///crdplane-validator:7003\n            - --controller-workers\n            - \"2\"\n            - extra\n",
			want: []string{"Deployment/crdplane-registry container registry: crdplane-registry takes no positional argument: \"extra\""},
		},
		{
			name: "kubernetes: a Service port the address does not have",
			file: "kubernetes/base/registry.yaml",
			old:  "--validator-addr=dns:///crdplane-validator:7003",
			new:  "--validator-addr=dns:///crdplane-validator:7004",
			want: []string{"Deployment/crdplane-registry container registry: --validator-addr=dns:///crdplane-validator:7004: Service crdplane-validator has no port 7004"},
		},
		{
			name: "kubernetes: a NetworkPolicy keeps the registry from the validator",
			file: "kubernetes/base/networkpolicies.yaml",
			old: "              app.kubernetes.io/name: crdplane-gateway\n" +
				"        - podSelector:\n            matchLabels:\n              app.kubernetes.io/name: crdplane-registry\n      ports:\n        - port: grpc\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: crdplane-converter",
			new: "              app.kubernetes.io/name: crdplane-gateway\n" +
				"      ports:\n        - port: grpc\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: crdplane-converter",
			want: []string{"Deployment/crdplane-registry container registry: no NetworkPolicy lets it reach Deployment/crdplane-validator container validator's gRPC port (it calls the validator: ValidateCRD"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			copyDir(t, "../..", root, "compose", "kubernetes")
			path := filepath.Join(root, tc.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(string(b), tc.old) != 1 {
				t.Fatalf("%s does not hold the text to edit once:\n%s", tc.file, tc.old)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			var ds []*Deployment
			if strings.HasPrefix(tc.file, "compose/") {
				ds = deployments(t, path, "")
			} else {
				ds = deployments(t, "", filepath.Join(root, "kubernetes"))
			}
			for _, d := range ds {
				errs := d.Check()
				var msgs []string
				for _, err := range errs {
					msgs = append(msgs, err.Error())
				}
				for _, w := range tc.want {
					if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, w) }) {
						t.Errorf("%s: no error says %q; got:\n%s", d.Name, w, strings.Join(msgs, "\n"))
					}
				}
			}
		})
	}
}

// TestBinariesHaveTheTablesFlags: each service's binary (crdplane-<module>)
// and crdplane run --target=<module> take exactly the flags the table's
// module has, so what the deployments are checked against is what runs.
func TestBinariesHaveTheTablesFlags(t *testing.T) {
	bins := flagcheck.New(t)
	for _, m := range modules.Modules {
		t.Run(m.Name, func(t *testing.T) {
			var want []string
			m.Binary(&modules.Config{}).FlagSet().VisitAll(func(f *flag.Flag) { want = append(want, f.Name) })
			slices.Sort(want)
			if got := helpFlags(t, bins.Path("crdplane-"+m.Name)); !slices.Equal(got, want) {
				t.Errorf("crdplane-%s has the flags\n%v\nthe table's module\n%v", m.Name, got, want)
			}
			// Its default allow-list is the table's callers (a binary lists
			// them by hand: it cannot import the table).
			if callers := modules.Modules.Callers(m.Name); len(callers) > 0 {
				want := strings.Join(callers, ",")
				for _, args := range [][]string{nil, {"run", "--target=" + m.Name}} {
					bin := bins.Path("crdplane-" + m.Name)
					if args != nil {
						bin = bins.Path("crdplane")
					}
					if got := helpDefault(t, bin, app.FlagAllowedCallers, args...); got != want {
						t.Errorf("%s %v: --%s defaults to %q; the table's callers of the %s are %q", filepath.Base(bin), args, app.FlagAllowedCallers, got, m.Name, want)
					}
				}
			}
			withTarget := append(slices.Clone(want), "target")
			slices.Sort(withTarget)
			if got := helpFlags(t, bins.Path("crdplane"), "run", "--target="+m.Name); !slices.Equal(got, withTarget) {
				t.Errorf("crdplane run --target=%s has the flags\n%v\nwant\n%v", m.Name, got, withTarget)
			}
		})
	}
}

// helpDefault is the default a binary's -h prints for flag ("" when none).
func helpDefault(t *testing.T, binary, flag string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, append(args, "-h")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h exits 0, or 2 on older flag packages
	text := out.String()
	i := strings.Index(text, "\n  -"+flag+" ")
	if i < 0 {
		t.Fatalf("%s %v -h lists no --%s", binary, args, flag)
	}
	text = text[i+1:]
	if j := strings.Index(text[1:], "\n  -"); j >= 0 {
		text = text[:j+1]
	}
	m := regexp.MustCompile(`\(default "([^"]*)"\)`).FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return m[1]
}

var helpLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)

// helpFlags are the flags a binary lists for -h.
func helpFlags(t *testing.T, binary string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, append(args, "-h")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h exits 0, or 2 on older flag packages
	var names []string
	for _, m := range helpLine.FindAllStringSubmatch(out.String(), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("%s %v -h lists no flags:\n%s", binary, args, out.String())
	}
	slices.Sort(names)
	return names
}

// copyDir copies the named subdirectories of src into dst.
func copyDir(t *testing.T, src, dst string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(src, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(src, path)
			if err != nil {
				return err
			}
			if e.IsDir() {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			if !strings.HasSuffix(path, ".yaml") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
