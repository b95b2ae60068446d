package gateway

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crdplane/crdplane/pkg/egress"
	"github.com/crdplane/crdplane/services/gateway/aggregator"
	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// Auth configures authentication and authorization at the edge, with
// kube-apiserver's flags (crdplane run has them too).
type Auth struct {
	// TokenFile is a static token file (CSV "token,user,uid[,\"groups\"]",
	// kube-apiserver's format).
	TokenFile string
	// ClientCAFile verifies client certificates: CN is the user, O the
	// groups.
	ClientCAFile string
	// TokenWebhookConfigFile is a kubeconfig naming a TokenReview v1
	// webhook; its answers are cached for TokenWebhookCacheTTL.
	TokenWebhookConfigFile string
	TokenWebhookCacheTTL   time.Duration
	// RequestHeader is the front proxy (aggregator) authentication.
	RequestHeader httpx.RequestHeaderConfig
	// Aggregation is the aggregation layer's: the front-proxy client
	// certificate the gateway presents to APIService backends (the other
	// side of an extension server's requestheader authentication) and
	// where the backends are.
	Aggregation Aggregation
	// AuthorizationModes are tried in order (default AlwaysAllow).
	AuthorizationModes []string
	// AuthorizationWebhookConfigFile is a kubeconfig naming a
	// SubjectAccessReview v1 webhook (mode Webhook), whose allow and deny
	// answers are cached for the TTLs.
	AuthorizationWebhookConfigFile string
	AuthorizationWebhookAuthorizedTTL,
	AuthorizationWebhookUnauthorizedTTL time.Duration
	// AuthenticationKubeconfig and AuthorizationKubeconfig name the front
	// kube-apiserver when crdplane is an extension API server behind it
	// (upstream's delegating options): TokenReviews and the
	// extension-apiserver-authentication ConfigMap through the first,
	// SubjectAccessReviews (mode Webhook) through the second.
	AuthenticationKubeconfig            string
	AuthenticationSkipLookup            bool
	AuthenticationTolerateLookupFailure bool
	AuthorizationKubeconfig             string
	// AuthorizationAlwaysAllowPaths are authorized without asking the
	// modes (upstream's path authorizer; "*" ends a prefix).
	AuthorizationAlwaysAllowPaths []string
}

