// Command apiextensions-upstream runs upstream Kubernetes'
// apiextensions-apiserver (the version pinned in this module's go.mod) on an
// embedded etcd, on loopback, as the reference the conformance oracle
// compares crdplane against. It is a test helper: it is built with
// GOWORK=off (its Kubernetes libraries are older than crdplane's) and is
// never part of a deployment.
//
// On start it prints one JSON line to stdout:
//
//	{"url":"https://127.0.0.1:NNNN","token":"..."}
//
// The token authenticates as a member of system:masters (the server's
// loopback credentials). It runs until SIGTERM or SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/client-go/tools/cache"
)

func main() {
	dir := flag.String("dir", "", "working directory for etcd data and serving certificates (default: a new temporary directory, removed on exit)")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "apiextensions-upstream:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "apiextensions-upstream")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	etcdURL, closeEtcd, err := startEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer closeEtcd()

	// The server's delegated authentication and authorization need a
	// kubeconfig to start; nothing is ever sent to it (lookups are skipped
	// and every request uses the loopback token, which is system:masters).
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(unusedKubeconfig), 0o600); err != nil {
		return err
	}

	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	fs := pflag.NewFlagSet("apiextensions-apiserver", pflag.ContinueOnError)
	o.AddFlags(fs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	o.RecommendedOptions.SecureServing.Listener = ln
	o.RecommendedOptions.SecureServing.BindPort = ln.Addr().(*net.TCPAddr).Port
	o.RecommendedOptions.SecureServing.ServerCert.CertDirectory = filepath.Join(dir, "certs")
	o.RecommendedOptions.SecureServing.ExternalAddress = ln.Addr().(*net.TCPAddr).IP
	if err := fs.Parse([]string{
		"--etcd-servers", etcdURL,
		"--authentication-skip-lookup",
		"--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig,
		"--kubeconfig", kubeconfig,
		"--enable-priority-and-fairness=false",
		"--disable-admission-plugins", "NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy",
	}); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return fmt.Errorf("complete options: %w", err)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("validate options: %w", err)
	}
	cfg, err := o.Config()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defs := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	cfg.GenericConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, openapinamer.NewDefinitionNamer(extensionsapiserver.Scheme))
	server, err := cfg.Complete().New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return fmt.Errorf("new server: %w", err)
	}
	if err := serveRootDiscovery(server); err != nil {
		return err
	}
	loopback := server.GenericAPIServer.LoopbackClientConfig

	errc := make(chan error, 1)
	go func() { errc <- server.GenericAPIServer.PrepareRun().RunWithContext(ctx) }()

	line, err := json.Marshal(map[string]string{
		"url":   "https://" + ln.Addr().String(),
		"token": loopback.BearerToken,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startEtcd starts a single-member etcd on free loopback ports.
func startEtcd(dataDir string) (string, func(), error) {
	cfg := embed.NewConfig()
	cfg.Dir = dataDir
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	client, err := freeURL()
	if err != nil {
		return "", nil, err
	}
	peer, err := freeURL()
	if err != nil {
		return "", nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return "", nil, errors.New("not ready after 60s")
	}
	slog.Debug("etcd ready", "url", client.String())
	return client.String(), e.Close, nil
}

func freeURL() (*url.URL, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	return url.Parse("http://" + ln.Addr().String())
}

const unusedKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    server: http://127.0.0.1:1
  name: unused
contexts:
- context:
    cluster: unused
    user: unused
  name: unused
current-context: unused
users:
- name: unused
  user:
    token: unused
`

// serveRootDiscovery serves /apis as kube-apiserver's aggregator does in a
// cluster (apiextensions-apiserver turns its own off): without it no
// discovering client (kubectl, client-go's discovery and REST mappers, helm)
// finds the CRDs' groups. The aggregated form lists every CRD group already
// (the server's own discovery controller fills it); the legacy APIGroupList,
// which older clients read, gets each established CRD's group and served
// versions, as the aggregator's APIService auto-registration gives it.
func serveRootDiscovery(server *extensionsapiserver.CustomResourceDefinitions) error {
	gs := server.GenericAPIServer
	apis := discoveryendpoint.WrapAggregatedDiscoveryToHandler(gs.DiscoveryGroupManager, gs.AggregatedDiscoveryGroupManager)
	gs.Handler.GoRestfulContainer.Add(apis.GenerateWebService("/apis", metav1.APIGroupList{}))

	informer := server.Informers.Apiextensions().V1().CustomResourceDefinitions()
	var mu sync.Mutex
	listed := map[string]bool{}
	resync := func() {
		mu.Lock()
		defer mu.Unlock()
		crds, err := informer.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		versions := map[string]map[string]bool{}
		for _, crd := range crds {
			if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Served {
					if versions[crd.Spec.Group] == nil {
						versions[crd.Spec.Group] = map[string]bool{}
					}
					versions[crd.Spec.Group][v.Name] = true
				}
			}
		}
		for group, vs := range versions {
			g := metav1.APIGroup{Name: group}
			for v := range vs {
				g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
			}
			sort.Slice(g.Versions, func(i, j int) bool {
				return version.CompareKubeAwareVersionStrings(g.Versions[i].Version, g.Versions[j].Version) > 0
			})
			g.PreferredVersion = g.Versions[0]
			gs.DiscoveryGroupManager.AddGroup(g)
			listed[group] = true
		}
		for group := range listed {
			if versions[group] == nil {
				gs.DiscoveryGroupManager.RemoveGroup(group)
				delete(listed, group)
			}
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { resync() },
		UpdateFunc: func(any, any) { resync() },
		DeleteFunc: func(any) { resync() },
	})
	return err
}
