package httpx

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/path"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	authzwebhook "k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	authzmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/metrics"
)

// Authorization modes (--authorization-mode).
const (
	ModeAlwaysAllow = "AlwaysAllow"
	ModeAlwaysDeny  = "AlwaysDeny"
	ModeWebhook     = "Webhook"
	ModeRBAC        = "RBAC"
)

// AuthzModes are the modes --authorization-mode accepts.
var AuthzModes = []string{ModeAlwaysAllow, ModeAlwaysDeny, ModeRBAC, ModeWebhook}

// Defaults of kube-apiserver's --authorization-webhook-cache-*-ttl.
const (
	DefaultWebhookAuthorizedTTL   = 5 * time.Minute
	DefaultWebhookUnauthorizedTTL = 30 * time.Second
)

// AuthzConfig configures the edge's authorization, as kube-apiserver's
// flags of the same names.
type AuthzConfig struct {
	// Modes are tried in order (--authorization-mode); the first to allow
	// or deny decides, none: forbidden. Empty: AlwaysAllow.
	Modes []string
	// WebhookConfigFile is a kubeconfig naming a SubjectAccessReview v1
	// webhook (--authorization-webhook-config-file), for mode Webhook.
	WebhookConfigFile string
	// WebhookDial dials the webhook, as kube-apiserver's egress
	// selector's controlplane selection does (nil: directly).
	WebhookDial utilnet.DialFunc
	// Kubeconfig names the front kube-apiserver of an extension API
	// server (--authorization-kubeconfig): mode Webhook then sends its
	// SubjectAccessReviews there, as upstream's delegated authorization
	// does (instead of WebhookConfigFile; one of them).
	Kubeconfig string
	// AlwaysAllowPaths are allowed to everyone without asking the
	// authorizers (--authorization-always-allow-paths: plain paths, or
	// prefixes ending in "*"), upstream's path authorizer.
	AlwaysAllowPaths []string
	// WebhookAuthorizedTTL and WebhookUnauthorizedTTL are how long the
	// webhook's allow and deny answers are cached (default 5m, 30s).
	WebhookAuthorizedTTL   time.Duration
	WebhookUnauthorizedTTL time.Duration
	// RBAC is the RBAC authorizer (mode RBAC), built by the caller over
	// its policy cache; as an authorizer.RuleResolver it also answers
	// SelfSubjectRulesReviews.
	RBAC authorizer.UnconditionalAuthorizer
}

// Authorizer decides whether a request's user may do what it asks, with
// kube-apiserver's request attributes, authorizers (k8s.io/apiserver) and
// 403 Status. Users in system:masters are always allowed, as
// kube-apiserver's privileged group authorizer allows them.
type Authorizer struct {
	chain []namedAuthorizer
	info  request.RequestInfoFactory
	// allowAll: the only mode is AlwaysAllow (no attributes to build).
	allowAll bool
	// fixed is the number of authorizers before the modes in chain
	// (system:masters, the always-allowed paths).
	fixed int
}

type namedAuthorizer struct {
	mode string
	authorizer.UnconditionalAuthorizer
	allowed, denied, noOpinion, errors prometheusCounter
}

// authzDecisions counts every authorizer's decisions (the privileged
// group one is mode "SystemMasters").
var authzDecisions = metrics.NewCounterVec("gateway", "authorization_decisions_total",
	"Authorization decisions by mode (AlwaysAllow, Webhook, ...) and decision (allowed, denied, no-opinion, error); cached webhook answers count too.", "mode", "decision")

var authzDuration = metrics.NewHistogram("gateway", "authorization_duration_seconds",
	"Time to authorize a request (every mode tried; a webhook's answer may be cached).", []float64{1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10})

var webhookAuthzRequests = metrics.NewCounterVec("gateway", "authorization_webhook_requests_total",
	"SubjectAccessReview round trips to the authorization webhook, by HTTP code (cache misses only).", "code")

type prometheusCounter interface{ Inc() }