// RegisterFlags adds the authentication and authorization flags to fs,
// with kube-apiserver's names and defaults (the front proxy headers
// default to the X-Remote-* headers aggregated API servers use).
func (a *Auth) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.TokenFile, "token-file", "", "static token file (kube-apiserver's CSV: token,user,uid[,\"group1,group2\"])")
	fs.StringVar(&a.ClientCAFile, "client-ca-file", "", "PEM CA bundle: a request with a client certificate it verifies is authenticated as the certificate's CommonName, its Organizations the groups")
	fs.StringVar(&a.TokenWebhookConfigFile, "authentication-token-webhook-config-file", "", "kubeconfig of a TokenReview v1 webhook authenticating bearer tokens")
	fs.DurationVar(&a.TokenWebhookCacheTTL, "authentication-token-webhook-cache-ttl", httpx.DefaultTokenWebhookCacheTTL, "how long the token webhook's answers are cached")
	fs.StringVar(&a.RequestHeader.ClientCAFile, "requestheader-client-ca-file", "", "PEM CA bundle verifying the front proxy's client certificate; without it the requestheader headers are ignored")
	listFlag(fs, &a.RequestHeader.AllowedNames, nil, "requestheader-allowed-names", "common names the front proxy's client certificate may have (comma-separated; empty: any verified by --requestheader-client-ca-file)")
	listFlag(fs, &a.RequestHeader.UsernameHeaders, []string{"X-Remote-User"}, "requestheader-username-headers", "request headers naming the user (the first present is used)")
	listFlag(fs, &a.RequestHeader.UIDHeaders, []string{"X-Remote-Uid"}, "requestheader-uid-headers", "request headers giving the user's uid")
	listFlag(fs, &a.RequestHeader.GroupHeaders, []string{"X-Remote-Group"}, "requestheader-group-headers", "request headers giving the user's groups (all values)")
	listFlag(fs, &a.RequestHeader.ExtraHeaderPrefixes, []string{"X-Remote-Extra-"}, "requestheader-extra-headers-prefix", "prefixes of request headers giving the user's extra attributes")
	listFlag(fs, &a.AuthorizationModes, []string{httpx.ModeAlwaysAllow}, "authorization-mode", "comma-separated authorization modes, tried in order: "+strings.Join(httpx.AuthzModes, ", "))
	fs.StringVar(&a.AuthorizationWebhookConfigFile, "authorization-webhook-config-file", "", "kubeconfig of a SubjectAccessReview v1 webhook (--authorization-mode Webhook)")
	fs.DurationVar(&a.AuthorizationWebhookAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", httpx.DefaultWebhookAuthorizedTTL, "how long the authorization webhook's allow answers are cached")
	fs.DurationVar(&a.AuthorizationWebhookUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", httpx.DefaultWebhookUnauthorizedTTL, "how long the authorization webhook's deny answers are cached")
	fs.StringVar(&a.AuthenticationKubeconfig, "authentication-kubeconfig", "", "kubeconfig of the front kube-apiserver when crdplane runs behind it as an extension API server, with a user allowed to create tokenreviews.authentication.k8s.io and read kube-system/"+httpx.AuthenticationConfigMapName+": bearer tokens are reviewed there, and the client CA and requestheader configuration not given by flags are read from that ConfigMap")
	fs.BoolVar(&a.AuthenticationSkipLookup, "authentication-skip-lookup", false, "with --authentication-kubeconfig: do not read the missing client CA and requestheader configuration from the front's ConfigMap")
	fs.BoolVar(&a.AuthenticationTolerateLookupFailure, "authentication-tolerate-lookup-failure", false, "with --authentication-kubeconfig: a ConfigMap that cannot be read leaves the requestheader authentication off instead of stopping the server")
	fs.StringVar(&a.AuthorizationKubeconfig, "authorization-kubeconfig", "", "kubeconfig of the front kube-apiserver, with a user allowed to create subjectaccessreviews.authorization.k8s.io: --authorization-mode Webhook delegates there (instead of --authorization-webhook-config-file)")
	listFlag(fs, &a.AuthorizationAlwaysAllowPaths, []string{"/healthz", "/readyz", "/livez"}, "authorization-always-allow-paths", "HTTP paths authorized without asking the authorization modes (a trailing * makes a prefix)")

	a.Aggregation.RegisterFlags(fs)
}

// Aggregation configures the aggregation layer (APIServices).
type Aggregation struct {
	// ProxyClientCertFile and ProxyClientKeyFile are the PEM client
	// certificate and key presented to APIService backends, as
	// kube-apiserver's flags of the same names.
	ProxyClientCertFile, ProxyClientKeyFile string
	// ServiceOverrides give the address of Services that
	// <name>.<namespace>.svc does not reach (crdplane outside a cluster).
	ServiceOverrides aggregator.Overrides
	// ProbeInterval is how often each APIService's backend is checked.
	ProbeInterval time.Duration
}

// RegisterFlags adds the aggregation layer's flags to fs.
func (g *Aggregation) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&g.ProxyClientCertFile, "proxy-client-cert-file", "", "PEM client certificate presented to APIService backends (their --requestheader-client-ca-file verifies it)")
	fs.StringVar(&g.ProxyClientKeyFile, "proxy-client-key-file", "", "PEM key of --proxy-client-cert-file")
	g.ServiceOverrides = aggregator.Overrides{}
	fs.Var(g.ServiceOverrides, "aggregator-service-override", "<namespace>/<name>:<port>=<host>:<port>: dial host:port for an APIService's Service instead of <name>.<namespace>.svc:<port> (repeatable; for crdplane outside a cluster)")
	fs.DurationVar(&g.ProbeInterval, "aggregator-probe-interval", 30*time.Second, "how often each APIService's backend is checked for the Available condition (a failed check is retried sooner)")
}

// Validate checks that the client certificate and key go together.
func (g *Aggregation) Validate() error {
	if (g.ProxyClientCertFile == "") != (g.ProxyClientKeyFile == "") {
		return errors.New("--proxy-client-cert-file and --proxy-client-key-file go together")
	}
	if g.ProbeInterval < 0 {
		return errors.New("--aggregator-probe-interval can not be negative")
	}
	return nil
}

