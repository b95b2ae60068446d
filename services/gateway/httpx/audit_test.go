package httpx

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: RequestResponse
  resources: [{group: "stable.example.com", resources: ["widgets"]}]
- level: Request
  verbs: ["create", "patch"]
  resources: [{group: "apiextensions.k8s.io"}]
- level: Metadata
`

// auditEdge is an edge with the token users admin (system:masters) and
// bob (AlwaysDeny for everyone else), auditing with policy into a file.
func auditEdge(t *testing.T, policy string, next http.Handler) (*httptest.Server, string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "audit.log")
	auditor, err := NewAuditor(AuditConfig{PolicyFile: writeFile(t, dir, "policy.yaml", []byte(policy)), LogPath: logPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := auditor.Run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(auditor.Shutdown)
	a, err := NewAuthenticator(t.Context(), AuthConfig{Tokens: []string{"admin-token"}, TokenFile: writeFile(t, dir, "tokens.csv", []byte("bob-token,bob,42,\"devs\"\n"))})
	if err != nil {
		t.Fatal(err)
	}
	az, err := NewAuthorizer(AuthzConfig{Modes: []string{ModeAlwaysDeny}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&Edge{Auth: a, Authz: az, Audit: auditor, MaxBody: 1 << 20, Next: next})
	t.Cleanup(srv.Close)
	return srv, logPath
}

// auditBackend answers as the service behind the edge would: the created
// object, a 404 Status, a watch event.
func auditBackend() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/watch/"):
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"Widget"}}`+"\n")
			w.(http.Flusher).Flush()
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/widgets"):
			_, _ = io.WriteString(w, `{"apiVersion":"stable.example.com/v1","kind":"WidgetList","metadata":{"resourceVersion":"9"},"items":[{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w1"}}]}`)
		case r.Method == http.MethodPost || r.Method == http.MethodPatch:
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(201)
			_, _ = w.Write(bytes.Replace(body, []byte(`"metadata":{`), []byte(`"metadata":{"uid":"u-1","resourceVersion":"7",`), 1))
		default:
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"widgets \"nope\" not found","reason":"NotFound","details":{"name":"nope","group":"stable.example.com","kind":"widgets"},"code":404}`+"\n")
		}
	})
}

// readEvents reads the log until it holds n events (or fails after 5s).
func readEvents(t *testing.T, path string, n int) []auditv1.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var events []auditv1.Event
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var ev auditv1.Event
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Fatalf("not an audit.k8s.io/v1 Event: %v: %s", err, sc.Text())
				}
				events = append(events, ev)
			}
			_ = f.Close()
		}
		if len(events) >= n || time.Now().After(deadline) {
			if len(events) != n {
				t.Fatalf("%d events, want %d: %+v", len(events), n, events)
			}
			return events
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func send(t *testing.T, srv *httptest.Server, method, path, token, contentType, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", "audit-test/1.0")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}

// TestAudit: the policy's levels, stages and omitStages; the event's
// user, impersonated user, source IPs, user agent, objectRef,
// responseStatus, request and response objects by level, the
// authorization annotations; the Audit-ID header; failed authentication
// audited; watches with a ResponseStarted stage.
func TestAudit(t *testing.T) {
	srv, logPath := auditEdge(t, testPolicy, auditBackend())
	const widgets = "/apis/stable.example.com/v1/namespaces/default/widgets"

	create := send(t, srv, "POST", widgets, "admin-token", "application/json", `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}`, nil)
	get := send(t, srv, "GET", widgets+"/nope", "admin-token", "", "", map[string]string{"Audit-ID": "my-audit-id"})
	forbidden := send(t, srv, "GET", widgets, "bob-token", "", "", nil)
	send(t, srv, "GET", "/healthz", "", "", "", nil) // level None
	unauthorized := send(t, srv, "GET", widgets, "wrong-token", "", "", nil)
	send(t, srv, "GET", widgets+"?watch=1", "admin-token", "", "", nil)
	send(t, srv, "GET", widgets+"/nope", "admin-token", "", "", map[string]string{"Impersonate-User": "alice", "Impersonate-Group": "dev"})
	send(t, srv, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "admin-token", "application/yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.stable.example.com\n", nil)
	send(t, srv, "PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.stable.example.com", "admin-token", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`, nil)
	send(t, srv, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "admin-token", "", "", nil)
	send(t, srv, "GET", widgets, "admin-token", "", "", nil)

	if create.Header.Get("Audit-ID") == "" || get.Header.Get("Audit-ID") != "my-audit-id" || unauthorized.Header.Get("Audit-ID") == "" {
		t.Errorf("Audit-ID headers: %q %q %q", create.Header.Get("Audit-ID"), get.Header.Get("Audit-ID"), unauthorized.Header.Get("Audit-ID"))
	}
	if forbidden.StatusCode != 403 || unauthorized.StatusCode != 401 {
		t.Fatalf("codes %d %d", forbidden.StatusCode, unauthorized.StatusCode)
	}
	events := readEvents(t, logPath, 11)
	ev := func(i int) auditv1.Event { return events[i] }
	stageOf := func(i int) string { return string(ev(i).Stage) }

	// 0: the create, RequestResponse
	e := ev(0)
	if e.Level != auditv1.LevelRequestResponse || e.Stage != auditv1.StageResponseComplete || e.Verb != "create" ||
		e.User.Username != "admin" || e.UserAgent != "audit-test/1.0" || len(e.SourceIPs) != 1 || e.SourceIPs[0] != "127.0.0.1" ||
		string(e.AuditID) != create.Header.Get("Audit-ID") || e.RequestURI != widgets {
		t.Errorf("create event %+v", e)
	}
	if r := e.ObjectRef; r == nil || r.Resource != "widgets" || r.Namespace != "default" || r.Name != "w1" || r.APIGroup != "stable.example.com" || r.APIVersion != "v1" {
		t.Errorf("create objectRef %+v", e.ObjectRef)
	}
	if e.RequestObject == nil || !strings.Contains(string(e.RequestObject.Raw), `"size":3`) ||
		e.ResponseObject == nil || !strings.Contains(string(e.ResponseObject.Raw), `"uid":"u-1"`) || e.ResponseStatus == nil || e.ResponseStatus.Code != 201 {
		t.Errorf("create objects: %v / %v / %+v", e.RequestObject, e.ResponseObject, e.ResponseStatus)
	}
	if e.Annotations["authorization.k8s.io/decision"] != "allow" {
		t.Errorf("create annotations %v", e.Annotations)
	}
	// 1: the 404, with the client's audit ID and the Status in responseStatus
	e = ev(1)
	if e.AuditID != "my-audit-id" || e.ResponseStatus == nil || e.ResponseStatus.Code != 404 || e.ResponseStatus.Reason != "NotFound" ||
		!strings.Contains(e.ResponseStatus.Message, "not found") || e.ObjectRef == nil || e.ObjectRef.Name != "nope" || e.Verb != "get" {
		t.Errorf("404 event %+v %+v", e, e.ResponseStatus)
	}
	// 2: bob forbidden
	e = ev(2)
	if e.User.Username != "bob" || e.ResponseStatus == nil || e.ResponseStatus.Code != 403 || e.ResponseStatus.Reason != "Forbidden" ||
		e.Annotations["authorization.k8s.io/decision"] != "forbid" || e.Verb != "list" {
		t.Errorf("forbidden event %+v %+v", e, e.ResponseStatus)
	}
	// 3: the unauthenticated request, Metadata, at ResponseStarted, no user
	e = ev(3)
	if e.Level != auditv1.LevelRequestResponse || stageOf(3) != "ResponseStarted" || e.ResponseStatus == nil || e.ResponseStatus.Code != 401 ||
		e.ResponseStatus.Message != "Authentication failed, attempted: bearer" || e.User.Username != "" {
		t.Errorf("401 event %+v %+v", e, e.ResponseStatus)
	}
	// 4, 5: the watch, at ResponseStarted then ResponseComplete
	if ev(4).Verb != "watch" || stageOf(4) != "ResponseStarted" || stageOf(5) != "ResponseComplete" || ev(4).AuditID != ev(5).AuditID {
		t.Errorf("watch events %+v %+v", ev(4), ev(5))
	}
	// 6: impersonation
	e = ev(6)
	if e.User.Username != "admin" || e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != "alice" ||
		strings.Join(e.ImpersonatedUser.Groups, ",") != "dev,system:authenticated" {
		t.Errorf("impersonation event user %+v impersonated %+v", e.User, e.ImpersonatedUser)
	}
	// 7: a CRD create at Request: the request object (YAML sent, JSON
	// logged), no response object
	e = ev(7)
	if e.Level != auditv1.LevelRequest || e.RequestObject == nil || !strings.Contains(string(e.RequestObject.Raw), `"name":"widgets.stable.example.com"`) ||
		e.ResponseObject != nil || e.ObjectRef == nil || e.ObjectRef.Name != "widgets.stable.example.com" {
		t.Errorf("CRD create event %+v", e)
	}
	// 8: a patch: the patch as sent
	e = ev(8)
	if e.Level != auditv1.LevelRequest || e.RequestObject == nil || string(e.RequestObject.Raw) != `{"metadata":{"labels":{"a":"b"}}}` {
		t.Errorf("patch event %+v", e)
	}
	// 9: a CRD list at Metadata: no objects
	e = ev(9)
	if e.Level != auditv1.LevelMetadata || e.RequestObject != nil || e.ResponseObject != nil || e.Verb != "list" {
		t.Errorf("list event %+v", e)
	}
	// 10: a list at RequestResponse: the list is the response object
	e = ev(10)
	if e.Level != auditv1.LevelRequestResponse || e.ResponseObject == nil || !strings.Contains(string(e.ResponseObject.Raw), `"kind":"WidgetList"`) ||
		!strings.Contains(string(e.ResponseObject.Raw), `"name":"w1"`) {
		t.Errorf("widget list event %+v", e)
	}
}

