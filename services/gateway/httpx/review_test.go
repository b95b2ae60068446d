package httpx

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// reviewPost posts body to path as token, with accept, and answers the
// response's code, Content-Type and body.
func reviewPost(t *testing.T, s *authSetup, path, token, accept, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestSubjectAccessReviews: SubjectAccessReview and
// LocalSubjectAccessReview answer for the user, groups, uid and extra they
// name, from the configured authorizers; the request itself is
// authorized (create on the review's resource); the spec is validated with
// kube-apiserver v1.33's messages; the namespaces of a
// LocalSubjectAccessReview must agree.
func TestSubjectAccessReviews(t *testing.T) {
	reviews := make(chan authzv1.SubjectAccessReview, 32)
	kc, _ := webhookServer(t, sarReviewer(reviews))
	s := newAuthSetup(t, AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: kc})
	drain := func() {
		for {
			select {
			case <-reviews:
			default:
				return
			}
		}
	}
	const lsarPath = "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews"
	for _, tc := range []struct {
		name, path, token, body string
		code                    int
		want                    string
	}{
		{"bob is denied", accessReviewPath, "bob-token",
			`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"bob","resourceAttributes":{"namespace":"default","verb":"list","group":"stable.example.com","resource":"widgets"}}}`,
			201, `"status":{"allowed":false,"denied":true,"reason":"bob may not"}`},
		{"carol is allowed", accessReviewPath, "bob-token",
			`{"spec":{"user":"carol","groups":["g1"],"uid":"u1","extra":{"scopes":["a"]},"nonResourceAttributes":{"path":"/metrics","verb":"get"}}}`,
			201, `"status":{"allowed":true}`},
		{"eve may not review others", accessReviewPath, "wh-eve",
			`{"spec":{"user":"bob","resourceAttributes":{"verb":"get","resource":"widgets"}}}`,
			403, `"message":"subjectaccessreviews.authorization.k8s.io is forbidden: User \"eve\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"`},
		{"no subject", accessReviewPath, "bob-token",
			`{"spec":{"resourceAttributes":{"verb":"get"}}}`,
			422, `"message":".authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"`},
		{"both attributes", accessReviewPath, "bob-token",
			`{"spec":{"user":"a","resourceAttributes":{"verb":"get"},"nonResourceAttributes":{"path":"/x","verb":"get"}}}`,
			422, `spec.nonResourceAttributes: Invalid value: `},
		{"metadata", accessReviewPath, "bob-token",
			`{"metadata":{"name":"x"},"spec":{"user":"a","resourceAttributes":{"verb":"get"}}}`,
			422, `must be empty"`},
		{"empty field selector", accessReviewPath, "bob-token",
			`{"spec":{"user":"a","resourceAttributes":{"verb":"list","fieldSelector":{}}}}`,
			422, `spec.resourceAttributes.fieldSelector.requirements: Required value: when spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is required`},
		{"raw and requirements", accessReviewPath, "bob-token",
			`{"spec":{"user":"a","resourceAttributes":{"verb":"list","labelSelector":{"rawSelector":"a=b","requirements":[{"key":"a","operator":"Exists"}]}}}}`,
			422, `spec.resourceAttributes.labelSelector.rawSelector: Invalid value: \"a=b\": may not specified at the same time as requirements`},
		{"unparsable selector", accessReviewPath, "bob-token",
			`{"spec":{"user":"carol","resourceAttributes":{"verb":"list","labelSelector":{"rawSelector":"a in ("}}}}`,
			201, `"evaluationError":"spec.resourceAttributes.labelSelector ignored due to parse error"`},
		{"local review", lsarPath, "bob-token",
			`{"spec":{"user":"bob","resourceAttributes":{"namespace":"default","verb":"get","resource":"widgets"}}}`,
			201, `"metadata":{"namespace":"default"`},
		{"local review, other namespace in the object", lsarPath, "bob-token",
			`{"metadata":{"namespace":"other"},"spec":{"user":"bob","resourceAttributes":{"namespace":"other","verb":"get"}}}`,
			400, `"message":"the namespace of the provided object does not match the namespace sent on the request"`},
		{"local review, other namespace in the attributes", lsarPath, "bob-token",
			`{"spec":{"user":"bob","resourceAttributes":{"namespace":"other","verb":"get"}}}`,
			422, `spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace`},
		{"local review, non-resource", lsarPath, "bob-token",
			`{"spec":{"user":"bob","nonResourceAttributes":{"path":"/x","verb":"get"}}}`,
			422, `spec.nonResourceAttributes: Invalid value: `},
		{"eve may not review others locally", lsarPath, "wh-eve",
			`{"spec":{"user":"bob","resourceAttributes":{"namespace":"default","verb":"get"}}}`,
			403, `User \"eve\" cannot create resource \"localsubjectaccessreviews\" in API group \"authorization.k8s.io\" in the namespace \"default\"`},
	} {
		drain()
		code, _, body := reviewPost(t, s, tc.path, tc.token, "application/json", tc.body)
		if code != tc.code || !bytes.Contains(body, []byte(tc.want)) {
			t.Errorf("%s: %d %s\nwant %d %s", tc.name, code, body, tc.code, tc.want)
		}
	}

	// The review's subject is what the webhook is asked about.
	drain()
	code, _, body := reviewPost(t, s, accessReviewPath, "bob-token", "", `{"spec":{"user":"carol","groups":["g1"],"uid":"u1","extra":{"scopes":["a"]},"resourceAttributes":{"namespace":"ns","verb":"get","group":"stable.example.com","resource":"widgets","name":"w"}}}`)
	if code != 201 {
		t.Fatalf("%d %s", code, body)
	}
	var asked *authzv1.SubjectAccessReview
	for len(reviews) > 0 {
		r := <-reviews
		if r.Spec.User == "carol" {
			asked = &r
		}
	}
	if asked == nil || asked.Spec.UID != "u1" || len(asked.Spec.Groups) != 1 || asked.Spec.Groups[0] != "g1" ||
		len(asked.Spec.Extra["scopes"]) != 1 || asked.Spec.ResourceAttributes.Name != "w" || asked.Spec.ResourceAttributes.Namespace != "ns" {
		t.Errorf("the webhook was asked %+v", asked)
	}

	// protobuf and YAML answers, as negotiated
	code, ct, body := reviewPost(t, s, accessReviewPath, "bob-token", "application/vnd.kubernetes.protobuf, application/json",
		`{"spec":{"user":"bob","resourceAttributes":{"verb":"get","resource":"widgets"}}}`)
	if code != 201 || ct != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("protobuf: %d %s", code, ct)
	}
	var got authzv1.SubjectAccessReview
	if _, _, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, &got); err != nil || !got.Status.Denied || got.Status.Reason != "bob may not" {
		t.Errorf("protobuf answer %+v: %v", got, err)
	}
	code, ct, body = reviewPost(t, s, accessReviewPath, "bob-token", "application/yaml",
		`{"spec":{"user":"bob","resourceAttributes":{"verb":"get","resource":"widgets"}}}`)
	if code != 201 || ct != "application/yaml" || !bytes.Contains(body, []byte("kind: SubjectAccessReview")) || !bytes.Contains(body, []byte("denied: true")) {
		t.Errorf("yaml: %d %s %s", code, ct, body)
	}
	// A protobuf request body decodes too (client-go's typed client).
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: "carol", ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Resource: "widgets"}}}
	info, _ := runtime.SerializerInfoForMediaType(reviewCodecs.SupportedMediaTypes(), "application/vnd.kubernetes.protobuf")
	var pb bytes.Buffer
	if err := reviewCodecs.EncoderForVersion(info.Serializer, authzv1.SchemeGroupVersion).Encode(sar, &pb); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.srv.URL+accessReviewPath, &pb)
	req.Header.Set("Authorization", "Bearer bob-token")
	req.Header.Set("Content-Type", "application/vnd.kubernetes.protobuf")
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 201 || !bytes.Contains(b, []byte(`"allowed":true`)) {
		t.Errorf("protobuf request: %d %s", resp.StatusCode, b)
	}
	// only POST
	req, _ = http.NewRequest("GET", s.srv.URL+accessReviewPath, nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err = s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
}

