package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// wantStatusBody checks an answer's code and its Status's message and
// reason (and, when details is not nil, its JSON details).
func wantStatusBody(t *testing.T, resp *http.Response, body []byte, code int, reason, msg string, details any) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("got %d, want %d: %s", resp.StatusCode, code, body)
	}
	var st struct {
		Kind    string          `json:"kind"`
		Status  string          `json:"status"`
		Reason  string          `json:"reason"`
		Message string          `json:"message"`
		Code    int             `json:"code"`
		Details json.RawMessage `json:"details"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("not a Status: %s", body)
	}
	if st.Kind != "Status" || st.Status != "Failure" || st.Code != code || st.Reason != reason || st.Message != msg {
		t.Fatalf("Status %s\nwant reason %q message %q", body, reason, msg)
	}
	if details != nil {
		want, _ := json.Marshal(details)
		var got, w any
		_ = json.Unmarshal(st.Details, &got)
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("details %s, want %s", st.Details, want)
		}
	}
}

// copyBomb is the CVE-2019-1002100 JSON patch: one add of 1,000 bytes,
// then n copies of spec into spec/cN. Each copy doubles spec: unbounded,
// 25 copies ask for 32 GB.
func copyBomb(n int) []byte {
	ops := []map[string]any{{"op": "add", "path": "/spec/p", "value": strings.Repeat("x", 1000)}}
	for i := range n {
		ops = append(ops, map[string]any{"op": "copy", "from": "/spec", "path": fmt.Sprintf("/spec/c%d", i)})
	}
	b, _ := json.Marshal(ops)
	return b
}

// vmRSS is the process's resident set size (/proc/self/status), 0 where
// there is none.
func vmRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// The copy bomb through the real gateway (every backend in this process):
// upstream's 422 within a second, the heap and the RSS growing by less
// than 50 MiB.
func TestJSONPatchCopyBomb(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	base := "/apis/stable.example.com/v1/namespaces/default/crontabs"
	g.expect(http.StatusCreated, "POST", base, cronTab("bomb", map[string]any{"color": "red"}))
	bomb := copyBomb(25)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore, rssBefore := ms.HeapInuse, vmRSS()
	// Sample the heap while the request runs: the peak is what matters.
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	start := time.Now()
	resp, body := g.do("PATCH", base+"/bomb", bomb, "Content-Type", "application/json-patch+json")
	took := time.Since(start)
	close(stop)
	wg.Wait()
	rssAfter := vmRSS()

	wantStatusBody(t, resp, body, http.StatusUnprocessableEntity, "Invalid",
		"the server rejected our request due to an error in our request", map[string]any{})
	heapGrowth := int64(peak) - int64(heapBefore)
	rssGrowth := int64(rssAfter) - int64(rssBefore)
	t.Logf("copy bomb (%d bytes): answered in %s, heap in use grew by at most %.1f MiB, RSS by %.1f MiB",
		len(bomb), took, float64(heapGrowth)/(1<<20), float64(rssGrowth)/(1<<20))
	if took >= time.Second {
		t.Errorf("answered in %s, want < 1s", took)
	}
	if heapGrowth >= 50<<20 {
		t.Errorf("heap in use grew by %d MiB", heapGrowth>>20)
	}
	if rssBefore > 0 && rssGrowth >= 50<<20 {
		t.Errorf("RSS grew by %d MiB", rssGrowth>>20)
	}
	// The object is unchanged.
	obj := g.expect(http.StatusOK, "GET", base+"/bomb", nil)
	if spec, _ := obj["spec"].(map[string]any); len(spec) != 1 {
		t.Fatalf("spec changed: %v", obj["spec"])
	}
}

// JSON patch failures answer as upstream v1.33 does (each read back from
// upstream's apiextensions-apiserver).
func TestJSONPatchFailuresAsUpstream(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	base := "/apis/stable.example.com/v1/namespaces/default/crontabs"
	g.expect(http.StatusCreated, "POST", base, cronTab("p", map[string]any{"color": "red"}))
	rejected := "the server rejected our request due to an error in our request"
	tests := []struct {
		name, query, patch string
		code               int
		reason, msg        string
		details            any
	}{
		{"unknown op", "", `[{"op":"bogus","path":"/spec/color"}]`, 422, "Invalid", rejected, map[string]any{}},
		{"bad path", "", `[{"op":"add","path":"/spec/x/y","value":1}]`, 422, "Invalid", rejected, map[string]any{}},
		{"failed test", "", `[{"op":"test","path":"/spec/color","value":"blue"}]`, 422, "Invalid", rejected, map[string]any{}},
		{"remove of a missing key", "", `[{"op":"remove","path":"/spec/nope"}]`, 422, "Invalid", rejected, map[string]any{}},
		{"not a list", "", `{"op":"add"}`, 400, "BadRequest",
			"error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp", nil},
		{"an operation that is a number", "", `[1]`, 400, "BadRequest",
			"error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp", nil},
		{"op not a string", "", `[{"op":1}]`, 400, "BadRequest",
			"error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string", nil},
		{"not JSON", "", `not json`, 400, "BadRequest", "error decoding patch: invalid character 'o' in literal null (expecting 'u')", nil},
		{"not a list, fieldValidation=Ignore", "?fieldValidation=Ignore", `{"op":"add"}`, 400, "BadRequest",
			"json: cannot unmarshal object into Go value of type jsonpatch.Patch", nil},
		{"not JSON, fieldValidation=Ignore", "?fieldValidation=Ignore", `not json`, 400, "BadRequest",
			"invalid character 'o' in literal null (expecting 'u')", nil},
		{"unknown op, fieldValidation=Ignore", "?fieldValidation=Ignore", `[{"op":"bogus","path":"/spec/color"}]`, 422, "Invalid", rejected, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := g.do("PATCH", base+"/p"+tt.query, tt.patch, "Content-Type", "application/json-patch+json")
			wantStatusBody(t, resp, body, tt.code, tt.reason, tt.msg, tt.details)
		})
	}
}

// A corrupt object in etcd (written behind crdplane's back) fails no list
// or watch through the gateway; a GET of it is upstream's 500 with its
// decoder's message (read back from upstream v1.33).
func TestCorruptObjectThroughTheGateway(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	base := "/apis/stable.example.com/v1/namespaces/default/crontabs"
	g.expect(http.StatusCreated, "POST", base, cronTab("good", map[string]any{"color": "red"}))
	ctx := t.Context()
	etcd := g.backends.Storage.Client()
	for key, value := range map[string]string{
		"c1": `not json`,
		"c2": `{"metadata":1}`,
	} {
		if _, err := etcd.Put(ctx, "/registry/stable.example.com/crontabs/default/"+key, value); err != nil {
			t.Fatal(err)
		}
	}
	resp, body := g.do("GET", base+"/c1", nil)
	wantStatusBody(t, resp, body, http.StatusInternalServerError, "", "invalid character 'o' in literal null (expecting 'u')", nil)
	resp, body = g.do("GET", base+"/c2", nil)
	wantStatusBody(t, resp, body, http.StatusInternalServerError, "", `Object 'Kind' is missing in '{"metadata":1}'`, nil)

	for _, path := range []string{base, "/apis/stable.example.com/v1/crontabs", base + "?limit=1", base + "?labelSelector=a!%3Db"} {
		list := g.expect(http.StatusOK, "GET", path, nil)
		items, _ := list["items"].([]any)
		if len(items) != 1 || str(meta(items[0].(map[string]any))["name"]) != "good" {
			t.Fatalf("%s: %v", path, list["items"])
		}
	}
	_, next := g.openWatch(base + "?watch=true")
	g.nextEvent(next, "ADDED", "good")
}

// Objects too large to store: upstream's answers (read back from upstream
// v1.33 for 1.6 and 2.1 MB bodies), and the bound before admission.
func TestObjectTooLargeThroughTheGateway(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	base := "/apis/stable.example.com/v1/namespaces/default/crontabs"
	resp, body := g.do("POST", base, cronTab("big", map[string]any{"color": strings.Repeat("x", 1_600_000)}))
	wantStatusBody(t, resp, body, http.StatusInternalServerError, "", "etcdserver: request is too large", nil)
	resp, body = g.do("POST", base, cronTab("bigger", map[string]any{"color": strings.Repeat("x", 2_100_000)}))
	if resp.StatusCode != http.StatusInternalServerError ||
		!strings.Contains(string(body), `"message":"rpc error: code = ResourceExhausted desc = trying to send message larger than max (21`) {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
	// A YAML body of 1 MB whose aliases make 4 MB of JSON: refused before
	// admission as etcd would refuse it.
	yaml := "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: aliases\nspec:\n  color: &c " +
		strings.Repeat("x", 1_000_000) + "\n  image: *c\n  size: *c\n  cronSpec: *c\n"
	admits := g.backends.Admits.Len()
	resp, body = g.do("POST", base, yaml, "Content-Type", "application/yaml")
	wantStatusBody(t, resp, body, http.StatusInternalServerError, "", "etcdserver: request is too large", nil)
	if g.backends.Admits.Len() != admits {
		t.Fatal("the oversized object went to admission")
	}
	// A patch whose result is too large, likewise.
	g.expect(http.StatusCreated, "POST", base, cronTab("p", map[string]any{"color": "red"}))
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/image","value":%q},{"op":"copy","from":"/spec/image","path":"/spec/size"}]`, strings.Repeat("y", 1_600_000))
	resp, body = g.do("PATCH", base+"/p", patch, "Content-Type", "application/json-patch+json")
	wantStatusBody(t, resp, body, http.StatusInternalServerError, "", "etcdserver: request is too large", nil)
}

