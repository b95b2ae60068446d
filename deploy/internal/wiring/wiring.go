// Package wiring checks deployments against the component table
// (platform/modules): it renders the docker compose file and the kustomize
// builds of the Kubernetes manifests, finds every process that runs a
// crdplane module, and reports where they drift from the table:
//
//   - a flag the module's binary does not have, or arguments it refuses;
//   - a dependency's address flag that is not passed (the binaries' defaults
//     are localhost, never right in a deployment), or a configuration the
//     module's Validate refuses;
//   - an address that does not reach a process of the module the table
//     names (the wrong service, the wrong port);
//   - in Kubernetes, a NetworkPolicy that keeps a module from a dependency's
//     gRPC port; in compose, a module started before a dependency it needs
//     to be ready (depends_on);
//   - internal gRPC without mutual TLS (a --grpc-tls-* flag missing), or an
//     allow-list (--grpc-allowed-callers) refusing a module that calls it;
//   - a module that no process runs.
package wiring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/app"
	"github.com/crdplane/crdplane/platform/modules"
)

// Deployment is a rendered deployment: the processes that run modules.
type Deployment struct {
	// Name says which deployment ("docker-compose.yaml", "kustomize base").
	Name      string
	Processes []*Process

	// resolve is the module serving at host:port, for p's address flags.
	resolve func(host, port string) (string, error)
	// admits reports whether from may reach to's gRPC port (nil: no
	// network policies).
	admits func(from, to *Process) bool
	// startsAfter reports whether from starts after a process of module
	// is healthy (nil: no start order).
	startsAfter func(from *Process, module string) (bool, string)
}

// Process is one container (a compose service, a workload's container)
// running a module.
type Process struct {
	// Where names it ("service registry", "Deployment/crdplane-registry").
	Where  string
	Module string
	Args   []string

	name      string // compose service name
	podLabels labels.Set
	ports     []corev1.ContainerPort
	dependsOn map[string]string // compose: service -> condition
}

