package httpx

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	tokenwebhook "k8s.io/apiserver/plugin/pkg/authenticator/token/webhook"

	"go.opentelemetry.io/otel/trace"

	"github.com/crdplane/crdplane/pkg/enduser"
)

// unauthorizedBody is kube-apiserver's answer to a request without valid
// credentials, byte for byte.
const unauthorizedBody = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}` + "\n"

// publicPaths are served without credentials, as kube-apiserver's default
// RBAC (system:public-info-viewer) lets anyone read them.
var publicPaths = map[string]bool{
	"/version": true,
	"/healthz": true,
	"/livez":   true,
	"/readyz":  true,
}

// Anonymous is the user of unauthenticated requests to public paths, as
// kube-apiserver's anonymous authenticator names it.
var Anonymous user.Info = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}

// TokenAdmin is the user of the --token tokens: an administrator, in
// system:masters, which every authorization mode allows (as kube-apiserver
// does).
var TokenAdmin = &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}

// AuthConfig configures the edge's authentication, as kube-apiserver's
// flags of the same names do. Every authenticator configured is tried, in
// kube-apiserver's order: front proxy headers, client certificates, bearer
// tokens (--token, the token file, the webhook); the first to recognise
// the request decides.
type AuthConfig struct {
	// Tokens are bearer tokens of TokenAdmin (--token).
	Tokens []string
	// TokenFile is kube-apiserver's static token file (--token-file): CSV
	// "token,user,uid[,\"group1,group2\"]".
	TokenFile string
	// ClientCAFile verifies client certificates (--client-ca-file): the
	// user is the certificate's common name, its organisations the groups.
	ClientCAFile string
	// TokenWebhookConfigFile is a kubeconfig naming a TokenReview v1
	// webhook (--authentication-token-webhook-config-file); its answers
	// are cached for TokenWebhookCacheTTL (default 2m).
	TokenWebhookConfigFile string
	TokenWebhookCacheTTL   time.Duration
	// WebhookDial dials the token webhook, as kube-apiserver's egress
	// selector's controlplane selection does (nil: directly).
	WebhookDial utilnet.DialFunc
	// RequestHeader authenticates requests from a front proxy (an
	// aggregator): its client certificate, verified by ClientCAFile and
	// with one of AllowedNames as common name (any when empty), vouches
	// for the user named in the headers. Another client's headers are
	// ignored.
	RequestHeader RequestHeaderConfig
	// Delegated, when set, is an extension API server's delegated
	// authentication to the front kube-apiserver: its TokenReviews after
	// the other token authenticators, and the client CA and front proxy
	// configuration of its ConfigMap where ClientCAFile and
	// RequestHeader.ClientCAFile are not set.
	Delegated *DelegatedAuthConfig
}

// RequestHeaderConfig is kube-apiserver's --requestheader-* flags.
type RequestHeaderConfig struct {
	ClientCAFile        string
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// DefaultTokenWebhookCacheTTL is --authentication-token-webhook-cache-ttl's default.
const DefaultTokenWebhookCacheTTL = 2 * time.Minute

// Authenticator tells who a request is from: kube-apiserver's union of
// authenticators (k8s.io/apiserver), the authenticated ones in the group
// system:authenticated; anonymous on the public paths only.
type Authenticator struct {
	req authenticator.Request
	// headers are the front proxy headers, removed from every request
	// (none may reach the backends, whoever sent them).
	headers []headerNames
	// delegated follows the front's ConfigMap (Run).
	delegated *delegatedAuth
}

// headerNames are the front proxy's header names, as configured when a
// request comes.
type headerNames struct {
	user, uid, group, extra headerrequest.StringSliceProvider
}

func staticHeaderNames(c RequestHeaderConfig) headerNames {
	return headerNames{headerrequest.StaticStringSlice(c.UsernameHeaders), headerrequest.StaticStringSlice(c.UIDHeaders),
		headerrequest.StaticStringSlice(c.GroupHeaders), headerrequest.StaticStringSlice(c.ExtraHeaderPrefixes)}
}

// NewAuthenticator builds the authenticators cfg configures; a file that
// cannot be read is an error, and so is a front (cfg.Delegated) that
// cannot be reached.
func NewAuthenticator(ctx context.Context, cfg AuthConfig) (*Authenticator, error) {
	var reqs []authenticator.Request
	a := &Authenticator{headers: []headerNames{staticHeaderNames(standardProxyHeaders)}}
	if cfg.Delegated != nil {
		dc := *cfg.Delegated
		dc.ClientCAGiven, dc.RequestHeaderGiven = cfg.ClientCAFile != "", cfg.RequestHeader.ClientCAFile != ""
		d, err := newDelegatedAuth(ctx, dc)
		if err != nil {
			return nil, err
		}
		a.delegated = d
		if rh := d.requestHeader; rh != nil {
			reqs = append(reqs, rh.authenticator())
			a.headers = append(a.headers, headerNames{headerrequest.StringSliceProviderFunc(rh.headers.UsernameHeaders),
				headerrequest.StringSliceProviderFunc(rh.headers.UIDHeaders), headerrequest.StringSliceProviderFunc(rh.headers.GroupHeaders),
				headerrequest.StringSliceProviderFunc(rh.headers.ExtraHeaderPrefixes)})
		}
	}
	rh := cfg.RequestHeader
	a.headers = append(a.headers, staticHeaderNames(rh))
	if rh.ClientCAFile != "" {
		pool, err := readCAFile(rh.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--requestheader-client-ca-file: %w", err)
		}
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = pool
		reqs = append(reqs, headerrequest.NewDynamicVerifyOptionsSecure(
			x509request.StaticVerifierFn(opts),
			headerrequest.StaticStringSlice(rh.AllowedNames),
			headerrequest.StaticStringSlice(rh.UsernameHeaders),
			headerrequest.StaticStringSlice(rh.UIDHeaders),
			headerrequest.StaticStringSlice(rh.GroupHeaders),
			headerrequest.StaticStringSlice(rh.ExtraHeaderPrefixes)))
	}
	if d := a.delegated; d != nil && d.clientCA != nil {
		reqs = append(reqs, x509request.NewDynamic(d.clientCA.VerifyOptions, x509request.CommonNameUserConversion))
	}
	if cfg.ClientCAFile != "" {
		pool, err := readCAFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		opts := x509request.DefaultVerifyOptions()
		opts.Roots = pool
		reqs = append(reqs, x509request.New(opts, x509request.CommonNameUserConversion))
	}
	var tokens []authenticator.Token
	if ts := NewTokenSet(cfg.Tokens); !ts.Empty() {
		tokens = append(tokens, ts)
	}
	if cfg.TokenFile != "" {
		tf, err := tokenfile.NewCSV(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tokens = append(tokens, tf)
	}
	if cfg.TokenWebhookConfigFile != "" {
		rc, err := webhookutil.LoadKubeconfig(cfg.TokenWebhookConfigFile, cfg.WebhookDial)
		if err != nil {
			return nil, fmt.Errorf("--authentication-token-webhook-config-file: %w", err)
		}
		wh, err := tokenwebhook.New(rc, "v1", nil, *tokenwebhook.DefaultRetryBackoff())
		if err != nil {
			return nil, fmt.Errorf("--authentication-token-webhook-config-file: %w", err)
		}
		ttl := cfg.TokenWebhookCacheTTL
		if ttl <= 0 {
			ttl = DefaultTokenWebhookCacheTTL
		}
		tokens = append(tokens, tokencache.New(wh, false, ttl, ttl))
	}
	if d := a.delegated; d != nil {
		ttl := cfg.TokenWebhookCacheTTL
		if ttl <= 0 {
			ttl = DefaultTokenWebhookCacheTTL
		}
		tokens = append(tokens, tokencache.New(d.tokens, false, ttl, ttl))
	}
	if len(tokens) > 0 {
		// audience-agnostic with no implicit audience: a TokenReview that
		// names audiences is not authenticated by these tokens
		reqs = append(reqs, bearertoken.New(authenticator.WrapAudienceAgnosticToken(nil, tokenunion.New(tokens...))))
	}
	if len(reqs) == 0 {
		slog.Default().Warn("gateway: no authentication configured: every request but /version and health checks is refused")
	}
	a.req = group.NewAuthenticatedGroupAdder(union.New(reqs...))
	return a, nil
}

// Run follows the front's configuration (delegated authentication) until
// ctx ends; without one it returns at once.
func (a *Authenticator) Run(ctx context.Context) { a.delegated.run(ctx) }

func readCAFile(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: no PEM certificates", path)
	}
	return pool, nil
}

// Authenticate returns who r is from, or false (401) when no authenticator
// recognises it and its path is not public. It removes the credentials
// (the Authorization header, the front proxy headers) from r: nothing
// behind the edge needs them.
func (a *Authenticator) Authenticate(r *http.Request) (user.Info, bool) {
	resp, ok, err := a.req.AuthenticateRequest(r)
	a.clearHeaders(r.Header)
	if err == nil && ok {
		r.Header.Del("Authorization")
		return resp.User, true
	}
	if err != nil {
		slog.Default().Debug("unable to authenticate the request", "path", r.URL.Path, "err", err)
	}
	if publicPaths[r.URL.Path] {
		return Anonymous, true
	}
	return nil, false
}

// standardProxyHeaders are removed from every request, as kube-apiserver
// removes them whether or not the front proxy is configured.
var standardProxyHeaders = RequestHeaderConfig{
	UsernameHeaders:     []string{"X-Remote-User"},
	UIDHeaders:          []string{"X-Remote-Uid"},
	GroupHeaders:        []string{"X-Remote-Group"},
	ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
}

func (a *Authenticator) clearHeaders(h http.Header) {
	for _, c := range a.headers {
		headerrequest.ClearAuthenticationHeaders(h, c.user, c.uid, c.group, c.extra)
	}
}

// TokenSet holds the --token tokens as hashes, compared in constant time;
// each stands for TokenAdmin.
type TokenSet struct {
	hashes [][32]byte
}

// NewTokenSet is the set of tokens (blank ones ignored).
func NewTokenSet(tokens []string) *TokenSet {
	ts := &TokenSet{}
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			ts.hashes = append(ts.hashes, sha256.Sum256([]byte(t)))
		}
	}
	return ts
}

// Empty reports whether the set has no token.
func (ts *TokenSet) Empty() bool { return len(ts.hashes) == 0 }

// AuthenticateToken implements authenticator.Token: TokenAdmin when token
// is one of the set (every hash compared, in constant time).
func (ts *TokenSet) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	if token == "" {
		return nil, false, nil
	}
	h := sha256.Sum256([]byte(token))
	found := 0
	for i := range ts.hashes {
		found |= subtle.ConstantTimeCompare(h[:], ts.hashes[i][:])
	}
	if found == 0 {
		return nil, false, nil
	}
	return &authenticator.Response{User: TokenAdmin}, true, nil
}

// Authenticate is the authentication of an edge configured with tokens
// only (Edge.Tokens).
func (ts *TokenSet) Authenticate(r *http.Request) (user.Info, bool) {
	a := Authenticator{req: group.NewAuthenticatedGroupAdder(bearertoken.New(ts)), headers: []headerNames{staticHeaderNames(standardProxyHeaders)}}
	return a.Authenticate(r)
}

func writeUnauthorized(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, unauthorizedBody)
}

// ReadTokenFile reads the tokens of a kube-apiserver style static token
// file: one CSV record per line, "token,user,uid[,groups...]". Blank lines
// and lines starting with '#' are skipped.
func ReadTokenFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	var tokens []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("token file %s line %d: %w", path, n, err)
		}
		if len(rec) == 0 || strings.TrimSpace(rec[0]) == "" {
			return nil, fmt.Errorf("token file %s line %d: empty token", path, n)
		}
		tokens = append(tokens, strings.TrimSpace(rec[0]))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tokens, nil
}

// withUser puts u on ctx for the handlers behind the edge
// (k8s.io/apiserver's request.UserFrom), on the request's span, and in the
// metadata of the gRPC calls made with ctx (enduser).
func withUser(ctx context.Context, u user.Info) context.Context {
	eu := enduser.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
	trace.SpanFromContext(ctx).SetAttributes(enduser.SpanAttributes(eu)...)
	return enduser.NewOutgoingContext(request.WithUser(ctx, u), eu)
}

// UserFrom is the user the edge authenticated a request as.
func UserFrom(ctx context.Context) (user.Info, bool) { return request.UserFrom(ctx) }