// Reads and watches at a resourceVersion the store has not reached, as
// upstream v1.33 answers them (read back from upstream's
// apiextensions-apiserver).
func TestFutureResourceVersions(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	base := "/apis/stable.example.com/v1/namespaces/default/crontabs"
	g.expect(http.StatusCreated, "POST", base, cronTab("a", map[string]any{}))
	l := g.expect(http.StatusOK, "GET", base, nil)
	cur, _ := strconv.ParseInt(str(meta(l)["resourceVersion"]), 10, 64)
	future := strconv.FormatInt(cur+1000, 10)
	tooLarge := func(asked string) string {
		return fmt.Sprintf("Timeout: Too large resource version: %s, current: %d", asked, cur)
	}
	cause := []any{map[string]any{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}}
	retry := map[string]any{"causes": cause, "retryAfterSeconds": 1}
	noRetry := map[string]any{"causes": cause}

	t.Run("reads", func(t *testing.T) {
		tests := []struct {
			name, path  string
			code        int
			reason, msg string
			details     any
			waits       bool
		}{
			// Not older than: the watch cache waits 3s, then 504.
			{"list", base + "?resourceVersion=" + future, 504, "Timeout", tooLarge(future), retry, true},
			{"list NotOlderThan", base + "?resourceVersion=" + future + "&resourceVersionMatch=NotOlderThan", 504, "Timeout", tooLarge(future), retry, true},
			{"list past MaxInt64", base + "?resourceVersion=18446744073709551615", 504, "Timeout", tooLarge("18446744073709551615"), retry, true},
			{"get", base + "/a?resourceVersion=" + future, 504, "Timeout", tooLarge(future), retry, true},
			{"get of a missing object", base + "/nope?resourceVersion=" + future, 504, "Timeout", tooLarge(future), retry, true},
			// Exact: etcd's error, at once.
			{"list Exact", base + "?resourceVersion=" + future + "&resourceVersionMatch=Exact", 500, "", "etcdserver: mvcc: required revision is a future revision", nil, false},
			{"list with a limit", base + "?resourceVersion=" + future + "&limit=1", 500, "", "etcdserver: mvcc: required revision is a future revision", nil, false},
			{"list Exact MaxInt64", base + "?resourceVersion=9223372036854775807&resourceVersionMatch=Exact", 500, "", "etcdserver: mvcc: required revision is a future revision", nil, false},
			// Past MaxInt64, exact: the latest, then 504 without a hint.
			{"list Exact past MaxInt64", base + "?resourceVersion=18446744073709551615&resourceVersionMatch=Exact", 504, "Timeout", tooLarge("18446744073709551615"), noRetry, false},
			{"list with a limit past MaxInt64", base + "?resourceVersion=9223372036854775808&limit=2", 504, "Timeout", tooLarge("9223372036854775808"), noRetry, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				resp, body := g.do("GET", tt.path, nil)
				took := time.Since(start)
				wantStatusBody(t, resp, body, tt.code, tt.reason, tt.msg, tt.details)
				if tt.waits && (took < 2900*time.Millisecond || took > 6*time.Second) {
					t.Fatalf("answered after %s, want after upstream's 3s wait", took)
				}
				if !tt.waits && took > time.Second {
					t.Fatalf("answered after %s, want at once", took)
				}
			})
		}
	})

	// A revision reached during the wait: the read succeeds.
	next := strconv.FormatInt(cur+2, 10)
	type result struct {
		code int
		body []byte
	}
	done := make(chan result, 2)
	for _, p := range []string{base + "?resourceVersion=" + next, base + "/c?resourceVersion=" + next} {
		go func() {
			resp, body := g.do("GET", p, nil)
			done <- result{resp.StatusCode, body}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	g.expect(http.StatusCreated, "POST", base, cronTab("b", map[string]any{}))
	g.expect(http.StatusCreated, "POST", base, cronTab("c", map[string]any{}))
	for range 2 {
		if r := <-done; r.code != http.StatusOK {
			t.Fatalf("read during the wait: %d %s", r.code, r.body)
		}
	}

	// A watch from a revision still to come waits silently (no error
	// event, no bookmark), the largest ones included.
	for _, rv := range []string{strconv.FormatInt(cur+1000, 10), "9223372036854775807", "18446744073709551615"} {
		resp, next := g.openWatch(base + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion=" + rv)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch from %s: %d", rv, resp.StatusCode)
		}
		if ev, ok := next(); ok {
			t.Fatalf("watch from %s: event %+v", rv, ev)
		}
	}
}

