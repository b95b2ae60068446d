package validator

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/celconv"
	"github.com/crdplane/crdplane/pkg/grpcx"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/structural"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
	"github.com/crdplane/crdplane/services/converter"
)

// The Gadget of the conformance case 390-cr-webhook-conversion: v1 has
// spec.hostPort ("host:port"), v2 spec.host and spec.port; the webhook
// refuses objects with spec.fail.
const gadgetCRDYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.webhook.example.com, uid: gadget-uid, generation: 1, resourceVersion: "1"}
spec:
  group: webhook.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "URL"}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              hostPort: {type: string}
              fail: {type: boolean}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              host: {type: string}
              port: {type: string}
              fail: {type: boolean}
status:
  acceptedNames: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  storedVersions: [v1]
`

// gadgetRules are conversion rules (pkg/celconv) doing what the webhook does.
const gadgetRules = `- from: v1
  to: v2
  fields:
  - {path: spec.host, expression: "self.spec.hostPort.substring(0, self.spec.hostPort.lastIndexOf(':'))"}
  - {path: spec.port, expression: "self.spec.hostPort.substring(self.spec.hostPort.lastIndexOf(':') + 1)"}
- from: v2
  to: v1
  fields:
  - {path: spec.hostPort, expression: "self.spec.host + ':' + self.spec.port"}
