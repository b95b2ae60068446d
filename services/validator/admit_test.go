package validator

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// serve starts svc on an in-memory gRPC server and returns a client.
func serve(t testing.TB, svc *Service) validatorv1.ValidatorServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpcx.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return validatorv1.NewValidatorServiceClient(conn)
}

func newDirService(t testing.TB) *Service {
	t.Helper()
	svc, err := New(context.Background(), Config{CRDDir: "testdata/crds", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

func toJSON(t testing.TB, y string) []byte {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fromJSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

type cause struct{ Reason, Field, Message string }

func causesOf(resp *validatorv1.AdmitResponse) []cause {
	var out []cause
	for _, c := range resp.GetCauses() {
		out = append(out, cause{c.GetReason(), c.GetField(), c.GetMessage()})
	}
	return out
}

const cronTabMeta = `
apiVersion: stable.example.com/v1
kind: CronTab
metadata:
  name: my-new-cron-object
  namespace: default
  uid: 9423255b-4600-11e7-af6a-28d2447dc82b
  creationTimestamp: "2017-05-31T12:56:35Z"
  generation: 1
`

func cronTab(spec string) string { return cronTabMeta + "spec:\n" + spec }

var cronTabRef = &commonv1.CRDRef{Name: "crontabs.stable.example.com"}

func createRequest(obj []byte) *validatorv1.AdmitRequest {
	return &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE, Object: obj}
}

func TestAdmitCronTab(t *testing.T) {
	client := serve(t, newDirService(t))
	ctx := context.Background()

	tests := []struct {
		name     string
		obj      string
		causes   []cause
		object   string // expected object (YAML) when valid
		warnings []string
	}{
		{
			name: "reference invalid",
			obj:  cronTab("  cronSpec: \"* * * *\"\n  image: my-awesome-cron-image\n  replicas: 15\n"),
			causes: []cause{
				{"FieldValueInvalid", "spec.cronSpec", `Invalid value: "* * * *": spec.cronSpec in body should match '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'`},
				{"FieldValueInvalid", "spec.replicas", `Invalid value: 15: spec.replicas in body should be less than or equal to 10`},
			},
		},
		{
			name: "type",
			obj:  cronTab("  replicas: \"5\"\n"),
			causes: []cause{
				{"FieldValueTypeInvalid", "spec.replicas", `Invalid value: "string": spec.replicas in body must be of type integer: "string"`},
			},
		},
		{
			name:     "valid, pruned",
			obj:      cronTab("  cronSpec: \"* * * * */5\"\n  image: my-awesome-cron-image\n  replicas: 5\n  someRandomField: 42\n"),
			object:   cronTab("  cronSpec: \"* * * * */5\"\n  image: my-awesome-cron-image\n  replicas: 5\n"),
			warnings: []string{`unknown field "spec.someRandomField"`},
		},
		{
			name: "metadata",
			obj: strings.Replace(strings.Replace(cronTab("  replicas: 1\n"), "name: my-new-cron-object", "name: Bad_Name", 1),
				"namespace: default", "labels: {\"a b\": c}", 1),
			causes: []cause{
				{"FieldValueInvalid", "metadata.name", `Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
				{"FieldValueRequired", "metadata.namespace", `Required value`},
				{"FieldValueInvalid", "metadata.labels", `Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
			},
		},
		{
			name: "kind",
			obj:  strings.Replace(cronTab("  replicas: 1\n"), "kind: CronTab", "kind: Other", 1),
			causes: []cause{
				{"FieldValueInvalid", "kind", `Invalid value: "Other": must be CronTab`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := createRequest(toJSON(t, tc.obj))
			resp, err := client.Admit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if got := causesOf(resp); !reflect.DeepEqual(got, tc.causes) {
				t.Errorf("causes:\n got %q\nwant %q", got, tc.causes)
			}
			if tc.causes != nil {
				if resp.Object != nil {
					t.Errorf("object returned with causes")
				}
				return
			}
			if want := fromJSON(t, toJSON(t, tc.object)); !reflect.DeepEqual(fromJSON(t, resp.Object), want) {
				t.Errorf("object:\n got %s\nwant %v", resp.Object, want)
			}
			if !reflect.DeepEqual(resp.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.warnings)
			}
		})
	}
}

func TestAdmitErrors(t *testing.T) {
	client := serve(t, newDirService(t))
	ctx := context.Background()
	valid := toJSON(t, cronTab("  replicas: 1\n"))

	tests := []struct {
		name    string
		req     *validatorv1.AdmitRequest
		code    int32
		message string
	}{
		{"unknown CRD", &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: "nope.example.com"}, Version: "v1",
			Operation: validatorv1.Operation_OPERATION_CREATE, Object: valid},
			404, `customresourcedefinitions.apiextensions.k8s.io "nope.example.com" not found`},
		{"unknown version", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v9",
			Operation: validatorv1.Operation_OPERATION_CREATE, Object: valid},
			400, `version "v9" is not defined in CustomResourceDefinition crontabs.stable.example.com`},
		{"no object", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE},
			400, `invalid AdmitRequest: object is required`},
		{"no operation", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Object: valid},
			400, `invalid AdmitRequest: operation must be CREATE, UPDATE, PATCH or APPLY`},
		{"update without old", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_UPDATE, Object: valid},
			400, `invalid AdmitRequest: old_object is required for UPDATE`},
		{"not JSON", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE, Object: []byte("{")},
			400, `CronTab in version "v1" cannot be handled as a CronTab: unexpected end of JSON input`},
		{"malformed metadata", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE,
			Object: toJSON(t, "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: x, labels: [a]}\n")},
			400, `CronTab in version "v1" cannot be handled as a CronTab: json: cannot unmarshal array into Go struct field ObjectMeta.labels of type map[string]string`},
		{"status without subresource", &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_UPDATE,
			Subresource: "status", Object: valid, OldObject: valid},
			400, `CustomResourceDefinition crontabs.stable.example.com version v1 has no status subresource`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Admit(ctx, tc.req)
			if err == nil {
				t.Fatal("no error")
			}
			st := kstatus.FromError(err)
			if st.Code != tc.code || st.Message != tc.message {
				t.Errorf("got %d %q, want %d %q", st.Code, st.Message, tc.code, tc.message)
			}
		})
	}
}