// TestImpersonation: the Impersonate-* headers make the request the
// impersonated user's when the requester may impersonate (verb
// impersonate on users, groups, uids, userextras), with k8s.io/apiserver's
// filter; otherwise 403 and the request goes no further.
func TestImpersonation(t *testing.T) {
	reviews := make(chan authzv1.SubjectAccessReview, 32)
	kc, _ := webhookServer(t, sarReviewer(reviews))
	s := newAuthSetup(t, AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: kc})
	code, body := s.do(t, nil, "/apis/g/v1/things", "admin-token", map[string]string{
		"Impersonate-User": "alice", "Impersonate-Group": "dev", "Impersonate-Uid": "a-1", "Impersonate-Extra-Scopes": "x",
	})
	var w who
	if code != 200 || json.Unmarshal([]byte(body), &w) != nil || w.Name != "alice" || w.UID != "a-1" ||
		strings.Join(w.Groups, ",") != "dev,system:authenticated" || len(w.Extra["scopes"]) != 1 {
		t.Errorf("admin as alice: %d %s", code, body)
	}
	// The impersonated user is authorized: alice may do it (the webhook
	// allows everyone but bob and eve)...
	code, body = s.do(t, nil, "/apis/g/v1/things", "wh-carol", map[string]string{"Impersonate-User": "bob"})
	if code != 403 || !strings.Contains(body, `User \"bob\" cannot list resource \"things\"`) {
		t.Errorf("carol as bob: %d %s", code, body)
	}
	// ... and bob may not impersonate.
	code, body = s.do(t, nil, "/apis/g/v1/things", "bob-token", map[string]string{"Impersonate-User": "alice"})
	if code != 403 || !strings.Contains(body, `"message":"users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope: bob may not"`) {
		t.Errorf("bob as alice: %d %s", code, body)
	}
	// A group without a user is refused as v1.33 refuses it: a plain-text
	// 500 (the conformance oracle compares it too).
	code, body = s.do(t, nil, "/apis/g/v1/things", "admin-token", map[string]string{"Impersonate-Group": "dev"})
	if code != 500 || body != `Internal Server Error: "/apis/g/v1/things": requested [{Group  dev    }] without impersonating a user`+"\n" {
		t.Errorf("group only: %d %q", code, body)
	}
}

