package aggregator

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// ServiceRef is an APIService's spec.service: a Service by namespace,
// name and port.
type ServiceRef struct {
	Namespace, Name string
	Port            int32
}

func (r ServiceRef) String() string {
	return r.Namespace + "/" + r.Name + ":" + strconv.Itoa(int(r.Port))
}

// Overrides maps Services to the host:port that serves them: the
// --aggregator-service-override flag (repeated
// <namespace>/<name>:<port>=<host>:<port>), for a crdplane that runs
// outside a cluster, where <name>.<namespace>.svc does not resolve. It is
// a flag.Value.
type Overrides map[ServiceRef]string

// String renders the overrides as the flag's values, sorted.
func (o Overrides) String() string {
	out := make([]string, 0, len(o))
	for ref, addr := range o {
		out = append(out, ref.String()+"="+addr)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Set adds one <namespace>/<name>:<port>=<host>:<port>.
func (o Overrides) Set(v string) error {
	ref, addr, err := ParseOverride(v)
	if err != nil {
		return err
	}
	o[ref] = addr
	return nil
}

// ParseOverride parses <namespace>/<name>:<port>=<host>:<port>.
func ParseOverride(v string) (ServiceRef, string, error) {
	svc, addr, ok := strings.Cut(v, "=")
	if !ok {
		return ServiceRef{}, "", fmt.Errorf("service override %q: want <namespace>/<name>:<port>=<host>:<port>", v)
	}
	nsName, portStr, ok := strings.Cut(svc, ":")
	ns, name, ok2 := strings.Cut(nsName, "/")
	if !ok || !ok2 || ns == "" || name == "" {
		return ServiceRef{}, "", fmt.Errorf("service override %q: the service must be <namespace>/<name>:<port>", v)
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil || port < 1 || port > 65535 {
		return ServiceRef{}, "", fmt.Errorf("service override %q: invalid port %q", v, portStr)
	}
	host, hostPort, err := net.SplitHostPort(addr)
	if err != nil || host == "" || hostPort == "" {
		return ServiceRef{}, "", fmt.Errorf("service override %q: the address must be <host>:<port>", v)
	}
	return ServiceRef{Namespace: ns, Name: name, Port: int32(port)}, addr, nil
}

// Resolver turns a Service into the host:port to dial. crdplane serves
// no core Services or Endpoints, so where kube-apiserver dials the
// Service's ClusterIP (or, with --enable-aggregator-routing, an
// endpoint), crdplane dials the Service's DNS name
// <name>.<namespace>.svc:<port>, which resolves when crdplane runs in a
// Kubernetes pod, unless an override names another address.
type Resolver struct {
	overrides Overrides
}

// NewResolver returns a Resolver with overrides (may be nil).
func NewResolver(overrides Overrides) *Resolver {
	return &Resolver{overrides: overrides}
}

// Resolve returns the host:port of a Service.
func (r *Resolver) Resolve(ref ServiceRef) string {
	if addr, ok := r.overrides[ref]; ok {
		return addr
	}
	return net.JoinHostPort(ServerName(ref), strconv.Itoa(int(ref.Port)))
}

// ServerName is the name a backend's serving certificate is checked
// against, as kube-aggregator: <name>.<namespace>.svc.
func ServerName(ref ServiceRef) string {
	return ref.Name + "." + ref.Namespace + ".svc"
}