// listFlag is a comma-separated list flag with a default.
func listFlag(fs *flag.FlagSet, p *[]string, def []string, name, usage string) {
	*p = slices.Clone(def)
	fs.Func(name, usage+" (default "+strings.Join(def, ",")+")", func(s string) error {
		*p = nil
		for v := range strings.SplitSeq(s, ",") {
			if v = strings.TrimSpace(v); v != "" {
				*p = append(*p, v)
			}
		}
		return nil
	})
}

// Validate refuses an unknown mode, and the webhook's configuration
// without its mode (and the reverse). The files are read when the gateway
// starts (New): one that does not exist or does not parse stops it (the
// deployments' wiring checks validate flags where the files are not).
func (a *Auth) Validate() error {
	webhook := false
	for _, m := range a.AuthorizationModes {
		if !slices.Contains(httpx.AuthzModes, m) {
			return fmt.Errorf("--authorization-mode: unknown mode %q (modes: %s)", m, strings.Join(httpx.AuthzModes, ","))
		}
		webhook = webhook || m == httpx.ModeWebhook
	}
	if webhook && a.AuthorizationWebhookConfigFile == "" && a.AuthorizationKubeconfig == "" {
		return errors.New("--authorization-mode Webhook needs --authorization-webhook-config-file or --authorization-kubeconfig")
	}
	if a.AuthorizationWebhookConfigFile != "" && a.AuthorizationKubeconfig != "" {
		return errors.New("--authorization-webhook-config-file and --authorization-kubeconfig exclude each other")
	}
	if !webhook && a.AuthorizationWebhookConfigFile != "" {
		return errors.New("--authorization-webhook-config-file is given without --authorization-mode Webhook")
	}
	if !webhook && a.AuthorizationKubeconfig != "" {
		return errors.New("--authorization-kubeconfig is given without --authorization-mode Webhook")
	}
	if a.AuthenticationKubeconfig == "" && (a.AuthenticationSkipLookup || a.AuthenticationTolerateLookupFailure) {
		return errors.New("--authentication-skip-lookup and --authentication-tolerate-lookup-failure need --authentication-kubeconfig")
	}
	if len(a.RequestHeader.AllowedNames) > 0 && a.RequestHeader.ClientCAFile == "" {
		return errors.New("--requestheader-allowed-names needs --requestheader-client-ca-file")
	}
	return a.Aggregation.Validate()
}

// authConfigs are the edge's authentication and authorization
// configurations.
func (c *Config) authConfigs() (httpx.AuthConfig, httpx.AuthzConfig) {
	a := c.Auth
	var delegated *httpx.DelegatedAuthConfig
	if a.AuthenticationKubeconfig != "" {
		delegated = &httpx.DelegatedAuthConfig{Kubeconfig: a.AuthenticationKubeconfig, SkipLookup: a.AuthenticationSkipLookup,
			TolerateLookupFailure: a.AuthenticationTolerateLookupFailure}
	}
	return httpx.AuthConfig{
			Tokens:                 c.Tokens,
			TokenFile:              a.TokenFile,
			ClientCAFile:           a.ClientCAFile,
			TokenWebhookConfigFile: a.TokenWebhookConfigFile,
			TokenWebhookCacheTTL:   a.TokenWebhookCacheTTL,
			WebhookDial:            c.egressDial(egress.ControlPlane),
			RequestHeader:          a.RequestHeader,
			Delegated:              delegated,
		}, httpx.AuthzConfig{
			Modes:                  a.AuthorizationModes,
			WebhookConfigFile:      a.AuthorizationWebhookConfigFile,
			WebhookDial:            c.egressDial(egress.ControlPlane),
			Kubeconfig:             a.AuthorizationKubeconfig,
			AlwaysAllowPaths:       a.AuthorizationAlwaysAllowPaths,
			WebhookAuthorizedTTL:   a.AuthorizationWebhookAuthorizedTTL,
			WebhookUnauthorizedTTL: a.AuthorizationWebhookUnauthorizedTTL,
		}
}
