package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/api*", "/version", "/openapi*"]
- level: RequestResponse
  resources: [{group: stable.example.com, resources: ["crontabs"]}]
- level: Request
  resources: [{group: authorization.k8s.io}]
- level: Metadata
`

const sarYAML = `apiVersion: authorization.k8s.io/v1
kind: SubjectAccessReview
spec:
  user: bob
  groups: ["devs"]
  resourceAttributes:
    namespace: default
    verb: list
    group: stable.example.com
    resource: crontabs
`

// TestAuditLog runs `crdplane run` with an audit policy and log file and a
// SubjectAccessReview webhook authorizer that denies bob the crontabs; it
// drives it with kubectl 1.33 (create, a denied list, impersonation with
// --as, auth can-i --as, a SubjectAccessReview from a file with -o yaml)
// and client-go's typed authorization client in protobuf
// (SubjectAccessReview, LocalSubjectAccessReview), then reads the log: one
// JSON audit.k8s.io/v1 Event per line, with the policy's levels and
// stages, objectRefs, the request and response objects at
// RequestResponse, the authorization decision annotations and the
// impersonated user.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sars := webhook(t, write, "authz.kubeconfig", func(w http.ResponseWriter, r *http.Request) {
		var sar authzv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		ra := sar.Spec.ResourceAttributes
		if sar.Spec.User == "bob" && ra != nil && ra.Resource == "crontabs" {
			sar.Status = authzv1.SubjectAccessReviewStatus{Denied: true, Reason: "bob may not touch crontabs"}
		} else {
			sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: true}
		}
		_ = json.NewEncoder(w).Encode(sar)
	})
	logPath := filepath.Join(dir, "audit.log")
	s := startServer(t, "",
		"--token-file", write("tokens.csv", []byte("bob-token,bob,1001,\"devs\"\n")),
		"--authorization-mode", "Webhook",
		"--authorization-webhook-config-file", sars,
		"--audit-policy-file", write("policy.yaml", []byte(auditPolicy)),
		"--audit-log-path", logPath,
		"--audit-log-maxsize", "10")

	s.must(t, "apply", "-f", testdata("crontab-crd.yaml"))
	s.must(t, "wait", "--for", "condition=established", "--timeout=30s", "crd/crontabs.stable.example.com")
	s.must(t, "create", "-f", testdata("crontab-valid.yaml"))
	bob := s.as(t, "bob", &clientcmdapi.AuthInfo{Token: "bob-token"})
	if errOut := bob.fails(t, "get", "crontabs"); !strings.Contains(errOut, `User "bob" cannot list resource "crontabs"`) {
		t.Errorf("bob: %s", errOut)
	}
	// The admin as bob: impersonation, then bob's authorization.
	if errOut := s.fails(t, "get", "crontabs", "--as=bob", "--as-group=devs"); !strings.Contains(errOut, `Error from server (Forbidden): crontabs.stable.example.com is forbidden: User "bob" cannot list resource "crontabs" in API group "stable.example.com" in the namespace "default": bob may not touch crontabs`) {
		t.Errorf("admin as bob: %s", errOut)
	}
	if out, _, err := s.kubectl(t, "", "auth", "can-i", "list", "crontabs.stable.example.com", "--as=bob"); err == nil || strings.TrimSpace(out) != "no - bob may not touch crontabs" {
		t.Errorf("can-i as bob: %q %v", out, err)
	}
	// A SubjectAccessReview from a file.
	out := s.mustIn(t, sarYAML, "create", "-f", "-", "-o", "yaml")
	wantLines(t, out, `^kind: SubjectAccessReview$`, `^  denied: true$`, `^  reason: bob may not touch crontabs$`, `^  user: bob$`)

	// client-go's typed client, protobuf both ways.
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	authz := authorizationv1client.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sar, err := authz.SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "carol", ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "default", Verb: "delete", Group: "stable.example.com", Resource: "crontabs"},
	}}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed {
		t.Errorf("SubjectAccessReview for carol: %+v %v", sar, err)
	}
	lsar, err := authz.LocalSubjectAccessReviews("default").Create(ctx, &authzv1.LocalSubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "bob", ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "default", Verb: "get", Group: "stable.example.com", Resource: "crontabs"},
	}}, metav1.CreateOptions{})
	if err != nil || lsar.Status.Allowed || !lsar.Status.Denied || lsar.Namespace != "default" {
		t.Errorf("LocalSubjectAccessReview for bob: %+v %v", lsar, err)
	}
	_, err = authz.LocalSubjectAccessReviews("default").Create(ctx, &authzv1.LocalSubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "bob", ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "other", Verb: "get", Resource: "crontabs"},
	}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `spec.resourceAttributes.namespace: Invalid value: "other": must match metadata.namespace`) {
		t.Errorf("LocalSubjectAccessReview in another namespace: %v", err)
	}

	// The log (blocking mode: written before each response completes).
	events := readAuditLog(t, logPath)
	find := func(what string, ok func(e auditv1.Event) bool) auditv1.Event {
		t.Helper()
		for _, e := range events {
			if ok(e) {
				return e
			}
		}
		t.Fatalf("no event for %s in %d events", what, len(events))
		return auditv1.Event{}
	}
	for _, e := range events {
		if e.Stage == auditv1.StageRequestReceived {
			t.Errorf("RequestReceived is omitted by the policy: %+v", e)
		}
		if e.ObjectRef == nil && strings.HasPrefix(e.RequestURI, "/api") {
			t.Errorf("discovery is level None: %s", e.RequestURI)
		}
	}
	create := find("the crontab create", func(e auditv1.Event) bool {
		return e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Resource == "crontabs"
	})
	if create.Level != auditv1.LevelRequestResponse || create.Stage != auditv1.StageResponseComplete || create.ObjectRef.Name != "my-new-cron-object" ||
		create.ObjectRef.Namespace != "default" || create.ObjectRef.APIGroup != "stable.example.com" || create.ResponseStatus == nil || create.ResponseStatus.Code != 201 ||
		create.RequestObject == nil || create.ResponseObject == nil || !strings.Contains(string(create.ResponseObject.Raw), `"uid"`) ||
		create.Annotations["authorization.k8s.io/decision"] != "allow" || !strings.HasPrefix(create.UserAgent, "kubectl") {
		t.Errorf("create event %+v", create)
	}
	denied := find("bob's list", func(e auditv1.Event) bool {
		return e.User.Username == "bob" && e.Verb == "list" && e.ImpersonatedUser == nil
	})
	if denied.Annotations["authorization.k8s.io/decision"] != "forbid" || denied.Annotations["authorization.k8s.io/reason"] != "bob may not touch crontabs" ||
		denied.ResponseStatus == nil || denied.ResponseStatus.Code != 403 || denied.ResponseStatus.Reason != "Forbidden" {
		t.Errorf("denied event %+v", denied)
	}
	imp := find("the admin as bob", func(e auditv1.Event) bool {
		return e.ImpersonatedUser != nil && e.Verb == "list"
	})
	if imp.User.Username != "admin" || imp.ImpersonatedUser.Username != "bob" || !strings.Contains(strings.Join(imp.ImpersonatedUser.Groups, ","), "devs") ||
		imp.Annotations["authorization.k8s.io/decision"] != "forbid" {
		t.Errorf("impersonation event %+v", imp)
	}
	review := find("the SubjectAccessReview from kubectl", func(e auditv1.Event) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "subjectaccessreviews" && strings.HasPrefix(e.UserAgent, "kubectl")
	})
	if review.Level != auditv1.LevelRequest || review.RequestObject == nil || !strings.Contains(string(review.RequestObject.Raw), `"user":"bob"`) || review.ResponseObject != nil {
		t.Errorf("SubjectAccessReview event %+v", review)
	}
	local := find("the LocalSubjectAccessReview in protobuf", func(e auditv1.Event) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "localsubjectaccessreviews" && e.ResponseStatus != nil && e.ResponseStatus.Code == 201
	})
	if local.ObjectRef.Namespace != "default" || local.RequestObject == nil || !strings.Contains(string(local.RequestObject.Raw), `"user":"bob"`) {
		t.Errorf("LocalSubjectAccessReview event %+v", local)
	}
	invalid := find("the invalid LocalSubjectAccessReview", func(e auditv1.Event) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "localsubjectaccessreviews" && e.ResponseStatus != nil && e.ResponseStatus.Code == 422
	})
	if invalid.ResponseStatus.Reason != "Invalid" || !strings.Contains(invalid.ResponseStatus.Message, "must match metadata.namespace") {
		t.Errorf("invalid review event %+v", invalid.ResponseStatus)
	}
	crd := find("the CRD apply", func(e auditv1.Event) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "customresourcedefinitions" && e.Verb != "watch" && e.Verb != "get"
	})
	if crd.Level != auditv1.LevelMetadata || crd.RequestObject != nil || crd.ResponseObject != nil {
		t.Errorf("CRD event %+v", crd)
	}
}

// readAuditLog parses the JSON lines of an audit log.
func readAuditLog(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var events []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not an audit event: %v: %s", err, sc.Text())
		}
		if e.APIVersion != "audit.k8s.io/v1" || e.Kind != "Event" {
			t.Fatalf("not an audit.k8s.io/v1 Event: %s", sc.Text())
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}