// NewAuthorizer builds the authorizers cfg configures.
func NewAuthorizer(cfg AuthzConfig) (*Authorizer, error) {
	a := &Authorizer{info: request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}}
	modes := cfg.Modes
	if len(modes) == 0 {
		modes = []string{ModeAlwaysAllow}
	}
	a.allowAll = len(modes) == 1 && modes[0] == ModeAlwaysAllow
	add := func(mode string, az authorizer.UnconditionalAuthorizer) {
		a.chain = append(a.chain, namedAuthorizer{mode: mode, UnconditionalAuthorizer: az,
			allowed: authzDecisions.WithLabelValues(mode, "allowed"), denied: authzDecisions.WithLabelValues(mode, "denied"),
			noOpinion: authzDecisions.WithLabelValues(mode, "no-opinion"), errors: authzDecisions.WithLabelValues(mode, "error")})
	}
	add("SystemMasters", authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup))
	if len(cfg.AlwaysAllowPaths) > 0 {
		pa, err := path.NewAuthorizer(cfg.AlwaysAllowPaths)
		if err != nil {
			return nil, fmt.Errorf("--authorization-always-allow-paths: %w", err)
		}
		add("AlwaysAllowPaths", pa)
	}
	a.fixed = len(a.chain)
	seen := map[string]bool{}
	for _, m := range modes {
		if seen[m] {
			return nil, fmt.Errorf("--authorization-mode: %q is given more than once", m)
		}
		seen[m] = true
		switch m {
		case ModeAlwaysAllow:
			add(m, authorizerfactory.NewAlwaysAllowAuthorizer())
		case ModeAlwaysDeny:
			add(m, authorizerfactory.NewAlwaysDenyAuthorizer())
		case ModeRBAC:
			if cfg.RBAC == nil {
				return nil, fmt.Errorf("--authorization-mode %s: no RBAC authorizer", ModeRBAC)
			}
			add(m, cfg.RBAC)
		case ModeWebhook:
			wh, err := newWebhookAuthorizer(cfg)
			if err != nil {
				return nil, err
			}
			add(m, wh)
		default:
			return nil, fmt.Errorf("--authorization-mode: unknown mode %q (modes: %s)", m, strings.Join(AuthzModes, ","))
		}
	}
	if cfg.WebhookConfigFile != "" && !seen[ModeWebhook] {
		return nil, fmt.Errorf("--authorization-webhook-config-file is given without --authorization-mode %s", ModeWebhook)
	}
	if cfg.Kubeconfig != "" && !seen[ModeWebhook] {
		return nil, fmt.Errorf("--authorization-kubeconfig is given without --authorization-mode %s", ModeWebhook)
	}
	return a, nil
}

// newWebhookAuthorizer is upstream's SubjectAccessReview v1 authorizer
// with its decision cache: to the webhook of cfg.WebhookConfigFile, or to
// the front kube-apiserver of cfg.Kubeconfig (delegated authorization,
// through client-go's authorization/v1 client, with upstream's delegating
// client time limit).
func newWebhookAuthorizer(cfg AuthzConfig) (authorizer.UnconditionalAuthorizer, error) {
	allowTTL, denyTTL := cfg.WebhookAuthorizedTTL, cfg.WebhookUnauthorizedTTL
	if allowTTL <= 0 {
		allowTTL = DefaultWebhookAuthorizedTTL
	}
	if denyTTL <= 0 {
		denyTTL = DefaultWebhookUnauthorizedTTL
	}
	switch {
	case cfg.WebhookConfigFile != "" && cfg.Kubeconfig != "":
		return nil, fmt.Errorf("--authorization-mode %s takes --authorization-webhook-config-file or --authorization-kubeconfig, not both", ModeWebhook)
	case cfg.Kubeconfig != "":
		client, err := delegatedClient(cfg.Kubeconfig, DelegatedTimeout)
		if err != nil {
			return nil, fmt.Errorf("--authorization-kubeconfig: %w", err)
		}
		wh, err := authzwebhook.NewFromInterface(client.AuthorizationV1(), allowTTL, denyTTL, *authzwebhook.DefaultRetryBackoff(),
			authorizer.DecisionNoOpinion, webhookMetrics{}, nil)
		if err != nil {
			return nil, fmt.Errorf("--authorization-kubeconfig: %w", err)
		}
		return wh, nil
	case cfg.WebhookConfigFile != "":
		rc, err := webhookutil.LoadKubeconfig(cfg.WebhookConfigFile, cfg.WebhookDial)
		if err != nil {
			return nil, fmt.Errorf("--authorization-webhook-config-file: %w", err)
		}
		wh, err := authzwebhook.New(rc, "v1", allowTTL, denyTTL, *authzwebhook.DefaultRetryBackoff(),
			authorizer.DecisionNoOpinion, nil, "webhook", webhookMetrics{}, nil)
		if err != nil {
			return nil, fmt.Errorf("--authorization-webhook-config-file: %w", err)
		}
		return wh, nil
	default:
		return nil, fmt.Errorf("--authorization-mode %s needs --authorization-webhook-config-file or --authorization-kubeconfig", ModeWebhook)
	}
}

// webhookMetrics counts the webhook's round trips (upstream's interface;
// the rest is not recorded).
type webhookMetrics struct {
	authzmetrics.NoopAuthorizerMetrics
}

func (webhookMetrics) RecordRequestTotal(_ context.Context, code string) {
	webhookAuthzRequests.WithLabelValues(code).Inc()
}

