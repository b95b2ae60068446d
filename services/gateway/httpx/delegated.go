package httpx

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	tokenwebhook "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The ConfigMap in which kube-apiserver publishes its client CA and front
// proxy configuration for extension API servers, and its keys (upstream's
// DelegatingAuthenticationOptions read the same).
const (
	AuthenticationConfigMapNamespace = "kube-system"
	AuthenticationConfigMapName      = "extension-apiserver-authentication"
)

// DelegatedTimeout is the time limit of a TokenReview or
// SubjectAccessReview sent to the front kube-apiserver, upstream's
// delegating default.
const DelegatedTimeout = 10 * time.Second

// DelegatedAuthConfig is the delegated authentication of an extension API
// server (upstream's DelegatingAuthenticationOptions): bearer tokens are
// reviewed by the front kube-apiserver (TokenReview v1), and the client CA
// and front proxy configuration that the flags do not give are read from
// kube-system/extension-apiserver-authentication and followed.
type DelegatedAuthConfig struct {
	// Kubeconfig names the front kube-apiserver, with a user allowed to
	// create tokenreviews and to read the ConfigMap
	// (--authentication-kubeconfig).
	Kubeconfig string
	// SkipLookup: nothing is read from the ConfigMap
	// (--authentication-skip-lookup).
	SkipLookup bool
	// TolerateLookupFailure: a ConfigMap that cannot be read leaves the
	// front proxy authentication off instead of stopping the server
	// (--authentication-tolerate-lookup-failure).
	TolerateLookupFailure bool
	// ClientCAGiven and RequestHeaderGiven: --client-ca-file and
	// --requestheader-client-ca-file are set, so the ConfigMap's are not
	// looked up.
	ClientCAGiven, RequestHeaderGiven bool
}

// delegatedAuth is what DelegatedAuthConfig builds: the token reviewer and
// the configuration followed from the ConfigMap (nil when not looked up).
type delegatedAuth struct {
	tokens        authenticator.Token
	clientCA      *dynamiccertificates.ConfigMapCAController
	requestHeader *requestHeaderFromConfigMap
}

// requestHeaderFromConfigMap is the front proxy configuration of the
// ConfigMap: its CA (requestheader-client-ca-file) and the header names
// and allowed names (upstream's DynamicRequestHeaderController, which is
// not exported).
type requestHeaderFromConfigMap struct {
	ca      *dynamiccertificates.ConfigMapCAController
	headers *headerrequest.RequestHeaderAuthRequestController
}

// delegatedClient is a clientset for kubeconfig with upstream's delegating
// client settings (QPS 200, burst 400: it limits the server's throughput).
func delegatedClient(kubeconfig string, timeout time.Duration) (*kubernetes.Clientset, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 200, 400
	rc.Timeout = timeout
	return kubernetes.NewForConfig(rc)
}

// newDelegatedAuth connects to the front and reads the ConfigMap's front
// proxy headers once (RunOnce, as upstream: the ConfigMap must be readable
// unless TolerateLookupFailure; one that does not exist is no error); run
// follows its changes and loads the CAs (until the informers have synced,
// a client certificate is not verified, as upstream).
func newDelegatedAuth(ctx context.Context, cfg DelegatedAuthConfig) (*delegatedAuth, error) {
	client, err := delegatedClient(cfg.Kubeconfig, 0)
	if err != nil {
		return nil, fmt.Errorf("--authentication-kubeconfig: %w", err)
	}
	wh, err := tokenwebhook.NewFromInterface(client.AuthenticationV1(), nil, *tokenwebhook.DefaultRetryBackoff(), DelegatedTimeout, tokenwebhook.AuthenticatorMetrics{
		RecordRequestTotal:   func(context.Context, string) {},
		RecordRequestLatency: func(context.Context, string, float64) {},
	})
	if err != nil {
		return nil, fmt.Errorf("--authentication-kubeconfig: %w", err)
	}
	d := &delegatedAuth{tokens: wh}
	if cfg.SkipLookup {
		return d, nil
	}
	log := slog.Default().With("configmap", AuthenticationConfigMapNamespace+"/"+AuthenticationConfigMapName)
	if !cfg.ClientCAGiven {
		c, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", AuthenticationConfigMapNamespace, AuthenticationConfigMapName, "client-ca-file", client)
		if err != nil {
			return nil, fmt.Errorf("unable to load configmap based client CA file: %w", err)
		}
		if err := c.RunOnce(ctx); err != nil {
			return nil, fmt.Errorf("unable to load configmap based client CA file: %w", err)
		}
		d.clientCA = c
		log.Info("gateway: client certificates verified by the front's client-ca-file")
	}
	if !cfg.RequestHeaderGiven {
		rh, err := newRequestHeaderFromConfigMap(ctx, client)
		switch {
		case err != nil && cfg.TolerateLookupFailure:
			log.Warn("Error looking up in-cluster authentication configuration; continuing without the front proxy authentication", "err", err)
		case err != nil:
			return nil, fmt.Errorf("unable to load configmap based request-header-client-ca-file: %w", err)
		default:
			d.requestHeader = rh
			log.Info("gateway: front proxy authentication from the front's requestheader configuration")
		}
	}
	return d, nil
}

func newRequestHeaderFromConfigMap(ctx context.Context, client kubernetes.Interface) (*requestHeaderFromConfigMap, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", AuthenticationConfigMapNamespace, AuthenticationConfigMapName, "requestheader-client-ca-file", client)
	if err != nil {
		return nil, fmt.Errorf("unable to create DynamicCAFromConfigMap controller: %w", err)
	}
	headers := headerrequest.NewRequestHeaderAuthRequestController(AuthenticationConfigMapName, AuthenticationConfigMapNamespace, client,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	if err := utilerrors.NewAggregate([]error{ca.RunOnce(ctx), headers.RunOnce(ctx)}); err != nil {
		return nil, err
	}
	return &requestHeaderFromConfigMap{ca: ca, headers: headers}, nil
}

// authenticator is the front proxy authenticator of the ConfigMap's
// configuration, as it is when a request comes.
func (rh *requestHeaderFromConfigMap) authenticator() authenticator.Request {
	return headerrequest.NewDynamicVerifyOptionsSecure(rh.ca.VerifyOptions,
		headerrequest.StringSliceProviderFunc(rh.headers.AllowedClientNames),
		headerrequest.StringSliceProviderFunc(rh.headers.UsernameHeaders),
		headerrequest.StringSliceProviderFunc(rh.headers.UIDHeaders),
		headerrequest.StringSliceProviderFunc(rh.headers.GroupHeaders),
		headerrequest.StringSliceProviderFunc(rh.headers.ExtraHeaderPrefixes))
}

// run follows the ConfigMap until ctx ends.
func (d *delegatedAuth) run(ctx context.Context) {
	if d == nil {
		return
	}
	if d.clientCA != nil {
		go d.clientCA.Run(ctx, 1)
	}
	if d.requestHeader != nil {
		go d.requestHeader.ca.Run(ctx, 1)
		go d.requestHeader.headers.Run(ctx, 1)
	}
}