// Names and namespaces in request paths, answered as upstream v1.33
// answers them (each read back from upstream's apiextensions-apiserver).
func TestPathsAsUpstream(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	B := "/apis/stable.example.com/v1"
	g.expect(http.StatusCreated, "POST", B+"/namespaces/default/crontabs", cronTab("a", map[string]any{}))
	notFound := func(name string) string { return fmt.Sprintf("crontabs.stable.example.com %q not found", name) }
	invalidName := func(name, why string) string { return fmt.Sprintf("Name parameter invalid: %q: %s", name, why) }
	invalidKey := func(key string) string { return fmt.Sprintf("invalid key: %q", key) }
	const obj = `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"z"}}`
	tests := []struct {
		method, path, body string
		code               int
		reason, msg        string // msg "" with code 200: a list (items checked empty unless name)
		name               string // a 200's object name
	}{
		// An encoded slash separates segments: a%2Fb is the subresource b
		// of a (404 "a"), a%2F is a.
		{"GET", "/namespaces/default/crontabs/a%2Fb", "", 404, "NotFound", notFound("a"), ""},
		{"GET", "/namespaces/default/crontabs/a%2F", "", 200, "", "", "a"},
		{"GET", "/namespaces/default/crontabs/a%00", "", 404, "NotFound", notFound("a\x00"), ""},
		// Names that are not path segments.
		{"GET", "/namespaces/default/crontabs/%2E%2E", "", 400, "BadRequest", invalidName("..", "may not be '..'"), ""},
		{"GET", "/namespaces/default/crontabs/..", "", 400, "BadRequest", invalidName("..", "may not be '..'"), ""},
		{"GET", "/namespaces/default/crontabs/%2E", "", 400, "BadRequest", invalidName(".", "may not be '.'"), ""},
		{"GET", "/namespaces/default/crontabs/a%25", "", 400, "BadRequest", invalidName("a%", "may not contain '%'"), ""},
		{"GET", "/namespaces/default/crontabs/%2E%2E?resourceVersion=abc", "", 400, "BadRequest", invalidName("..", "may not be '..'"), ""},
		{"DELETE", "/namespaces/default/crontabs/%2E%2E", "", 400, "BadRequest", invalidName("..", "may not be '..'"), ""},
		{"PATCH", "/namespaces/default/crontabs/%2E%2E", "not json", 400, "BadRequest", invalidName("..", "may not be '..'"), ""},
		{"PUT", "/namespaces/default/crontabs/%2E%2E", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":".."}}`,
			400, "BadRequest", invalidName("..", "may not be '..'"), ""},
		{"PUT", "/namespaces/default/crontabs/%2E%2E", obj, 400, "BadRequest", "the name of the object (z) does not match the name on the URL (..)", ""},
		// Namespaces that are no DNS label: nothing there.
		{"GET", "/namespaces/%00/crontabs", "", 200, "", "", ""},
		{"GET", "/namespaces/Bad_NS/crontabs", "", 200, "", "", ""},
		{"GET", "/namespaces/a%25/crontabs", "", 200, "", "", ""},
		{"GET", "/namespaces/%2E%2E/crontabs", "", 200, "", "", ""},
		{"GET", "/namespaces/%2E/crontabs?limit=1", "", 200, "", "", ""},
		{"GET", "/namespaces/%00/crontabs/a", "", 404, "NotFound", notFound("a"), ""},
		{"GET", "/namespaces/Bad_NS/crontabs/a", "", 404, "NotFound", notFound("a"), ""},
		{"GET", "/namespaces/a%25/crontabs/a", "", 404, "NotFound", notFound("a"), ""},
		{"GET", "/namespaces/default%2Fcrontabs/crontabs", "", 404, "NotFound", notFound("crontabs"), ""},
		{"POST", "/namespaces/Bad_NS/crontabs", obj, 422, "Invalid", "", ""},
		// "." and "..": etcd's keys refuse them.
		{"GET", "/namespaces/%2E%2E/crontabs/a", "", 500, "", invalidKey("/stable.example.com/crontabs/../a"), ""},
		{"GET", "/namespaces/%2E/crontabs/a", "", 500, "", invalidKey("/stable.example.com/crontabs/./a"), ""},
		{"GET", "/namespaces/%2E%2E/crontabs/a?resourceVersion=0", "", 404, "NotFound", notFound("a"), ""},
		{"DELETE", "/namespaces/%2E%2E/crontabs/a", "", 500, "", invalidKey("/stable.example.com/crontabs/../a"), ""},
		{"PATCH", "/namespaces/%2E%2E/crontabs/a", "not json", 500, "", invalidKey("/stable.example.com/crontabs/../a"), ""},
		{"PUT", "/namespaces/%2E%2E/crontabs/a", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"a","resourceVersion":"5"}}`,
			500, "", invalidKey("/stable.example.com/crontabs/../a"), ""},
		{"DELETE", "/namespaces/%2E%2E/crontabs", "", 500, "", invalidKey("/stable.example.com/crontabs/.."), ""},
		{"GET", "/namespaces/%2E%2E/crontabs?resourceVersionMatch=Exact&resourceVersion=5", "", 500, "", invalidKey("/stable.example.com/crontabs/.."), ""},
		// A patch is decoded once the object is read: a missing one is
		// 404 whatever the body.
		{"PATCH", "/namespaces/default/crontabs/nope", "not json", 404, "NotFound", notFound("nope"), ""},
		{"PATCH", "/namespaces/default/crontabs/nope", `[{"op":"bogus"}]`, 404, "NotFound", notFound("nope"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			ct := "application/json"
			if tt.method == "PATCH" {
				ct = "application/json-patch+json"
			}
			resp, data := g.do(tt.method, B+tt.path, body, "Content-Type", ct)
			if tt.code == 200 {
				if resp.StatusCode != 200 {
					t.Fatalf("got %d: %s", resp.StatusCode, data)
				}
				var m map[string]any
				_ = json.Unmarshal(data, &m)
				if tt.name != "" {
					if got := str(meta(m)["name"]); got != tt.name {
						t.Fatalf("got %s", data)
					}
				} else if items, ok := m["items"].([]any); !ok || len(items) != 0 {
					t.Fatalf("want an empty list: %s", data)
				}
				return
			}
			if tt.msg == "" {
				if resp.StatusCode != tt.code {
					t.Fatalf("got %d, want %d: %s", resp.StatusCode, tt.code, data)
				}
				return
			}
			wantStatusBody(t, resp, data, tt.code, tt.reason, tt.msg, nil)
		})
	}
	// Nothing was written: a is as created, and nothing else exists.
	l := g.expect(http.StatusOK, "GET", B+"/crontabs", nil)
	if items := l["items"].([]any); len(items) != 1 {
		t.Fatalf("objects: %v", items)
	}
}