`

// convertGadget converts a Gadget between v1 and v2 in place.
func convertGadget(obj map[string]any, to string) error {
	from, _ := obj["apiVersion"].(string)
	spec, _ := obj["spec"].(map[string]any)
	if fail, _ := spec["fail"].(bool); fail {
		return errors.New("conversion of this gadget is refused by the webhook")
	}
	obj["apiVersion"] = to
	if spec == nil || from == to {
		return nil
	}
	if strings.HasSuffix(to, "/v2") {
		if hp, ok := spec["hostPort"].(string); ok {
			spec["host"], spec["port"], _ = strings.Cut(hp, ":")
			delete(spec, "hostPort")
		}
		return nil
	}
	host, _ := spec["host"].(string)
	port, _ := spec["port"].(string)
	if host != "" || port != "" {
		spec["hostPort"] = host + ":" + port
	}
	delete(spec, "host")
	delete(spec, "port")
	return nil
}

// gadgetWebhook is a real ConversionReview v1 webhook over TLS converting
// Gadgets; it counts its calls.
type gadgetWebhook struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func startGadgetWebhook(t testing.TB) *gadgetWebhook {
	t.Helper()
	w := &gadgetWebhook{}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.calls.Add(1)
		var review struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Request    struct {
				UID               string           `json:"uid"`
				DesiredAPIVersion string           `json:"desiredAPIVersion"`
				Objects           []map[string]any `json:"objects"`
			} `json:"request"`
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		resp := map[string]any{"uid": review.Request.UID, "result": map[string]any{"status": "Success"}}
		var converted []map[string]any
		for _, obj := range review.Request.Objects {
			if err := convertGadget(obj, review.Request.DesiredAPIVersion); err != nil {
				resp["result"] = map[string]any{"status": "Failure", "message": err.Error()}
				converted = nil
				break
			}
			converted = append(converted, obj)
		}
		resp["convertedObjects"] = converted
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"apiVersion": review.APIVersion, "kind": review.Kind, "response": resp})
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// gadgetCRD is the Gadget CRD converted by w (nil: by the conversion
// rules instead).
func gadgetCRD(t testing.TB, w *gadgetWebhook) *CRD {
	t.Helper()
	crd := &CRD{}
	if err := yaml.Unmarshal([]byte(gadgetCRDYAML), crd); err != nil {
		t.Fatal(err)
	}
	if w == nil {
		crd.Spec.Conversion.Strategy = "None"
		crd.Spec.Conversion.Webhook = nil
		crd.Annotations = map[string]string{celconv.Annotation: gadgetRules}
		return crd
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	url := w.srv.URL + "/convert"
	crd.Spec.Conversion.Webhook.ClientConfig.URL = &url
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = ca
	return crd
}

var remoteSeq atomic.Int64

// startWithConverter serves a CRD watch of crd, the converter service
// following it, and a validator following it that converts through that
// converter (converterAddr, when set, replaces the converter's address:
// "none" for no converter).
func startWithConverter(t testing.TB, crd *CRD, converterAddr string) validatorv1.ValidatorServiceClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := remoteSeq.Add(1)
	serveAt := func(name string, register func(*grpc.Server)) string {
		addr := fmt.Sprintf("inproc://validator-remote-%s-%d", name, n)
		lis, err := grpcx.Listen(addr)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpcx.NewServer()
		register(srv)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return addr
	}
	reg := &fakeRegistry{initial: []*CRD{crd}, events: make(chan *registryv1.WatchResponse)}
	regAddr := serveAt("registry", func(s *grpc.Server) { registryv1.RegisterRegistryServiceServer(s, reg) })
	conv, err := converter.New(ctx, converter.Config{RegistryAddr: regAddr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conv.Close() })
	convAddr := serveAt("converter", func(s *grpc.Server) { conv.Register(s) })
	switch converterAddr {
	case "":
		converterAddr = convAddr
	case "none":
		converterAddr = ""
	}
	svc, err := New(ctx, Config{RegistryAddr: regAddr, ConverterAddr: converterAddr, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for svc.Ready() != nil || conv.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatal("not ready:", svc.Ready(), conv.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return serve(t, svc)
}

// refConverter is what upstream's CRD handler gives its field managers,
// in process: the custom resource converter of the CRD's versions, with
// the Gadget conversion (or the CRD's conversion rules) instead of the
// HTTP hop. calls counts the conversions that would reach the webhook.
type refConverter struct {
	rules *celconv.Rules
	crd   *CRD
	calls int
}

func (c *refConverter) Convert(_, _, _ any) error { return errors.New("not used") }

func (c *refConverter) ConvertFieldLabel(_ runtimeschema.GroupVersionKind, l, v string) (string, string, error) {
	return l, v, nil
}

func (c *refConverter) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u := in.(*unstructured.Unstructured)
	from := u.GroupVersionKind()
	to, _ := target.KindForGroupVersionKinds([]runtimeschema.GroupVersionKind{from})
	if to.GroupVersion() == from.GroupVersion() {
		return u, nil
	}
	out := runtime.DeepCopyJSON(u.Object)
	if isEmptyObject(u) {
		out["apiVersion"] = to.GroupVersion().String()
		return &unstructured.Unstructured{Object: out}, nil
	}
	c.calls++
	if c.rules != nil {
		conv, err := c.rules.Convert(context.Background(), out, to.GroupVersion().String())
		if err != nil {
			return nil, fmt.Errorf("conversion rules for %s failed: %v", c.rules.GroupVersionKind(from.GroupVersion().String()), err)
		}
		// crdplane's conversion by rules: coerced to the target schema.
		cv, err := compileVersion(c.crd, to.Version)
		if err != nil {
			return nil, err
		}
		if _, err := structural.Normalize(conv, cv.schema, false); err != nil {
			return nil, err
		}
		return &unstructured.Unstructured{Object: conv}, nil
	}
	if err := convertGadget(out, to.GroupVersion().String()); err != nil {
		return nil, fmt.Errorf("conversion webhook for %s failed: %v", from, err)
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// refManager is upstream's field manager of the Gadget CRD's version,
// around refConverter.
func refManager(t testing.TB, crd *CRD, version string, conv *refConverter) *managedfields.FieldManager {
	t.Helper()
	tc, err := typeConverter(crd)
	if err != nil {
		t.Fatal(err)
	}
	gvk := runtimeschema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: "Gadget"}
	fm, err := managedfields.NewDefaultCRDFieldManager(tc, conv, &defaulter{}, &creater{}, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return fm
}

func gadget(t testing.TB, version, spec string, managed []metav1.ManagedFieldsEntry) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(`{"apiVersion":"webhook.example.com/`+version+`","kind":"Gadget","metadata":{"name":"g","namespace":"default","uid":"u-g","resourceVersion":"1","generation":1,"creationTimestamp":"2026-11-25T17:31:03Z"},"spec":`+spec+`}`), &m); err != nil {
		t.Fatal(err)
	}
	if managed != nil {
		(&unstructured.Unstructured{Object: m}).SetManagedFields(managed)
	}
	return m
}

// entries are managedFields without their times (the two field managers
// run at different instants).
func entries(obj map[string]any) []metav1.ManagedFieldsEntry {
	mf := (&unstructured.Unstructured{Object: obj}).GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	return mf
}

// remoteStep is a write of TestManagedFieldsWebhookConversion.
type remoteStep struct {
	name    string
	version string
	op      validatorv1.Operation
	manager string
	obj     func() map[string]any // CREATE, UPDATE: the new object
	apply   string
	force   bool
	// wantCode is the status of an error (its message is upstream's field
	// manager's)
	wantCode int32
	// wantCalls are the webhook calls of the write (at most upstream's)
	wantCalls int64
}

// TestManagedFieldsWebhookConversion: managedFields entries recorded at
// another version of a CRD converted by webhook (or by conversion rules)
// convert through the converter service, as upstream's field manager
// converts them through its CRD converter: the validator's writes end with
// the managedFields, conflicts and errors that upstream's field manager
// gives with an in-process converter doing the same conversion; and each
// distinct conversion reaches the webhook once per write.
func TestManagedFieldsWebhookConversion(t *testing.T) {
	for _, mode := range []string{"webhook", "rules"} {
		t.Run(mode, func(t *testing.T) {
			var hook *gadgetWebhook
			if mode == "webhook" {
				hook = startGadgetWebhook(t)
			}
			crd := gadgetCRD(t, hook)
			client := startWithConverter(t, crd, "")
			ref := &refConverter{}
			if mode == "rules" {
				rules, errs := celconv.Compile(crd)
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				ref.rules, ref.crd = rules, crd
			}
			hookCalls := func() int64 {
				if hook == nil {
					return 0
				}
				return hook.calls.Load()
			}
			// The stored object, at v1 (entries as recorded).
			stored := gadget(t, "v1", `{"hostPort":"a.example:80"}`, nil)
			at := func(version string) map[string]any {
				o := runtime.DeepCopyJSON(stored)
				if err := convertGadget(o, "webhook.example.com/"+version); err != nil {
					t.Fatal(err)
				}
				return o
			}
			steps := []remoteStep{
				{name: "create at v1", version: "v1", op: validatorv1.Operation_OPERATION_CREATE, manager: "creator",
					obj: func() map[string]any { return gadget(t, "v1", `{"hostPort":"a.example:80"}`, nil) }},
				{name: "update at v2: the v1 entry converts", version: "v2", op: validatorv1.Operation_OPERATION_UPDATE, manager: "editor",
					obj: func() map[string]any {
						o := at("v2")
						o["spec"].(map[string]any)["port"] = "8080"
						return o
					}, wantCalls: 2},
				{name: "apply at v1", version: "v1", op: validatorv1.Operation_OPERATION_APPLY, manager: "applier-v1",
					apply:     `{"apiVersion":"webhook.example.com/v1","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"hostPort":"a.example:8080"}}`,
					wantCalls: 1},
				{name: "apply at v2: conflict with the v1 applier", version: "v2", op: validatorv1.Operation_OPERATION_APPLY, manager: "applier-v2",
					apply:    `{"apiVersion":"webhook.example.com/v2","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"port":"9090"}}`,
					wantCode: 409, wantCalls: 2},
				{name: "apply at v2 forced", version: "v2", op: validatorv1.Operation_OPERATION_APPLY, manager: "applier-v2", force: true,
					apply:     `{"apiVersion":"webhook.example.com/v2","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"port":"9090"}}`,
					wantCalls: 2},
				{name: "update at v2 again", version: "v2", op: validatorv1.Operation_OPERATION_UPDATE, manager: "applier-v2",
					obj: func() map[string]any {
						o := at("v2")
						o["spec"].(map[string]any)["host"] = "b.example"
						return o
					}, wantCalls: 2},
			}
			if mode == "webhook" {
				steps = append(steps, []remoteStep{
					{name: "update at v1 back to the v1 applier", version: "v1", op: validatorv1.Operation_OPERATION_UPDATE, manager: "v1-writer",
						obj: func() map[string]any {
							o := at("v1")
							o["spec"].(map[string]any)["hostPort"] = "c.example:1"
							return o
						}, wantCalls: 2},
					// The webhook refuses the new object: upstream's Update
					// clears the managedFields (UpdateNoErrors), the write
					// goes on.
					{name: "update at v2 the webhook refuses", version: "v2", op: validatorv1.Operation_OPERATION_UPDATE, manager: "editor",
						obj: func() map[string]any {
							o := at("v2")
							o["spec"].(map[string]any)["fail"] = true
							return o
						}, wantCalls: 2},
				}...)
			}
			for _, st := range steps {
				var want map[string]any
				var wantErr error
				ref.calls = 0
				fm := refManager(t, crd, st.version, ref)
				var live map[string]any
				if st.op != validatorv1.Operation_OPERATION_CREATE {
					live = at(st.version)
				}
				req := &validatorv1.AdmitRequest{
					Crd: &commonv1.CRDRef{Name: crd.Name, Uid: string(crd.UID), Generation: crd.Generation}, Version: st.version,
					Operation: st.op, ManagedFields: true, FieldManager: st.manager, Force: st.force,
					Namespace: "default", Name: "g",
				}
				if live != nil {
					req.OldObject = toJSONMap(t, live)
				}
				liveObj := func() runtime.Object {
					if live == nil {
						u := &unstructured.Unstructured{Object: map[string]any{}}
						u.SetAPIVersion("webhook.example.com/" + st.version)
						u.SetKind("Gadget")
						return u
					}
					return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(live)}
				}
				if st.op == validatorv1.Operation_OPERATION_APPLY {
					req.ApplyPatch = []byte(st.apply)
					var patch map[string]any
					if err := json.Unmarshal(req.ApplyPatch, &patch); err != nil {
						t.Fatal(err)
					}
					out, err := fm.Apply(liveObj(), &unstructured.Unstructured{Object: patch}, st.manager, st.force)
					if err != nil {
						wantErr = err
					} else {
						want = out.(*unstructured.Unstructured).Object
					}
				} else {
					obj := st.obj()
					req.Object = toJSONMap(t, obj)
					want = updateNoErrors(fm, liveObj(), &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}, st.manager).(*unstructured.Unstructured).Object
				}
				before := hookCalls()
				resp, err := client.Admit(context.Background(), req)
				calls := hookCalls() - before
				if wantErr != nil {
					got := kstatus.FromError(err)
					if err == nil || got.Code != st.wantCode || got.Message != wantErr.Error() {
						t.Fatalf("%s: got %v, want %d %q", st.name, err, st.wantCode, wantErr)
					}
				} else {
					if err != nil || len(resp.GetCauses()) > 0 {
						t.Fatalf("%s: %v %v", st.name, err, resp.GetCauses())
					}
					got := fromJSON(t, resp.GetObject())
					if g, w := entries(got), entries(want); !reflect.DeepEqual(g, w) {
						t.Fatalf("%s: managedFields\n\t%s\nwant (upstream's field manager)\n\t%s", st.name, mustJSON(g), mustJSON(w))
					}
					if st.name == "update at v2 the webhook refuses" && len(entries(got)) != 0 {
						t.Fatalf("%s: managedFields kept: %s", st.name, mustJSON(entries(got)))
					}
					// The stored object, back at v1 as the gateway stores it.
					stored = got
					if err := convertGadget(stored, "webhook.example.com/v1"); err != nil {
						stored["apiVersion"] = "webhook.example.com/v1"
					}
				}
				if mode == "webhook" {
					if calls != st.wantCalls || calls > int64(ref.calls) {
						t.Errorf("%s: %d webhook calls, want %d (upstream's field manager: %d)", st.name, calls, st.wantCalls, ref.calls)
					}
					t.Logf("%s: %d webhook calls (upstream: %d)", st.name, calls, ref.calls)
				}
			}
		})
	}
}

