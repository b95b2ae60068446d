package storage

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Every write is checked whole by the storage service itself, whoever the
// caller: a malformed object is a 400 (gRPC InvalidArgument) saying why.
func TestWriteRefusesMalformedObjects(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	g := testGroup()
	ns := "/registry/" + g + "/crontabs/default/"
	cluster := "/registry/" + g + "/globals/"
	long := strings.Repeat("a", 3000)
	tests := []struct {
		name, key, obj, why string
	}{
		{"metadata a number, nothing else", ns + "x", `{"metadata":1}`, "apiVersion: Required value"},
		{"apiVersion and kind of the wrong types", ns + "x", `{"apiVersion":1,"kind":[]}`, "apiVersion: must be a string, not a number"},
		{"kind not a string", ns + "x", `{"apiVersion":"g/v1","kind":[],"metadata":{"name":"x","namespace":"default"}}`, "kind: must be a string, not an array"},
		{"kind missing", ns + "x", `{"apiVersion":"g/v1","metadata":{"name":"x","namespace":"default"}}`, "kind: Required value"},
		{"kind empty", ns + "x", `{"apiVersion":"g/v1","kind":"","metadata":{"name":"x","namespace":"default"}}`, "kind: Required value"},
		{"apiVersion of three parts", ns + "x", `{"apiVersion":"a/b/c","kind":"K","metadata":{"name":"x","namespace":"default"}}`,
			"apiVersion: unexpected GroupVersion string: a/b/c"},
		{"metadata missing", ns + "x", `{"apiVersion":"g/v1","kind":"K"}`, "metadata: Required value"},
		{"metadata a number", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":1}`, "metadata: must be an object, not a number"},
		{"name a number", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":5}}`,
			"metadata: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"},
		{"labels not strings", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","namespace":"default","labels":{"a":1}}}`,
			"metadata: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"},
		{"a timestamp that is not one", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","namespace":"default","creationTimestamp":"yesterday"}}`,
			`metadata: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
		{"name missing", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"namespace":"default"}}`, "metadata.name: Required value"},
		{"a 3,000-character name", ns + long, `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"` + long + `","namespace":"default"}}`,
			"metadata.name: must be no more than 253 characters"},
		{"name ..", ns + "..", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"..","namespace":"default"}}`, `metadata.name: "..": may not be '..'`},
		{"name with %", ns + "a%b", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"a%b","namespace":"default"}}`, `metadata.name: "a%b": may not contain '%'`},
		{"name not the key's", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"y","namespace":"default"}}`, `metadata.name: "y" does not match the key's name "x"`},
		{"namespace not the key's", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","namespace":"other"}}`,
			`metadata.namespace: "other" does not match the key's namespace "default"`},
		{"namespace missing", ns + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"x"}}`, `metadata.namespace: "" does not match the key's namespace "default"`},
		{"namespace on a cluster-scoped key", cluster + "x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","namespace":"default"}}`,
			`metadata.namespace: must be empty for a cluster-scoped key, not "default"`},
		{"a namespace that is not a DNS label", "/registry/" + g + "/crontabs/Bad_NS/x", `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"x","namespace":"Bad_NS"}}`,
			`metadata.namespace: "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := fmt.Sprintf("invalid object for storage key %q: %s", tt.key, tt.why)
			_, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: tt.key, Object: []byte(tt.obj)})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("create: gRPC code %v, want InvalidArgument: %v", status.Code(err), err)
			}
			wantStatus(t, err, 400, metav1.StatusReasonBadRequest, msg)
			_, err = e.client.Update(ctx, &storagev1.UpdateRequest{Key: tt.key, Object: []byte(tt.obj)})
			wantStatus(t, err, 400, metav1.StatusReasonBadRequest, msg)
		})
	}
	// Nothing was stored.
	for _, p := range []string{ns, cluster, "/registry/" + g + "/crontabs/"} {
		if l, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: p}); err != nil || len(l.Objects) != 0 {
			t.Fatalf("list %s: %d objects, %v", p, len(l.GetObjects()), err)
		}
	}
	// A well-formed cluster-scoped object and a namespaced one are stored.
	for key, obj := range map[string]string{
		cluster + "ok": `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"ok"}}`,
		ns + "ok":      `{"apiVersion":"g/v1","kind":"K","metadata":{"name":"ok","namespace":"default","labels":{"a":"b"},"creationTimestamp":null}}`,
	} {
		if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: []byte(obj)}); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
}

