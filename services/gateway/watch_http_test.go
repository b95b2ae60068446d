package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

type watchEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// openWatch starts a watch and returns a function reading its next event.
func (g *testGateway) openWatch(path string) (*http.Response, func() (watchEvent, bool)) {
	g.t.Helper()
	return g.openWatchAccept(path, "")
}

// openWatchAccept is openWatch with an Accept header.
func (g *testGateway) openWatchAccept(path, accept string) (*http.Response, func() (watchEvent, bool)) {
	g.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", g.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := g.srv.Client().Do(req)
	if err != nil {
		g.t.Fatalf("watch %s: %v", path, err)
	}
	g.t.Cleanup(func() { resp.Body.Close() })
	dec := json.NewDecoder(resp.Body)
	events := make(chan watchEvent)
	go func() {
		defer close(events)
		for {
			var ev watchEvent
			if err := dec.Decode(&ev); err != nil {
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return resp, func() (watchEvent, bool) {
		select {
		case ev, ok := <-events:
			return ev, ok
		case <-time.After(5 * time.Second):
			g.t.Fatalf("watch %s: no event within 5s", path)
			return watchEvent{}, false
		}
	}
}

func (g *testGateway) nextEvent(next func() (watchEvent, bool), typ, name string) watchEvent {
	g.t.Helper()
	ev, ok := next()
	if !ok {
		g.t.Fatalf("watch ended, want %s %s", typ, name)
	}
	if ev.Type != typ || (name != "" && ev.Object["kind"] != "Table" && str(meta(ev.Object)["name"]) != name) {
		g.t.Fatalf("got %s %v, want %s %s", ev.Type, meta(ev.Object)["name"], typ, name)
	}
	return ev
}

func TestWatchCustomResources(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	a := g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"color": "red"}))

	// resourceVersion "": the current state as ADDED, then changes.
	resp, next := g.openWatch(crontabs + "?watch=true")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch response: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	g.nextEvent(next, "ADDED", "a")

	// resourceVersion N: only what follows N.
	_, nextN := g.openWatch(crontabs + "?watch=1&resourceVersion=" + str(meta(a)["resourceVersion"]))
	// Label-selected watch: objects entering and leaving the selection.
	_, nextSel := g.openWatch("/apis/stable.example.com/v1/watch/namespaces/default/crontabs?labelSelector=app%3Dx")

	g.expect(http.StatusCreated, "POST", crontabs, cronTab("b", map[string]any{}))
	g.nextEvent(next, "ADDED", "b")
	g.nextEvent(nextN, "ADDED", "b")

	g.expect(http.StatusOK, "PATCH", crontabs+"/a", `{"metadata":{"labels":{"app":"x"}}}`, "Content-Type", "application/merge-patch+json")
	ev := g.nextEvent(next, "MODIFIED", "a")
	if ev.Object["apiVersion"] != "stable.example.com/v1" || ev.Object["kind"] != "CronTab" {
		t.Fatalf("event object type: %v", ev.Object)
	}
	g.nextEvent(nextN, "MODIFIED", "a")
	// An object entering a selection is ADDED to its watch (as upstream's watch cache).
	g.nextEvent(nextSel, "ADDED", "a")

	g.expect(http.StatusOK, "DELETE", crontabs+"/b", nil)
	g.nextEvent(next, "DELETED", "b")
}

func TestWatchHeadersFlushBeforeEvents(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	// Nothing exists and nothing happens: the 200 must still arrive.
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := g.openWatch(crontabs + "?watch=true&resourceVersion=1")
		done <- resp
	}()
	select {
	case resp := <-done:
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("watch headers not flushed")
	}
}