// TestManagedFieldsWebhookApplyRefused: an apply whose managedFields
// conversion the webhook refuses fails as upstream's: a plain 500 with the
// field manager's message around the webhook's.
func TestManagedFieldsWebhookApplyRefused(t *testing.T) {
	hook := startGadgetWebhook(t)
	crd := gadgetCRD(t, hook)
	client := startWithConverter(t, crd, "")
	live := gadget(t, "v2", `{"host":"a.example","port":"80"}`, []metav1.ManagedFieldsEntry{{
		Manager: "creator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webhook.example.com/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:hostPort":{}}}`),
	}})
	apply := `{"apiVersion":"webhook.example.com/v2","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"fail":true}}`
	var patch map[string]any
	if err := json.Unmarshal([]byte(apply), &patch); err != nil {
		t.Fatal(err)
	}
	_, wantErr := refManager(t, crd, "v2", &refConverter{}).Apply(&unstructured.Unstructured{Object: runtime.DeepCopyJSON(live)}, &unstructured.Unstructured{Object: patch}, "applier", false)
	if wantErr == nil || !strings.Contains(wantErr.Error(), "conversion of this gadget is refused by the webhook") {
		t.Fatalf("upstream's field manager: %v", wantErr)
	}
	_, err := client.Admit(context.Background(), &validatorv1.AdmitRequest{
		Crd: &commonv1.CRDRef{Name: crd.Name}, Version: "v2", Operation: validatorv1.Operation_OPERATION_APPLY,
		ManagedFields: true, FieldManager: "applier", Namespace: "default", Name: "g",
		OldObject: toJSONMap(t, live), ApplyPatch: []byte(apply),
	})
	st := kstatus.FromError(err)
	if st == nil || st.Code != 500 || st.Reason != "" || st.Message != wantErr.Error() {
		t.Fatalf("got %+v, want a plain 500 %q", st, wantErr)
	}
}

// TestManagedFieldsConverterUnavailable: a write that needs the converter
// when it cannot answer fails with 503 (the entries are not dropped for
// it); writes that need no conversion go through.
func TestManagedFieldsConverterUnavailable(t *testing.T) {
	hook := startGadgetWebhook(t)
	crd := gadgetCRD(t, hook)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	_ = lis.Close()
	live := gadget(t, "v2", `{"host":"a.example","port":"80"}`, []metav1.ManagedFieldsEntry{{
		Manager: "creator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webhook.example.com/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:hostPort":{}}}`),
	}})
	newObj := gadget(t, "v2", `{"host":"a.example","port":"81"}`, nil)
	for _, tc := range []struct {
		name, addr, wantMessage string
	}{
		{"converter down", closed, "connection refused"},
		{"no converter configured", "none", "webhook conversion is not available: no converter service configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := startWithConverter(t, crd, tc.addr)
			for _, op := range []validatorv1.Operation{validatorv1.Operation_OPERATION_UPDATE, validatorv1.Operation_OPERATION_APPLY} {
				req := &validatorv1.AdmitRequest{
					Crd: &commonv1.CRDRef{Name: crd.Name}, Version: "v2", Operation: op,
					ManagedFields: true, FieldManager: "editor", Namespace: "default", Name: "g",
					OldObject: toJSONMap(t, live), Object: toJSONMap(t, newObj),
					ApplyPatch: []byte(`{"apiVersion":"webhook.example.com/v2","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"port":"81"}}`),
				}
				_, err := client.Admit(context.Background(), req)
				st := kstatus.FromError(err)
				if st == nil || st.Code != 503 || !strings.Contains(st.Message, tc.wantMessage) {
					t.Errorf("%s: got %+v, want 503 %q", op, st, tc.wantMessage)
				}
			}
			// No entry at another version: no conversion, no converter.
			resp, err := client.Admit(context.Background(), &validatorv1.AdmitRequest{
				Crd: &commonv1.CRDRef{Name: crd.Name}, Version: "v2", Operation: validatorv1.Operation_OPERATION_UPDATE,
				ManagedFields: true, FieldManager: "editor", OldObject: toJSONMap(t, gadget(t, "v2", `{"host":"a.example","port":"80"}`, []metav1.ManagedFieldsEntry{{
					Manager: "editor", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webhook.example.com/v2",
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:host":{},"f:port":{}}}`),
				}})), Object: toJSONMap(t, newObj),
			})
			if err != nil || len(resp.GetCauses()) > 0 {
				t.Fatalf("update without conversion: %v %v", err, resp.GetCauses())
			}
			if got := entries(fromJSON(t, resp.GetObject())); len(got) != 1 || got[0].Manager != "editor" {
				t.Errorf("update without conversion: managedFields %s", mustJSON(got))
			}
		})
	}
}