// AuthorizeRequest answers whether r, from u, may proceed; when not, it
// has written kube-apiserver's answer: 403 with its Forbidden Status (or
// 500 when every authorizer failed). Public paths are always allowed for
// everyone, as kube-apiserver's default RBAC policy allows them. The
// decision and its reason are the audit event's annotations, as
// kube-apiserver's authorization filter records them.
func (a *Authorizer) AuthorizeRequest(w http.ResponseWriter, r *http.Request, u user.Info) bool {
	ctx := r.Context()
	if a == nil || publicPaths[r.URL.Path] {
		audit.AddAuditAnnotations(ctx, decisionAnnotation, decisionAllow, reasonAnnotation, "")
		return true
	}
	if a.allowAll {
		a.chain[a.fixed].allowed.Inc()
		audit.AddAuditAnnotations(ctx, decisionAnnotation, decisionAllow, reasonAnnotation, "")
		return true
	}
	start := time.Now()
	defer func() { authzDuration.Observe(time.Since(start).Seconds()) }()
	attrs, err := a.Attributes(r, u)
	if err != nil {
		responsewriters.InternalError(w, r, err)
		return false
	}
	decision, reason, err := a.decide(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		audit.AddAuditAnnotations(ctx, decisionAnnotation, decisionAllow, reasonAnnotation, reason)
		return true
	}
	if err != nil {
		audit.AddAuditAnnotation(ctx, reasonAnnotation, "internal error")
		responsewriters.InternalError(w, r, err)
		return false
	}
	audit.AddAuditAnnotations(ctx, decisionAnnotation, decisionForbid, reasonAnnotation, reason)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	WriteStatusFor(w, r, kstatus.FromError(responsewriters.ForbiddenStatusError(attrs, reason)))
	return false
}

// The annotations of kube-apiserver's authorization filter.
const (
	decisionAnnotation = "authorization.k8s.io/decision"
	reasonAnnotation   = "authorization.k8s.io/reason"
	decisionAllow      = "allow"
	decisionForbid     = "forbid"
)

// Authorize implements authorizer.UnconditionalAuthorizer with the chain
// (the impersonation filter asks it).
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	return a.decide(ctx, attrs)
}

// allowAll authorizes everything (an edge without an Authorizer).
var allowAll = authorizerfactory.NewAlwaysAllowAuthorizer()

// Attributes are kube-apiserver's authorization attributes of r from u
// (its RequestInfoFactory and authorization filter); the request info on
// r's context when there is one.
func (a *Authorizer) Attributes(r *http.Request, u user.Info) (authorizer.Attributes, error) {
	ctx := r.Context()
	if _, ok := request.RequestInfoFrom(ctx); !ok {
		info, err := a.info.NewRequestInfo(r)
		if err != nil {
			return nil, err
		}
		ctx = request.WithRequestInfo(ctx, info)
	}
	return filters.GetAuthorizerAttributes(request.WithUser(ctx, u))
}

// requestInfoFactory is kube-apiserver's, for /api and /apis.
var requestInfoFactory = &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// withRequestInfo puts the request's RequestInfo on its context (upstream's
// WithRequestInfo filter).
func withRequestInfo(h http.Handler) http.Handler {
	return filters.WithRequestInfo(h, requestInfoFactory)
}

// longRunning reports the requests whose audit events have a
// ResponseStarted stage: watches (crdplane serves no other long-running
// verb).
func longRunning(_ *http.Request, ri *request.RequestInfo) bool {
	return ri != nil && ri.Verb == "watch"
}

// decide runs the chain as kube-apiserver's union authorizer of v1.33:
// the first to allow or deny decides; with none, the reasons are joined.
func (a *Authorizer) decide(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	var errs []error
	var reasons []string
	for _, az := range a.chain {
		d, reason, err := az.Authorize(ctx, attrs)
		if err != nil {
			errs = append(errs, err)
			az.errors.Inc()
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		switch d {
		case authorizer.DecisionAllow:
			az.allowed.Inc()
			return d, reason, err
		case authorizer.DecisionDeny:
			az.denied.Inc()
			return d, reason, err
		default:
			az.noOpinion.Inc()
		}
	}
	return authorizer.DecisionNoOpinion, strings.Join(reasons, "\n"), utilerrors.NewAggregate(errs)
}

// HasMode reports whether mode is configured.
func (a *Authorizer) HasMode(mode string) bool {
	for _, az := range a.chain[a.fixed:] {
		if az.mode == mode {
			return true
		}
	}
	return false
}

// Modes are the configured modes, in order (printed at startup).
func (a *Authorizer) Modes() []string {
	var modes []string
	for _, az := range a.chain[a.fixed:] {
		modes = append(modes, az.mode)
	}
	return modes
}