// corruptValues are values written to etcd behind the service's back, and
// what upstream v1.33's GET answers for each (read back from upstream's
// apiextensions-apiserver: a 500 without a reason, the decoder's error).
var corruptValues = []struct {
	name, value, getMessage string
}{
	{"c1", `not json`, `invalid character 'o' in literal null (expecting 'u')`},
	{"c2", `{"metadata":1}`, `Object 'Kind' is missing in '{"metadata":1}'`},
	{"c3", `{"apiVersion":1,"kind":[]}`, `Object 'Kind' is missing in '{"apiVersion":1,"kind":[]}'`},
	{"c6", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":1}`, `invalid metadata: expected object, got int64`},
	{"c7", `{"apiVersion":"a/b/c","kind":"CronTab","metadata":{"name":"c7"}}`,
		`Object 'Kind' is missing in '{"apiVersion":"a/b/c","kind":"CronTab","metadata":{"name":"c7"}}'`},
	{"c8", `{"apiVersion":1,"kind":"CronTab","metadata":{"name":"c8"}}`, `.apiVersion accessor error: 1 is of the type int64, expected string`},
	{"c9", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c9"}} trailing`, `invalid character 't' after top-level value`},
	{"c10", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c10"}`, `unexpected end of JSON input`},
}

// Lists, watches and deletecollection go on without a corrupt object
// (logged and counted); a GET of one is upstream's error.
func TestCorruptObjectsOnRead(t *testing.T) { watchModes(t, testCorruptObjectsOnRead) }

func testCorruptObjectsOnRead(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"default"}, 3, nil)
	g := strings.Split(prefix, "/")[2]
	resource := "crontabs." + g
	rev := currentRV(t, e, prefix)
	before := testutil.ToFloat64(decodeErrors.WithLabelValues(resource))
	for _, c := range corruptValues {
		if _, err := e.svc.Client().Put(ctx, prefix+"default/"+c.name, c.value); err != nil {
			t.Fatal(err)
		}
	}
	// Upstream's decoder drops malformed metadata fields of a stored
	// object rather than failing: these are served.
	lenient := map[string]string{
		"l1": `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":5,"namespace":"default"}}`,
		"l2": `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"l2","namespace":"default","labels":{"parity":1}}}`,
	}
	for name, v := range lenient {
		if _, err := e.svc.Client().Put(ctx, prefix+"default/"+name, v); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range corruptValues {
		_, err := e.client.Get(ctx, &storagev1.GetRequest{Key: prefix + "default/" + c.name})
		st := wantStatus(t, err, 500, "", c.getMessage)
		if st.Details != nil {
			t.Fatalf("%s: details %v", c.name, st.Details)
		}
	}

	keys := func(objs [][]byte) []string {
		var out []string
		for _, o := range objs {
			raw, _, _ := jsonscan.Lookup(o, "metadata", "name")
			out = append(out, string(raw))
		}
		sort.Strings(out)
		return out
	}
	list, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if got := fmt.Sprint(keys(list.Objects)); got != `["l2" "o00" "o01" "o02" 5]` {
		t.Fatalf("list: %s", got)
	}
	// With a label selector (the lenient l2's malformed labels are none).
	sel, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix + "default/", Options: &commonv1.ListOptions{LabelSelector: "parity=even"}})
	if err != nil {
		t.Fatalf("list with a selector: %v", err)
	}
	if got := keys(sel.Objects); fmt.Sprint(got) != `["o00" "o02"]` {
		t.Fatalf("selected %v", got)
	}
	// Paginated: every page goes on.
	var names []string
	opts := &commonv1.ListOptions{Limit: 2}
	for {
		page, err := e.client.List(ctx, &storagev1.ListRequest{Prefix: prefix, Options: opts})
		if err != nil {
			t.Fatalf("page: %v", err)
		}
		for _, o := range page.Objects {
			names = append(names, string(o))
		}
		if page.ContinueToken == "" {
			break
		}
		opts = &commonv1.ListOptions{Limit: 2, ContinueToken: page.ContinueToken}
	}
	if len(names) != 5 {
		t.Fatalf("pages: %v", names)
	}
	// Initial events of a watch leave them out too.
	w := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, SendInitialEvents: true})
	var added int
	for {
		ev := w.next()
		if ev.Type == commonv1.EventType_EVENT_TYPE_BOOKMARK {
			break
		}
		added++
	}
	if added != 5 {
		t.Fatalf("%d initial events", added)
	}
	// Counted: once per corrupt object per read that met it (at least).
	if got := testutil.ToFloat64(decodeErrors.WithLabelValues(resource)) - before; got < float64(len(corruptValues)) {
		t.Fatalf("decode errors counted %v", got)
	}

	// A live watch: an object going corrupt is DELETED (lists no longer
	// show it), a new corrupt object is nothing, its repair is ADDED.
	w = startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: rev + int64(len(corruptValues)+len(lenient))})
	if _, err := e.svc.Client().Put(ctx, prefix+"default/o01", `{"kind":`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Client().Put(ctx, prefix+"default/c11", `[]`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: prefix + "default/c1", Object: object("c1", "default", nil, nil)}); err != nil {
		t.Fatalf("repairing c1: %v", err)
	}
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: prefix + "default/c2"}); err == nil {
		// Deleted: its last state is not an object to return.
		t.Log("deleted c2")
	}
	if _, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: prefix + "default/o00", Object: object("o00", "default", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	w.expect("EVENT_TYPE_DELETED o01", "EVENT_TYPE_ADDED c1", "EVENT_TYPE_MODIFIED o00")
	w.quiet(200 * 1e6)

	// DeleteCollection with a selector deletes what lists show, and leaves
	// the corrupt objects.
	dc, err := e.client.DeleteCollection(ctx, &storagev1.DeleteCollectionRequest{Prefix: prefix, Options: &commonv1.ListOptions{FieldSelector: "metadata.namespace=default"}})
	if err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if got := fmt.Sprint(keys(dc.Objects)); got != `["c1" "l2" "o00" "o02" 5]` {
		t.Fatalf("deletecollection deleted %s", got)
	}
	left, err := e.svc.Client().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if left.Count != int64(len(corruptValues)) { // c1 repaired and c2 deleted; o01 and c11 went corrupt
		t.Fatalf("%d keys left", left.Count)
	}
}