func toJSONMap(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkApplyAcrossVersions is a server-side apply at v2 of the Gadget
// (through the validator's gRPC API) over a stored object whose other
// manager's entry is at v1 or at v2, for the CRD converted by None (in
// process; only entries at v2, as an apiVersion rewrite does not convert
// the Gadget), by conversion rules and by a webhook (through the converter
// service and a real HTTPS webhook; entries at v2 need no conversion, so
// that one measures the per-request field managers alone). The webhook
// calls per apply are reported as webhook-calls/op.
func BenchmarkApplyAcrossVersions(b *testing.B) {
	hook := startGadgetWebhook(b)
	for _, strategy := range []string{"none", "rules", "webhook"} {
		crd := gadgetCRD(b, hook)
		switch strategy {
		case "none":
			crd.Spec.Conversion.Strategy = "None"
			crd.Spec.Conversion.Webhook = nil
		case "rules":
			crd = gadgetCRD(b, nil)
		}
		client := startWithConverter(b, crd, "")
		for _, entryAt := range []string{"v2", "v1"} {
			if strategy == "none" && entryAt == "v1" {
				continue // None conversion cannot convert the Gadget's v2 fields to v1
			}
			b.Run(strategy+"/entry-at-"+entryAt, func(b *testing.B) {
				fields := `{"f:spec":{"f:host":{},"f:port":{}}}`
				if entryAt == "v1" {
					fields = `{"f:spec":{"f:hostPort":{}}}`
				}
				live := gadget(b, "v2", `{"host":"a.example","port":"80"}`, []metav1.ManagedFieldsEntry{{
					Manager: "creator", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "webhook.example.com/" + entryAt,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields),
				}})
				req := &validatorv1.AdmitRequest{
					Crd: &commonv1.CRDRef{Name: crd.Name}, Version: "v2", Operation: validatorv1.Operation_OPERATION_APPLY,
					ManagedFields: true, FieldManager: "applier", Force: true, Namespace: "default", Name: "g",
					OldObject:  toJSONMap(b, live),
					ApplyPatch: []byte(`{"apiVersion":"webhook.example.com/v2","kind":"Gadget","metadata":{"name":"g","namespace":"default"},"spec":{"port":"81"}}`),
				}
				ctx := context.Background()
				before := hook.calls.Load()
				b.ReportAllocs()
				for b.Loop() {
					if resp, err := client.Admit(ctx, req); err != nil || len(resp.GetCauses()) > 0 {
						b.Fatal(err, resp.GetCauses())
					}
				}
				b.ReportMetric(float64(hook.calls.Load()-before)/float64(b.N), "webhook-calls/op")
			})
		}
	}
}

// BenchmarkFieldManagersPerRequest is what a write of a CRD converted
// through the converter service pays for its field managers being built
// per request (the type converter is cached): the main and scale or
// status managers around a request-bound converter.
func BenchmarkFieldManagersPerRequest(b *testing.B) {
	crd := gadgetCRD(b, startGadgetWebhook(b))
	cv, err := compileVersion(crd, "v2")
	if err != nil {
		b.Fatal(err)
	}
	ms, err := cv.managed()
	if err != nil || ms.local != nil {
		b.Fatal(err, "managers built once for a webhook CRD")
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r := newRemoteConverter(ctx, nil, crd, nil)
		if _, err := cv.newFieldManagers(ms.tc, &versionConverter{crd: crd, remote: r}); err != nil {
			b.Fatal(err)
		}
	}
}