// TestSelfSubjectReview: kubectl auth whoami's review is answered with
// the request's user (whatever the body held), 201, in the negotiated
// encoding; other verbs are 405 and a body that is no review 400, with
// kube-apiserver's Status.
func TestSelfSubjectReview(t *testing.T) {
	kc, _ := webhookServer(t, sarReviewer(make(chan authzv1.SubjectAccessReview, 32)))
	s := newAuthSetup(t, AuthzConfig{Modes: []string{ModeWebhook}, WebhookConfigFile: kc})
	before := time.Now().Add(-time.Second)
	code, ct, body := reviewPost(t, s, selfSubjectReviewPath, "bob-token", "application/json",
		`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview","status":{"userInfo":{"username":"mallory"}}}`)
	if code != 201 || ct != "application/json" {
		t.Fatalf("%d %s %s", code, ct, body)
	}
	var got authnv1.SelfSubjectReview
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	stamp := got.CreationTimestamp.Time
	got.CreationTimestamp = metav1.Time{}
	want := authnv1.SelfSubjectReview{TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectReview", APIVersion: "authentication.k8s.io/v1"},
		Status: authnv1.SelfSubjectReviewStatus{UserInfo: authnv1.UserInfo{Username: "bob", UID: "42", Groups: []string{"devs", "qa", "system:authenticated"}}}}
	if !reflect.DeepEqual(got, want) || stamp.Before(before) {
		t.Errorf("review = %+v at %v\nwant %+v", got, stamp, want)
	}
	if !bytes.Contains(body, []byte(`"status":{"userInfo":{"username":"bob","uid":"42","groups":["devs","qa","system:authenticated"]}}`)) {
		t.Errorf("body %s", body)
	}

	// protobuf, as kubectl asks of built-in kinds
	code, ct, body = reviewPost(t, s, selfSubjectReviewPath, "wh-carol", "application/vnd.kubernetes.protobuf, application/json", `{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1"}`)
	var pb authnv1.SelfSubjectReview
	if _, _, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, &pb); code != 201 || ct != "application/vnd.kubernetes.protobuf" || err != nil || pb.Status.UserInfo.Username != "carol" {
		t.Errorf("protobuf: %d %s %+v %v", code, ct, pb, err)
	}

	code, _, body = reviewPost(t, s, selfSubjectReviewPath, "bob-token", "application/json", `{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1"}`)
	if code != 400 {
		t.Errorf("a TokenReview's body: %d %s", code, body)
	}
	if code, body := s.do(t, nil, selfSubjectReviewPath, "bob-token", nil); code != 405 ||
		body != `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"list is not supported on resources of kind \"selfsubjectreviews.authentication.k8s.io\"","reason":"MethodNotAllowed","details":{"group":"authentication.k8s.io","kind":"selfsubjectreviews"},"code":405}`+"\n" {
		t.Errorf("GET: %d %s", code, body)
	}
}