// An object etcd will not store is upstream's plain 500 with the etcd
// client's message (read back from upstream v1.33 for objects of 1.6 and
// 2.1 MB).
func TestObjectTooLarge(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	prefix := "/registry/" + testGroup() + "/crontabs/default/"
	big := func(name string, n int) []byte {
		return object(name, "default", nil, map[string]any{"p": strings.Repeat("x", n)})
	}
	_, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "a", Object: big("a", 1_600_000)})
	st := wantStatus(t, err, 500, "", "etcdserver: request is too large")
	if st.Details != nil {
		t.Fatalf("details %v", st.Details)
	}
	_, err = e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "b", Object: big("b", 2_100_000)})
	st = wantStatus(t, err, 500, "", "")
	if !regexp.MustCompile(`^rpc error: code = ResourceExhausted desc = trying to send message larger than max \(2100\d\d\d vs\. 2097152\)$`).MatchString(st.Message) {
		t.Fatalf("message %q", st.Message)
	}
	// Updates too.
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "c", Object: big("c", 1000)}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.Update(ctx, &storagev1.UpdateRequest{Key: prefix + "c", Object: big("c", 1_600_000)})
	wantStatus(t, err, 500, "", "etcdserver: request is too large")
	// Just under etcd's 1.5 MiB is stored.
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "d", Object: big("d", 1_500_000)}); err != nil {
		t.Fatal(err)
	}
}