// TestAuditWebhook: events posted to the audit webhook as an
// audit.k8s.io/v1 EventList (blocking mode: before the response ends).
func TestAuditWebhook(t *testing.T) {
	lists := make(chan auditv1.EventList, 8)
	kc, _ := webhookServer(t, func(w http.ResponseWriter, r *http.Request) {
		var l auditv1.EventList
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil || l.Kind != "EventList" || l.APIVersion != "audit.k8s.io/v1" {
			http.Error(w, "bad event list", 400)
			return
		}
		lists <- l
	})
	dir := t.TempDir()
	auditor, err := NewAuditor(AuditConfig{PolicyFile: writeFile(t, dir, "p.yaml", []byte(testPolicy)), WebhookConfigFile: kc, WebhookMode: AuditModeBlocking})
	if err != nil {
		t.Fatal(err)
	}
	if err := auditor.Run(); err != nil {
		t.Fatal(err)
	}
	defer auditor.Shutdown()
	srv := httptest.NewServer(&Edge{Tokens: NewTokenSet([]string{"admin-token"}), Audit: auditor, MaxBody: 1 << 20, Next: auditBackend()})
	defer srv.Close()
	resp := send(t, srv, "GET", "/apis/stable.example.com/v1/namespaces/default/widgets/nope", "admin-token", "", "", nil)
	select {
	case l := <-lists:
		if len(l.Items) != 1 || string(l.Items[0].AuditID) != resp.Header.Get("Audit-ID") || l.Items[0].Stage != auditv1.StageResponseComplete ||
			l.Items[0].ResponseStatus == nil || l.Items[0].ResponseStatus.Code != 404 {
			t.Errorf("webhook got %+v", l.Items)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event list reached the webhook")
	}
}

// TestAuditConfigValidate: kube-apiserver's flag checks.
func TestAuditConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  AuditConfig
		want string
	}{
		{AuditConfig{LogMode: "sometimes"}, `invalid audit log mode sometimes, allowed modes are "batch,blocking,blocking-strict"`},
		{AuditConfig{LogFormat: "xml"}, `invalid audit log format xml, allowed formats are "legacy,json"`},
		{AuditConfig{LogMaxAge: -1}, `--audit-log-maxage -1 can't be a negative number`},
		{AuditConfig{}, ""},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := NewAuditor(AuditConfig{PolicyFile: "/nonexistent/policy.yaml", LogPath: "-"}); err == nil || !strings.Contains(err.Error(), "--audit-policy-file") {
		t.Errorf("a missing policy file: %v", err)
	}
}