// TestWatchListForbidden: upstream v1.33 has the WatchList feature gate
// off, so sendInitialEvents (true or false) is a 422 before the stream
// starts, whatever else the watch asks.
func TestWatchListForbidden(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{}))

	const forbidden = "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
	for _, tc := range []struct{ query, message string }{
		{"sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
			`ListOptions.meta.k8s.io "" is invalid: ` + forbidden},
		{"sendInitialEvents=false&resourceVersionMatch=NotOlderThan",
			`ListOptions.meta.k8s.io "" is invalid: ` + forbidden},
		{"sendInitialEvents=true",
			`ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, ` + forbidden + "]"},
	} {
		s := g.expect(http.StatusUnprocessableEntity, "GET", crontabs+"?watch=true&"+tc.query, nil)
		if s["reason"] != "Invalid" || s["message"] != tc.message {
			t.Errorf("%s: %v", tc.query, s)
		}
	}
	// A field selector on a field that cannot be selected is 400.
	s := g.expect(http.StatusBadRequest, "GET", crontabs+"?watch=true&fieldSelector=spec.size%3D1", nil)
	if s["message"] != "field label not supported: spec.size" {
		t.Fatalf("%v", s)
	}
	// timeoutSeconds=1 ends the stream cleanly.
	_, next := g.openWatch(crontabs + "?watch=true&timeoutSeconds=1")
	g.nextEvent(next, "ADDED", "a")
	if ev, ok := next(); ok {
		t.Fatalf("want the stream to end, got %v", ev)
	}
}

// TestWatchSingleObjectPath: the legacy single-object watch paths
// (/apis/<g>/<v>/watch/[namespaces/<ns>/]<plural>/<name>) watch that name,
// as upstream's ListResource treats the name: a field selector given too
// must require exactly it (400 otherwise); other objects' events are not
// sent.
func TestWatchSingleObjectPath(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	g.expect(http.StatusCreated, "POST", crontabs, cronTab("a", map[string]any{"color": "red"}))
	const watchNS = "/apis/stable.example.com/v1/watch/namespaces/default/crontabs/"
	const watchAll = "/apis/stable.example.com/v1/watch/crontabs/"
	for _, tc := range []struct {
		name, path string
		code       int
		message    string
	}{
		{name: "namespaced", path: watchNS + "a?resourceVersion=", code: 200},
		{name: "all namespaces", path: watchAll + "a?resourceVersion=", code: 200},
		{name: "with its name selected", path: watchNS + "a?fieldSelector=metadata.name%3Da&resourceVersion=", code: 200},
		{name: "another name selected", path: watchNS + "a?fieldSelector=metadata.name%3Db", code: 400,
			message: "fieldSelector metadata.name doesn't match requested name"},
		{name: "no name selected", path: watchNS + "a?fieldSelector=spec.color%3Dred", code: 400,
			message: "fieldSelector metadata.name doesn't match requested name"},
		{name: "unsupported field first", path: watchNS + "a?fieldSelector=spec.size%3D1", code: 400,
			message: "field label not supported: spec.size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.code != http.StatusOK {
				s := g.expect(tc.code, "GET", tc.path, nil)
				if s["message"] != tc.message {
					t.Fatalf("%v", s)
				}
				return
			}
			rv := str(meta(g.expect(http.StatusOK, "GET", crontabs+"/a", nil))["resourceVersion"])
			_, next := g.openWatch(tc.path + rv)
			g.expect(http.StatusCreated, "POST", crontabs, cronTab("b-"+strings.ReplaceAll(tc.name, " ", "-"), map[string]any{}))
			g.expect(http.StatusOK, "PATCH", crontabs+"/a", `{"spec":{"color":"`+tc.name+`"}}`, "Content-Type", "application/merge-patch+json")
			ev := g.nextEvent(next, "MODIFIED", "a")
			if spec, _ := ev.Object["spec"].(map[string]any); spec["color"] != tc.name {
				t.Fatalf("event %v", ev.Object)
			}
		})
	}
}

func TestWatchTooOldIsErrorEvent(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	// Move etcd on and compact its history past revision 2.
	etcd := g.backends.Storage.Client()
	var rev int64
	for i := range 3 {
		resp, err := etcd.Put(t.Context(), fmt.Sprintf("/unrelated/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := etcd.Compact(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	resp, next := g.openWatch(crontabs + "?watch=true&resourceVersion=2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ev := g.nextEvent(next, "ERROR", "")
	if ev.Object["kind"] != "Status" || ev.Object["code"] != float64(410) || ev.Object["reason"] != "Expired" {
		t.Fatalf("error event: %v", ev.Object)
	}
}
