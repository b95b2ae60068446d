package storage

import (
	"fmt"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/pkg/jsonscan"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

func TestCreateGet(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	g := testGroup()
	key := "/registry/" + g + "/crontabs/default/x"
	in := object("x", "default", map[string]string{"a": "b"}, map[string]any{"cronSpec": "* * * * *"})
	// A resourceVersion sent by the client is not stored.
	in = []byte(string(in[:len(in)-1]) + `,"extra":{"metadata":{"resourceVersion":"77"}}}`)
	in, _ = withResourceVersion(in, 99)

	cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: in})
	if err != nil {
		t.Fatal(err)
	}
	if cr.ResourceVersion <= 0 || rvOf(t, cr.Object) != cr.ResourceVersion {
		t.Fatalf("create: rv %d, object %s", cr.ResourceVersion, cr.Object)
	}
	raw, err := e.svc.Client().Get(ctx, key)
	if err != nil || len(raw.Kvs) != 1 {
		t.Fatalf("etcd get: %v", err)
	}
	if m := meta(t, raw.Kvs[0].Value); m.ResourceVersion != "" || m.Name != "x" {
		t.Fatalf("stored object: %s", raw.Kvs[0].Value)
	}
	if v, _, _ := jsonscan.Lookup(raw.Kvs[0].Value, "extra", "metadata", "resourceVersion"); string(v) != `"77"` {
		t.Fatalf("nested metadata changed: %s", raw.Kvs[0].Value)
	}

	gr, err := e.client.Get(ctx, &storagev1.GetRequest{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if gr.ResourceVersion != cr.ResourceVersion || string(gr.Object) != string(cr.Object) {
		t.Fatalf("get: %d %s, want %d %s", gr.ResourceVersion, gr.Object, cr.ResourceVersion, cr.Object)
	}

	_, err = e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: in})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("gRPC code %v", status.Code(err))
	}
	st := wantStatus(t, err, 409, metav1.StatusReasonAlreadyExists, `crontabs.`+g+` "x" already exists`)
	if st.Details == nil || st.Details.Name != "x" || st.Details.Group != g || st.Details.Kind != "crontabs" {
		t.Fatalf("details: %+v", st.Details)
	}

	_, err = e.client.Get(ctx, &storagev1.GetRequest{Key: "/registry/" + g + "/crontabs/default/nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC code %v", status.Code(err))
	}
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `crontabs.`+g+` "nope" not found`)
}

func TestCRDKey(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	name := "crontabs." + testGroup()
	key := "/registry/apiextensions.k8s.io/customresourcedefinitions/" + name
	if _, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object(name, "", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object(name, "", nil, nil)})
	wantStatus(t, err, 409, metav1.StatusReasonAlreadyExists,
		fmt.Sprintf(`customresourcedefinitions.apiextensions.k8s.io %q already exists`, name))
	if _, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
}

func TestBadRequests(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	g := testGroup()
	_, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: "/registry/" + g + "/crontabs/default/x", Object: []byte(`{"metadata":`)})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "the object is not a valid JSON object: malformed JSON")
	_, err = e.client.Create(ctx, &storagev1.CreateRequest{Key: "/registry/" + g + "/crontabs/default/x", Object: []byte(`[1]`)})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "the object is not a valid JSON object: not a JSON object")
	_, err = e.client.Get(ctx, &storagev1.GetRequest{Key: "/elsewhere/x"})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "")
	_, err = e.client.List(ctx, &storagev1.ListRequest{Prefix: "/registry/" + g + "/crontabs"})
	wantStatus(t, err, 400, metav1.StatusReasonBadRequest, "")
}