// readEdit (the cheap check every read runs) refuses exactly what
// upstream's decoder (decodeError) refuses.
func TestReadCheckAgreesWithUpstreamDecoder(t *testing.T) {
	values := []string{
		`{"apiVersion":"v1","kind":"K","metadata":{"name":"a"}}`,
		`{"kind":"K"}`,
		`{"kind":"K","metadata":null}`,
		`{"kind":"K","apiVersion":""}`,
		`{"kind":"K","apiVersion":"a/b"}`,
		`{"kind":"K","apiVersion":"a\/b"}`,
		`{"kind":"K","apiVersion":"a\/b/c"}`,
		`{"kind":"K","apiVersion":null}`,
		`{"kind":"K","apiVersion":true}`,
		`{"kind":"","apiVersion":"v1"}`,
		`{"kind":null}`,
		`{"kind":"K","metadata":"x"}`,
		`{"kind":"K","metadata":[]}`,
		`{"kind":"K","metadata":1.5}`,
		`{"kind":"K","metadata":{"name":5,"labels":{"a":1}}}`,
		`{"kind":"K","kind":""}`,
		`{"kind":"","kind":"K"}`,
		` {"kind":"K"} `,
		`{"kind":"K"}{}`,
		`[]`,
		`"x"`,
		``,
	}
	for _, c := range corruptValues {
		values = append(values, c.value)
	}
	for _, v := range values {
		_, readErr := readEdit([]byte(v), 1)
		decErr := decodeError([]byte(v))
		if (readErr != nil) != (decErr != nil) {
			t.Errorf("%s: read check %v, upstream's decoder %v", v, readErr, decErr)
		}
	}
	for _, c := range corruptValues {
		if err := decodeError([]byte(c.value)); err == nil || err.Error() != c.getMessage {
			t.Errorf("%s: %v, want %s", c.value, err, c.getMessage)
		}
	}
}

// Watches from a revision etcd has not reached.
func TestWatchFutureRevision(t *testing.T) { watchModes(t, testWatchFutureRevision) }

func testWatchFutureRevision(t *testing.T, e *env) {
	ctx := ctxT(t)
	prefix := seed(t, e, []string{"a"}, 1, nil)
	cur := currentRV(t, e, prefix)

	// Initial events as of a revision still to come: upstream's watch
	// cache waits 3s, then 504 Too large resource version, retry after 1s.
	start := time.Now()
	w := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: cur + 1000, SendInitialEvents: true})
	err := w.end()
	took := time.Since(start)
	st := wantStatus(t, err, 504, metav1.StatusReasonTimeout, "")
	if !regexp.MustCompile(fmt.Sprintf(`^Timeout: Too large resource version: %d, current: \d+$`, cur+1000)).MatchString(st.Message) ||
		st.Details == nil || st.Details.RetryAfterSeconds != 1 || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge || st.Details.Causes[0].Message != "Too large resource version" {
		t.Fatalf("status %+v %+v", st, st.Details)
	}
	if took < 2900*time.Millisecond || took > 6*time.Second {
		t.Fatalf("answered after %s, want ~3s", took)
	}
	// Reached within the wait: the initial events as of it.
	w = startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: cur + 1, SendInitialEvents: true})
	time.Sleep(300 * time.Millisecond)
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "a/new", Object: object("new", "a", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	w.expect("EVENT_TYPE_ADDED new", "EVENT_TYPE_ADDED o00", "EVENT_TYPE_BOOKMARK")

	// A plain watch from a revision still to come (the largest one too)
	// waits silently, as upstream's does: no error, no bookmark.
	far := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: math.MaxInt64, AllowBookmarks: true})
	soon := startWatch(t, e, &storagev1.WatchRequest{Prefix: prefix, ResourceVersion: currentRV(t, e, prefix) + 2, AllowBookmarks: true})
	far.quiet(700 * time.Millisecond)
	soon.quiet(10 * time.Millisecond)
	// Events after the revision come.
	for _, n := range []string{"x1", "x2", "x3"} {
		if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: prefix + "a/" + n, Object: object(n, "a", nil, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	soon.expect("EVENT_TYPE_ADDED x3")
	far.quiet(300 * time.Millisecond)
}
