package httpx

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
)

// TestDelegatedAuthorization: with --authorization-kubeconfig, mode
// Webhook sends its SubjectAccessReviews to the front kube-apiserver's
// authorization.k8s.io/v1 endpoint (client-go's path, not the
// kubeconfig's URL as a webhook), and answers with its decision and
// reason; --authorization-always-allow-paths are allowed without asking.
func TestDelegatedAuthorization(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	reviews := make(chan authzv1.SubjectAccessReview, 16)
	sar := sarReviewer(reviews)
	kc, calls := webhookServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		sar(w, r)
	})
	s := newAuthSetup(t, AuthzConfig{Modes: []string{ModeWebhook}, Kubeconfig: kc, AlwaysAllowPaths: []string{"/healthz", "/debug/*"}})
	const widgets = "/apis/stable.example.com/v1/namespaces/default/widgets"
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets.stable.example.com is forbidden: User \"bob\" cannot list resource \"widgets\" in API group \"stable.example.com\" in the namespace \"default\": bob may not","reason":"Forbidden","details":{"group":"stable.example.com","kind":"widgets"},"code":403}` + "\n"
	if code, body := s.do(t, nil, widgets, "bob-token", nil); code != 403 || body != want {
		t.Errorf("bob: %d %s", code, body)
	}
	if code, body := s.do(t, nil, widgets, "wh-carol", nil); code != 200 {
		t.Errorf("carol: %d %s", code, body)
	}
	n := calls.Load()
	for _, p := range []string{"/debug/pprof/x", "/healthz"} {
		s.do(t, nil, p, "bob-token", nil)
	}
	if calls.Load() != n {
		t.Errorf("an always-allowed path asked the front")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 2 || paths[0] != "POST /apis/authorization.k8s.io/v1/subjectaccessreviews" || paths[1] != paths[0] {
		t.Errorf("requests to the front: %v", paths)
	}
}

// TestDelegatedAuthorizationConfig: the webhook file and the front's
// kubeconfig exclude each other; the kubeconfig needs mode Webhook.
func TestDelegatedAuthorizationConfig(t *testing.T) {
	kc, _ := webhookServer(t, sarReviewer(make(chan authzv1.SubjectAccessReview, 1)))
	for _, tc := range []struct {
		cfg  AuthzConfig
		want string
	}{
		{AuthzConfig{Modes: []string{ModeWebhook}, Kubeconfig: kc, WebhookConfigFile: kc}, "not both"},
		{AuthzConfig{Modes: []string{ModeRBAC}, RBAC: allowAll, Kubeconfig: kc}, "--authorization-kubeconfig is given without --authorization-mode Webhook"},
		{AuthzConfig{Modes: []string{ModeWebhook}}, "needs --authorization-webhook-config-file or --authorization-kubeconfig"},
	} {
		if _, err := NewAuthorizer(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	// The always-allowed paths are no mode (the startup line, HasMode).
	az, err := NewAuthorizer(AuthzConfig{Modes: []string{ModeWebhook}, Kubeconfig: kc, AlwaysAllowPaths: []string{"/healthz"}})
	if err != nil {
		t.Fatal(err)
	}
	if m := az.Modes(); len(m) != 1 || m[0] != ModeWebhook || !az.HasMode(ModeWebhook) {
		t.Errorf("modes %v", m)
	}
}