// grpcPort is the port p's gRPC server listens on (--grpc-listen, else the
// module's default).
func (p *Process) grpcPort() string {
	listen := modules.Modules.Lookup(p.Module).GRPCListen
	// The last --grpc-listen wins, as the flag package has it; the other
	// flags are checked by Check.
	for i := 0; i < len(p.Args); i++ {
		a := p.Args[i]
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "grpc-listen" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !ok && i+1 < len(p.Args) {
			value = p.Args[i+1]
		}
		listen = value
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return port
}

// Check reports every place d drifts from the component table.
func (d *Deployment) Check() []error {
	var errs []error
	report := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(d.Name+": "+format, args...))
	}
	for _, name := range modules.Modules.Names() {
		if !slices.ContainsFunc(d.Processes, func(p *Process) bool { return p.Module == name }) {
			report("no process runs the %s module", name)
		}
	}
	for _, p := range d.Processes {
		m := modules.Modules.Lookup(p.Module)
		var cfg modules.Config
		fs := m.Binary(&cfg).FlagSet()
		fs.Init(fs.Name(), flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(p.Args); err != nil {
			report("%s: crdplane-%s refuses its arguments: %v", p.Where, p.Module, err)
			continue
		}
		if fs.NArg() > 0 {
			report("%s: crdplane-%s takes no positional argument: %q", p.Where, p.Module, fs.Arg(0))
			continue
		}
		set := map[string]string{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
		for _, dep := range m.Deps {
			addr, ok := set[dep.Flag]
			if !ok || addr == "" {
				report("%s: the %s module needs --%s, the address of the %s (%s)", p.Where, p.Module, dep.Flag, dep.Module, dep.Calls)
				continue
			}
			host, port, err := splitTarget(addr)
			if err != nil {
				report("%s: --%s=%s: %v", p.Where, dep.Flag, addr, err)
				continue
			}
			served, err := d.resolve(host, port)
			if err != nil {
				report("%s: --%s=%s: %v", p.Where, dep.Flag, addr, err)
				continue
			}
			if served != dep.Module {
				report("%s: --%s=%s reaches the %s, not the %s", p.Where, dep.Flag, addr, served, dep.Module)
			}
			if d.admits != nil {
				for _, q := range d.Processes {
					if q.Module == dep.Module && !d.admits(p, q) {
						report("%s: no NetworkPolicy lets it reach %s's gRPC port (it calls the %s: %s)", p.Where, q.Where, dep.Module, dep.Calls)
					}
				}
			}
			if d.startsAfter != nil && !dep.Lazy {
				if ok, why := d.startsAfter(p, dep.Module); !ok {
					report("%s: starts before the %s is healthy, which it needs to be ready (%s): %s", p.Where, dep.Module, dep.Calls, why)
				}
			}
		}
		if err := m.Validate(&cfg); err != nil {
			report("%s: %v", p.Where, err)
		}
		errs = append(errs, checkInternalTLS(d.Name, p, set)...)
	}
	return errs
}

// checkInternalTLS: internal gRPC runs over mutual TLS in every deployment
// (the three --grpc-tls-* flags), and a process's allow-list, when given,
// admits every module the table says calls it.
func checkInternalTLS(deployment string, p *Process, set map[string]string) []error {
	var errs []error
	var missing []string
	for _, f := range []string{app.FlagTLSCert, app.FlagTLSKey, app.FlagTLSCA} {
		if set[f] == "" {
			missing = append(missing, "--"+f)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%s: %s: internal gRPC would be plaintext: %s not given", deployment, p.Where, strings.Join(missing, ", ")))
	}
	if allowed, ok := set[app.FlagAllowedCallers]; ok {
		list := strings.Split(allowed, ",")
		for _, caller := range modules.Modules.Callers(p.Module) {
			if !slices.Contains(list, caller) {
				errs = append(errs, fmt.Errorf("%s: %s: --%s=%s refuses the %s, which calls the %s (%s)", deployment, p.Where, app.FlagAllowedCallers, allowed, caller, p.Module, modules.Modules.Lookup(caller).Dep(p.Module).Calls))
			}
		}
	}
	return errs
}

// splitTarget is the host and port of a gRPC target: host:port or
// dns:///host:port.
func splitTarget(addr string) (string, string, error) {
	hostport := addr
	if rest, ok := strings.CutPrefix(addr, "dns:///"); ok {
		hostport = rest
	} else if strings.Contains(addr, "://") {
		return "", "", errors.New("not a host:port or dns:///host:port target")
	}
	return net.SplitHostPort(hostport)
}

// serviceImage is an image of a crdplane service: crdplane/<module>:tag,
// <prefix>/<module>:tag.
var serviceImage = regexp.MustCompile(`(?:^|/)(gateway|registry|validator|converter|storage)(?::[^/]*)?$`)

// interpolation is compose's ${NAME}, ${NAME:-default} and ${NAME-default}.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}`)

// Compose renders the compose file at path (variables at their defaults).
func Compose(path string) (*Deployment, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	raw = interpolation.ReplaceAll(raw, []byte("$2"))
	var file struct {
		Services map[string]struct {
			Image      string          `json:"image"`
			Entrypoint []string        `json:"entrypoint"`
			Command    []string        `json:"command"`
			DependsOn  json.RawMessage `json:"depends_on"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &Deployment{Name: filepath.Base(path)}
	byName := map[string]*Process{}
	for name, svc := range file.Services {
		m := serviceImage.FindStringSubmatch(svc.Image)
		if m == nil {
			continue // etcd, jaeger
		}
		args := svc.Command
		if len(svc.Entrypoint) > 0 {
			if filepath.Base(svc.Entrypoint[0]) != "crdplane-"+m[1] {
				continue // another binary of the image (crdplane-pki)
			}
			args = append(slices.Clone(svc.Entrypoint[1:]), args...)
		}
		p := &Process{Where: "service " + name, Module: m[1], Args: args, name: name, dependsOn: map[string]string{}}
		if len(svc.DependsOn) > 0 {
			var list []string
			var conds map[string]struct {
				Condition string `json:"condition"`
			}
			switch {
			case json.Unmarshal(svc.DependsOn, &list) == nil:
				for _, s := range list {
					p.dependsOn[s] = "service_started"
				}
			case json.Unmarshal(svc.DependsOn, &conds) == nil:
				for s, c := range conds {
					p.dependsOn[s] = c.Condition
				}
			default:
				return nil, fmt.Errorf("%s: service %s: depends_on is neither a list nor a map", path, name)
			}
		}
		d.Processes = append(d.Processes, p)
		byName[name] = p
	}
	slices.SortFunc(d.Processes, func(a, b *Process) int { return strings.Compare(a.name, b.name) })
	d.resolve = func(host, port string) (string, error) {
		q, ok := byName[host]
		if !ok {
			return "", fmt.Errorf("no crdplane service %q", host)
		}
		if q.grpcPort() != port {
			return "", fmt.Errorf("service %s serves gRPC on port %s, not %s", host, q.grpcPort(), port)
		}
		return q.Module, nil
	}
	d.startsAfter = func(from *Process, module string) (bool, string) {
		for s, cond := range from.dependsOn {
			if q, ok := byName[s]; ok && q.Module == module {
				if cond != "service_healthy" {
					return false, fmt.Sprintf("depends_on %s is %s, not service_healthy", s, cond)
				}
				return true, ""
			}
		}
		return false, "not in its depends_on"
	}
	return d, nil
}

// Kubectl is the pinned kubectl 1.33 (its kustomize) when installed, else
// kubectl; $KUBECTL overrides it.
func Kubectl() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	for _, p := range []string{"/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/local/bin/kubectl.1.33", "/usr/bin/kubectl.1.33"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "kubectl"
}

// Kustomize renders the kustomization in dir with `kubectl kustomize`.
func Kustomize(dir string) (*Deployment, error) {
	cmd := exec.Command(Kubectl(), "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return Manifests("kustomize "+dir, out)
}

// Manifests reads the Kubernetes objects of a YAML stream.
func Manifests(name string, stream []byte) (*Deployment, error) {
	var services []*corev1.Service
	var policies []*networkingv1.NetworkPolicy
	d := &Deployment{Name: name}
	addWorkload := func(kind, name string, pod corev1.PodTemplateSpec) {
		for _, c := range pod.Spec.Containers {
			m := serviceImage.FindStringSubmatch(c.Image)
			if m == nil {
				continue // etcd
			}
			args := c.Args
			if len(c.Command) > 0 {
				if filepath.Base(c.Command[0]) != "crdplane-"+m[1] {
					continue
				}
				args = append(slices.Clone(c.Command[1:]), args...)
			}
			d.Processes = append(d.Processes, &Process{
				Where: kind + "/" + name + " container " + c.Name, Module: m[1], Args: args,
				podLabels: labels.Set(pod.Labels), ports: c.Ports,
			})
		}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, err
		}
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/Deployment":
			var o appsv1.Deployment
			if err := yaml.Unmarshal(doc, &o); err != nil {
				return nil, err
			}
			addWorkload("Deployment", o.Name, o.Spec.Template)
		case "apps/v1/StatefulSet":
			var o appsv1.StatefulSet
			if err := yaml.Unmarshal(doc, &o); err != nil {
				return nil, err
			}
			addWorkload("StatefulSet", o.Name, o.Spec.Template)
		case "v1/Service":
			o := &corev1.Service{}
			if err := yaml.Unmarshal(doc, o); err != nil {
				return nil, err
			}
			services = append(services, o)
		case "networking.k8s.io/v1/NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			if err := yaml.Unmarshal(doc, o); err != nil {
				return nil, err
			}
			policies = append(policies, o)
		}
	}

	// An address is a Service (name, or name.namespace.svc...), one of its
	// ports, and the pods it selects on the container port it targets.
	d.resolve = func(host, port string) (string, error) {
		name, _, _ := strings.Cut(host, ".")
		i := slices.IndexFunc(services, func(s *corev1.Service) bool { return s.Name == name })
		if i < 0 {
			return "", fmt.Errorf("no Service %q", name)
		}
		svc := services[i]
		j := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == port })
		if j < 0 {
			return "", fmt.Errorf("Service %s has no port %s", name, port)
		}
		sp := svc.Spec.Ports[j]
		target := sp.TargetPort.String()
		if target == "" || target == "0" {
			target = port
		}
		module := ""
		for _, q := range d.Processes {
			if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(q.podLabels) {
				continue
			}
			cp := q.containerPort(target)
			if cp == nil || strconv.Itoa(int(cp.ContainerPort)) != q.grpcPort() {
				return "", fmt.Errorf("Service %s port %s targets %s, not %s's gRPC port (%s)", name, port, target, q.Where, q.grpcPort())
			}
			if module != "" && module != q.Module {
				return "", fmt.Errorf("Service %s selects both the %s and the %s", name, module, q.Module)
			}
			module = q.Module
		}
		if module == "" {
			return "", fmt.Errorf("Service %s selects no crdplane process", name)
		}
		return module, nil
	}

	// As a network plugin enforces ingress policies: a pod selected by some
	// policy is reachable only as one of them allows.
	d.admits = func(from, to *Process) bool {
		grpc := to.containerPortNumbered(to.grpcPort())
		isolated := false
		for _, np := range policies {
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) && len(np.Spec.PolicyTypes) > 0 {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || !sel.Matches(to.podLabels) {
				continue
			}
			isolated = true
			for _, rule := range np.Spec.Ingress {
				if peersAdmit(rule.From, from.podLabels) && portsAdmit(rule.Ports, grpc) {
					return true
				}
			}
		}
		return !isolated
	}
	return d, nil
}

func peersAdmit(peers []networkingv1.NetworkPolicyPeer, pod labels.Set) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil {
			continue // other namespaces, addresses
		}
		if sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err == nil && sel.Matches(pod) {
			return true
		}
	}
	return false
}

func portsAdmit(ports []networkingv1.NetworkPolicyPort, cp *corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	if cp == nil {
		return false
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.String() == cp.Name || p.Port.String() == strconv.Itoa(int(cp.ContainerPort)) {
			return true
		}
	}
	return false
}

// containerPort is the port p declares by name or number.
func (p *Process) containerPort(port string) *corev1.ContainerPort {
	for i, cp := range p.ports {
		if cp.Name == port || strconv.Itoa(int(cp.ContainerPort)) == port {
			return &p.ports[i]
		}
	}
	return nil
}

// containerPortNumbered is the declared port with that number.
func (p *Process) containerPortNumbered(port string) *corev1.ContainerPort {
	for i, cp := range p.ports {
		if strconv.Itoa(int(cp.ContainerPort)) == port {
			return &p.ports[i]
		}
	}
	return nil
}