const widgetMeta = `
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  uid: 1c1f0e7e-0000-4000-8000-000000000001
  resourceVersion: "7"
  creationTimestamp: "2024-01-01T00:00:00Z"
  generation: 1
`

var widgetRef = &commonv1.CRDRef{Name: "widgets.example.com"}

func admitWidget(t *testing.T, client validatorv1.ValidatorServiceClient, op validatorv1.Operation, sub, obj, old string) *validatorv1.AdmitResponse {
	t.Helper()
	req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: op, Subresource: sub, Object: toJSON(t, widgetMeta+obj)}
	if old != "" {
		req.OldObject = toJSON(t, widgetMeta+old)
	}
	resp, err := client.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return resp
}

func TestAdmitWidget(t *testing.T) {
	client := serve(t, newDirService(t))
	const create, update = validatorv1.Operation_OPERATION_CREATE, validatorv1.Operation_OPERATION_UPDATE

	t.Run("defaults", func(t *testing.T) {
		resp := admitWidget(t, client, create, "", "spec: {size: small, ports: [{name: a, port: 80}]}\n", "")
		if len(resp.Causes) > 0 {
			t.Fatalf("causes: %v", resp.Causes)
		}
		spec := fromJSON(t, resp.Object)["spec"].(map[string]any)
		if spec["replicas"] != int64(1) || spec["color"] != "blue" {
			t.Errorf("not defaulted: %v", spec)
		}
	})

	t.Run("create errors in upstream order", func(t *testing.T) {
		resp := admitWidget(t, client, create, "", `
spec:
  size: huge
  replicas: -1
  ports: [{name: a, port: 0}, {name: a, port: 2}]
  template: {apiVersion: v1, kind: pod_thing, metadata: {name: a/b}}
`, "")
		want := []cause{
			{"FieldValueInvalid", "spec.ports[0].port", `Invalid value: 0: spec.ports[0].port in body should be greater than or equal to 1`},
			{"FieldValueNotSupported", "spec.size", `Unsupported value: "huge": supported values: "small", "large"`},
			{"FieldValueInvalid", ".spec.replicas", `Invalid value: -1: should be a non-negative integer`},
			{"FieldValueInvalid", "spec.template.kind", `Invalid value: "pod_thing": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
			{"FieldValueInvalid", "spec.template.metadata.name", `Invalid value: "a/b": may not contain '/'`},
			{"FieldValueDuplicate", "spec.ports[1]", `Duplicate value: map[string]interface {}{"name":"a"}`},
		}
		if got := causesOf(resp); !reflect.DeepEqual(got, want) {
			t.Errorf("causes:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("ratcheting", func(t *testing.T) {
		old := "spec: {size: huge, color: red}\n"
		// The invalid size is unchanged: the update passes.
		resp := admitWidget(t, client, update, "", "spec: {size: huge, color: green}\n", old)
		if len(resp.Causes) > 0 {
			t.Errorf("unchanged invalid field not ratcheted: %v", resp.Causes)
		}
		// Changing it to another invalid value fails.
		resp = admitWidget(t, client, update, "", "spec: {size: huger, color: green}\n", old)
		if got := causesOf(resp); len(got) != 1 || got[0].Field != "spec.size" {
			t.Errorf("causes %v", got)
		}
	})

	t.Run("status subresource", func(t *testing.T) {
		old := "spec: {size: small}\nstatus: {phase: Pending}\n"
		resp := admitWidget(t, client, update, "status", "spec: {size: small}\nstatus: {phase: Done, replicas: x}\n", old)
		want := []cause{
			{"FieldValueNotSupported", "status.phase", `Unsupported value: "Done": supported values: "Pending", "Ready"`},
			{"FieldValueTypeInvalid", "status.replicas", `Invalid value: "string": replicas in body must be of type integer: "string"`},
			{"FieldValueInvalid", ".status.replicas", `Invalid value: 0: .status.replicas accessor error: x is of the type string, expected int64`},
		}
		if got := causesOf(resp); !reflect.DeepEqual(got, want) {
			t.Errorf("causes:\n got %q\nwant %q", got, want)
		}
		// Only .status is validated: an invalid spec does not matter.
		resp = admitWidget(t, client, update, "status", "spec: {size: huge}\nstatus: {phase: Ready}\n", "spec: {size: huge}\n")
		if len(resp.Causes) > 0 {
			t.Errorf("causes: %v", resp.Causes)
		}
	})

	t.Run("update metadata", func(t *testing.T) {
		resp := admitWidget(t, client, update, "", "spec: {size: small}\n", "spec: {size: small}\n")
		if len(resp.Causes) > 0 {
			t.Fatalf("causes: %v", resp.Causes)
		}
		obj := strings.Replace(widgetMeta, "  resourceVersion: \"7\"\n", "", 1) + "spec: {size: small}\n"
		req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: update,
			Object: toJSON(t, strings.Replace(obj, "name: w", "name: w2", 1)), OldObject: toJSON(t, widgetMeta+"spec: {size: small}\n")}
		resp, err := client.Admit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := []cause{
			{"FieldValueInvalid", "metadata.resourceVersion", `Invalid value: "": must be specified for an update`},
			{"FieldValueInvalid", "metadata.name", `Invalid value: "w2": field is immutable`},
		}
		if got := causesOf(resp); !reflect.DeepEqual(got, want) {
			t.Errorf("causes:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("preserve unknown fields version", func(t *testing.T) {
		req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v2", Operation: create,
			Object: toJSON(t, strings.Replace(widgetMeta, "example.com/v1", "example.com/v2", 1)+"anything: {goes: here}\n")}
		resp, err := client.Admit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Causes) > 0 || fromJSON(t, resp.Object)["anything"] == nil {
			t.Errorf("got %v %s", resp.Causes, resp.Object)
		}
	})

	t.Run("finalizer warnings", func(t *testing.T) {
		obj := strings.Replace(widgetMeta, "generation: 1\n", "generation: 1\n  finalizers: [example.com/ok, plain, dotted.name]\n", 1) + "spec: {size: small}\n"
		req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: create, Object: toJSON(t, obj)}
		resp, err := client.Admit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			`metadata.finalizers: "dotted.name": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`,
			`metadata.finalizers: "plain": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers`,
		}
		if !reflect.DeepEqual(resp.Warnings, want) {
			t.Errorf("warnings:\n got %q\nwant %q", resp.Warnings, want)
		}
	})

	t.Run("embedded metadata coercion", func(t *testing.T) {
		req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: create,
			Object: toJSON(t, widgetMeta+"spec: {size: small, template: {apiVersion: 1, kind: Pod}}\n")}
		_, err := client.Admit(context.Background(), req)
		st := kstatus.FromError(err)
		if st.Code != 400 || st.Message != `Widget in version "v1" cannot be handled as a Widget: spec.template.apiVersion: Invalid value: 1: must be a string` {
			t.Errorf("got %d %q", st.Code, st.Message)
		}
	})
}

func TestAdmitObjectKeepsInt64(t *testing.T) {
	client := serve(t, newDirService(t))
	obj := toJSON(t, widgetMeta+"spec: {size: small, template: {apiVersion: v1, kind: Pod, big: 9007199254740993}}\n")
	resp, err := client.Admit(context.Background(), &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1",
		Operation: validatorv1.Operation_OPERATION_CREATE, Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Object), `"big":9007199254740993`) {
		t.Errorf("int64 precision lost: %s", resp.Object)
	}
}

func TestAdmitConcurrent(t *testing.T) {
	client := serve(t, newDirService(t))
	valid := createRequest(toJSON(t, cronTab("  replicas: 5\n")))
	invalid := createRequest(toJSON(t, cronTab("  replicas: 50\n")))
	errc := make(chan error, 8)
	for g := range 8 {
		go func() {
			for range 25 {
				req, want := valid, 0
				if g%2 == 1 {
					req, want = invalid, 1
				}
				resp, err := client.Admit(context.Background(), req)
				if err == nil && len(resp.Causes) != want {
					err = fmt.Errorf("got %d causes, want %d", len(resp.Causes), want)
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 8 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// TestAdmitListTypeDuplicates: a duplicate in a list-type set (or of a
// list-type map's keys) is reported with the duplicated value, rendered as
// upstream v1.33 renders field.Duplicate(path.Index(i), value)
// (listtype/validation.go; apimachinery v0.33's ErrorBody): scalars
// plainly, strings quoted, null as "null", objects and lists with %#v.
func TestAdmitListTypeDuplicates(t *testing.T) {
	svc := newDirService(t)
	client := serve(t, svc)
	crd, err := svc.src.(*dirSource).Get(context.Background(), widgetRef)
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstreamCRD(t, crd, "v1")
	const create = validatorv1.Operation_OPERATION_CREATE
	for _, tc := range []struct {
		name, spec string
		want       []cause
	}{
		{"strings", `{size: small, tags: [a, b, a, b, a]}`, []cause{
			{"FieldValueDuplicate", "spec.tags[2]", `Duplicate value: "a"`},
			{"FieldValueDuplicate", "spec.tags[3]", `Duplicate value: "b"`}}},
		{"nulls", `{size: small, tags: [null, x, null]}`, []cause{
			{"FieldValueDuplicate", "spec.tags[2]", `Duplicate value: "null"`}}},
		{"numbers", `{size: small, codes: [1, 2.5, 1, 2.5]}`, []cause{
			{"FieldValueDuplicate", "spec.codes[2]", `Duplicate value: 1`},
			{"FieldValueDuplicate", "spec.codes[3]", `Duplicate value: 2.5`}}},
		{"booleans", `{size: small, flags: [true, false, true]}`, []cause{
			{"FieldValueDuplicate", "spec.flags[2]", `Duplicate value: true`}}},
		{"objects", `{size: small, pairs: [{a: 1, b: x}, {a: 2}, {b: x, a: 1}]}`, []cause{
			{"FieldValueDuplicate", "spec.pairs[2]", `Duplicate value: map[string]interface {}{"a":1, "b":"x"}`}}},
		{"lists", `{size: small, matrix: [[1, 2], [2, 1], [1, 2]]}`, []cause{
			{"FieldValueDuplicate", "spec.matrix[2]", `Duplicate value: []interface {}{1, 2}`}}},
		{"map keys", `{size: small, ports: [{name: a, port: 1}, {name: a, port: 2}]}`, []cause{
			{"FieldValueDuplicate", "spec.ports[1]", `Duplicate value: map[string]interface {}{"name":"a"}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := widgetMeta + "spec: " + tc.spec + "\n"
			resp := admitWidget(t, client, create, "", "spec: "+tc.spec+"\n", "")
			if got := causesOf(resp); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("causes:\n got %q\nwant %q", got, tc.want)
			}
			// Upstream's errors, rendered as v1.33 renders them.
			var want []cause
			for _, e := range up.create(&warningRecorder{}, up.decode(t, toJSON(t, obj), false)) {
				want = append(want, cause{string(e.Type), e.Field, fielderr.Body(e)})
			}
			if !reflect.DeepEqual(want, tc.want) {
				t.Errorf("upstream:\n got %q\nwant %q", want, tc.want)
			}
		})
	}
}