func TestUpdate(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	g := testGroup()
	key := "/registry/" + g + "/crontabs/default/x"
	cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object("x", "default", nil, map[string]any{"v": 1})})
	if err != nil {
		t.Fatal(err)
	}
	conflict := `Operation cannot be fulfilled on crontabs.` + g + ` "x": the object has been modified; please apply your changes to the latest version and try again`
	notFound := `crontabs.` + g + ` "nope" not found`
	missing := "/registry/" + g + "/crontabs/default/nope"

	// CAS at the current revision succeeds.
	ur, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: key, Object: cr.Object, ExpectedResourceVersion: cr.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if ur.ResourceVersion <= cr.ResourceVersion || rvOf(t, ur.Object) != ur.ResourceVersion {
		t.Fatalf("update rv %d object %s", ur.ResourceVersion, ur.Object)
	}
	tests := []struct {
		name     string
		key      string
		expected int64
		code     int32
		reason   metav1.StatusReason
		msg      string
	}{
		{"stale revision", key, cr.ResourceVersion, 409, metav1.StatusReasonConflict, conflict},
		{"future revision", key, ur.ResourceVersion + 1000, 409, metav1.StatusReasonConflict, conflict},
		{"missing, conditional", missing, 5, 404, metav1.StatusReasonNotFound, notFound},
		{"missing, unconditional", missing, 0, 404, metav1.StatusReasonNotFound, notFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := cr.Object
			if tt.key == missing {
				obj = object("nope", "default", nil, nil)
			}
			_, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: tt.key, Object: obj, ExpectedResourceVersion: tt.expected})
			wantStatus(t, err, tt.code, tt.reason, tt.msg)
		})
	}
	// Unconditional update of an existing object.
	ur2, err := e.client.Update(ctx, &storagev1.UpdateRequest{Key: key, Object: object("x", "default", nil, map[string]any{"v": 2})})
	if err != nil {
		t.Fatal(err)
	}
	if ur2.ResourceVersion <= ur.ResourceVersion {
		t.Fatalf("rv %d after %d", ur2.ResourceVersion, ur.ResourceVersion)
	}
	gr, err := e.client.Get(ctx, &storagev1.GetRequest{Key: key})
	if err != nil || string(gr.Object) != string(ur2.Object) {
		t.Fatalf("get after update: %s %v", gr.GetObject(), err)
	}
}

func TestDelete(t *testing.T) {
	e := shared(t)
	ctx := ctxT(t)
	g := testGroup()
	key := "/registry/" + g + "/crontabs/default/x"
	create := func() *storagev1.CreateResponse {
		cr, err := e.client.Create(ctx, &storagev1.CreateRequest{Key: key, Object: object("x", "default", nil, nil)})
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	cr := create()
	// Preconditions that do not hold.
	_, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key, PreconditionUid: "other"})
	st := wantStatus(t, err, 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on CronTab.`+g+` "x": the UID in the precondition (other) does not match the UID in record (uid-x). The object might have been deleted and then recreated`)
	if st.Details.Kind != "CronTab" || st.Details.Group != g || st.Details.Name != "x" {
		t.Fatalf("details %+v", st.Details)
	}
	_, err = e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key, PreconditionUid: "uid-x", PreconditionResourceVersion: cr.ResourceVersion - 1})
	wantStatus(t, err, 409, metav1.StatusReasonConflict, fmt.Sprintf(
		`Operation cannot be fulfilled on CronTab.%s "x": the ResourceVersion in the precondition (%d) does not match the ResourceVersion in record (%d). The object might have been modified`,
		g, cr.ResourceVersion-1, cr.ResourceVersion))

	// Preconditions that hold.
	dr, err := e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key, PreconditionUid: "uid-x", PreconditionResourceVersion: cr.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if dr.ResourceVersion <= cr.ResourceVersion || rvOf(t, dr.Object) != dr.ResourceVersion || meta(t, dr.Object).Name != "x" {
		t.Fatalf("delete: %d %s", dr.ResourceVersion, dr.Object)
	}
	_, err = e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key})
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `crontabs.`+g+` "x" not found`)
	_, err = e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key, PreconditionUid: "uid-x"})
	wantStatus(t, err, 404, metav1.StatusReasonNotFound, `crontabs.`+g+` "x" not found`)

	// Unconditional delete.
	cr = create()
	dr, err = e.client.Delete(ctx, &storagev1.DeleteRequest{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if dr.ResourceVersion <= cr.ResourceVersion || meta(t, dr.Object).ResourceVersion != strconv.FormatInt(dr.ResourceVersion, 10) {
		t.Fatalf("delete: %d %s", dr.ResourceVersion, dr.Object)
	}
	if _, err := e.client.Get(ctx, &storagev1.GetRequest{Key: key}); status.Code(err) != codes.NotFound {
		t.Fatalf("get after delete: %v", err)
	}
}
