package gateway

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestUpdatePreconditionOrder: upstream checks a PUT's metadata.uid (a
// precondition) against the stored object before anything else (409 with
// its etcd3 store's StorageError, a missing object included), then that
// the object exists, then its resourceVersion: one that is not a uint64 is
// a plain 500 with strconv's error, none is 422, another one 409.
func TestUpdatePreconditionOrder(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	created := g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"color": "red"}))
	uid, rv := str(meta(created)["uid"]), str(meta(created)["resourceVersion"])
	const other = "44444444-4444-4444-4444-444444444444"
	key := "/registry/apiextensions.kubernetes.io/stable.example.com/crontabs/default/"
	uidConflict := func(name, have string) string {
		return fmt.Sprintf(`Operation cannot be fulfilled on crontabs.stable.example.com %q: StorageError: invalid object, Code: 4, Key: %s%s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID in object meta: %s`,
			name, key, name, other, have)
	}
	const stale = `Operation cannot be fulfilled on crontabs.stable.example.com "a": the object has been modified; please apply your changes to the latest version and try again`
	for _, tc := range []struct {
		name        string
		object      string
		uid, rv     string
		code        int
		reason, msg string // reason "": a plain error
		contains    bool   // the message contains msg
	}{
		{name: "other uid, no resourceVersion", object: "a", uid: other, code: 409, reason: "Conflict", msg: uidConflict("a", uid)},
		{name: "other uid, stale resourceVersion", object: "a", uid: other, rv: "1", code: 409, reason: "Conflict", msg: uidConflict("a", uid)},
		{name: "other uid, bad resourceVersion", object: "a", uid: other, rv: "abc", code: 409, reason: "Conflict", msg: uidConflict("a", uid)},
		{name: "other uid, missing object", object: "ghost", uid: other, rv: "abc", code: 409, reason: "Conflict", msg: uidConflict("ghost", "")},
		{name: "bad resourceVersion, missing object", object: "ghost", rv: "abc", code: 404, reason: "NotFound", msg: `crontabs.stable.example.com "ghost" not found`},
		{name: "bad resourceVersion", object: "a", rv: "abc", code: 500, msg: `strconv.ParseUint: parsing "abc": invalid syntax`},
		{name: "negative resourceVersion", object: "a", uid: uid, rv: "-5", code: 500, msg: `strconv.ParseUint: parsing "-5": invalid syntax`},
		{name: "same uid, no resourceVersion", object: "a", uid: uid, code: 422, reason: "Invalid",
			msg: `must be specified for an update`, contains: true},
		{name: "same uid, stale resourceVersion", object: "a", uid: uid, rv: "1", code: 409, reason: "Conflict", msg: stale},
		{name: "no uid, current resourceVersion", object: "a", rv: rv, code: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := cronTab(tc.object, map[string]any{"color": "blue"})
			if tc.uid != "" {
				meta(obj)["uid"] = tc.uid
			}
			if tc.rv != "" {
				meta(obj)["resourceVersion"] = tc.rv
			}
			got := g.expect(tc.code, "PUT", crontabs+"/"+tc.object, obj)
			if tc.code == http.StatusOK {
				return
			}
			msg := str(got["message"])
			if tc.contains && strings.Contains(msg, tc.msg) {
				msg = tc.msg
			}
			if got["reason"] != nil && got["reason"] != tc.reason || got["reason"] == nil && tc.reason != "" || msg != tc.msg {
				t.Fatalf("got %v %q; want %q %q", got["reason"], got["message"], tc.reason, tc.msg)
			}
		})
	}
}

// TestUpdateMetadataCausesRepeated: upstream validates an update's metadata
// twice (rest.BeforeUpdate's common fields, then the custom resource
// strategy), so each metadata error is listed twice (three times for what
// ValidateObjectMetaAccessor checks as well, as labels); the message names
// it once. A create lists it once.
func TestUpdateMetadataCausesRepeated(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	obj := cronTab("held", map[string]any{})
	meta(obj)["finalizers"] = []string{"example.com/hold"}
	g.expect(http.StatusCreated, "POST", crontabs, obj)
	g.expect(http.StatusOK, "DELETE", crontabs+"/held", nil)
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            any
		object, field                   string
		times                           int
	}{
		{name: "new finalizer on an object being deleted", method: "PATCH", path: crontabs + "/held",
			contentType: "application/json-patch+json", body: `[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/another"}]`,
			object: "held", field: "metadata.finalizers", times: 2},
		{name: "uid changed", method: "PATCH", path: crontabs + "/held",
			contentType: "application/merge-patch+json", body: `{"metadata":{"uid":"44444444-4444-4444-4444-444444444444"}}`,
			object: "held", field: "metadata.uid", times: 2},
		{name: "bad label key on update", method: "PATCH", path: crontabs + "/held",
			contentType: "application/merge-patch+json", body: `{"metadata":{"labels":{"a b":"x"}}}`,
			object: "held", field: "metadata.labels", times: 3},
		{name: "bad label key on create", method: "POST", path: crontabs, contentType: "application/json",
			body:   map[string]any{"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": map[string]any{"name": "new", "labels": map[string]any{"a b": "x"}}},
			object: "new", field: "metadata.labels", times: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := g.expect(http.StatusUnprocessableEntity, tc.method, tc.path, tc.body, "Content-Type", tc.contentType)
			details, _ := got["details"].(map[string]any)
			causes, _ := details["causes"].([]any)
			if len(causes) != tc.times {
				t.Fatalf("%d causes; want %d: %v", len(causes), tc.times, causes)
			}
			first, _ := causes[0].(map[string]any)
			for _, c := range causes {
				if !reflect.DeepEqual(c, first) || first["field"] != tc.field {
					t.Fatalf("causes %v; want %d× one %s cause", causes, tc.times, tc.field)
				}
			}
			msg := fmt.Sprintf("CronTab.stable.example.com %q is invalid: %s: %s", tc.object, tc.field, first["message"])
			if got["message"] != msg {
				t.Fatalf("message %q; want %q", got["message"], msg)
			}
		})
	}
}

// TestConcurrentPatchesRetry: merge patches of one object that pin no
// resourceVersion never answer 409 however many race (upstream's
// GuaranteedUpdate reads again and reapplies a patch that lost, without a
// bound on attempts); each patch's change is in the result. One that pins
// a stale resourceVersion is a 409.
func TestConcurrentPatchesRetry(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	created := g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"color": "red"}))
	const writers = 24
	codes := make(chan int, writers)
	for i := range writers {
		go func() {
			resp, body := g.do("PATCH", crontabs+"/a", fmt.Sprintf(`{"metadata":{"labels":{"w%d":"x"}}}`, i),
				"Content-Type", "application/merge-patch+json")
			if resp.StatusCode != http.StatusOK {
				t.Logf("writer %d: %d %s", i, resp.StatusCode, body)
			}
			codes <- resp.StatusCode
		}()
	}
	for range writers {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a concurrent patch answered %d", code)
		}
	}
	got := g.expect(http.StatusOK, "GET", crontabs+"/a", nil)
	labels, _ := meta(got)["labels"].(map[string]any)
	if len(labels) != writers {
		t.Errorf("%d labels after %d patches: %v", len(labels), writers, labels)
	}
	stale := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"labels":{"late":"x"}}}`, str(meta(created)["resourceVersion"]))
	g.expect(http.StatusConflict, "PATCH", crontabs+"/a", stale, "Content-Type", "application/merge-patch+json")
}
