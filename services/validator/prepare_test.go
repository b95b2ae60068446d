package validator

import (
	"context"
	"maps"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdplane/crdplane/pkg/jsondec"
	"github.com/crdplane/crdplane/pkg/jsonenc"
	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// callerPrepared is req as a caller that prepares the object itself sends
// it (prepare unset): the object prepared, request_object set when the
// preparation dropped part of the request, and the common metadata errors
// of an update, which that caller puts before the validator's causes.
func callerPrepared(t *testing.T, req *validatorv1.AdmitRequest) (*validatorv1.AdmitRequest, []string) {
	t.Helper()
	dec := func(b []byte) map[string]any {
		v, err := jsondec.Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return v.(map[string]any)
	}
	enc := func(m map[string]any) []byte {
		b, err := jsonenc.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := proto.Clone(req).(*validatorv1.AdmitRequest)
	out.Prepare = false
	obj := dec(req.GetObject())
	ignore := req.GetFieldValidation() == metav1.FieldValidationIgnore
	var metaErrs []string
	if req.GetOperation() == validatorv1.Operation_OPERATION_CREATE {
		if _, ok := obj["status"]; !ok {
			return out, nil
		}
		if !ignore {
			out.RequestObject = req.GetObject()
		}
		delete(obj, "status") // widgets have a status subresource
	} else {
		old := dec(req.GetOldObject())
		in := maps.Clone(obj)
		obj = objmeta.PrepareUpdate(obj, runtime.DeepCopyJSON(old), true, req.GetSubresource())
		for _, e := range metavalidation.ValidateCommonUpdate(obj, old, false) {
			metaErrs = append(metaErrs, e.Field)
		}
		if (!ignore || req.GetSubresource() == "status") && droppedByPreparation(in, obj, req.GetSubresource() == "status") {
			out.RequestObject = enc(in)
		}
	}
	out.Object = enc(obj)
	return out, metaErrs
}

// TestAdmitPrepare: with prepare the validator prepares the object as a
// caller that prepared it would have (the gateway did until the decision
// moved here): the same object, causes and warnings; and what the
// preparation decides, case by case.
func TestAdmitPrepare(t *testing.T) {
	client := serve(t, newDirService(t))
	ctx := context.Background()
	const create, update, patch = validatorv1.Operation_OPERATION_CREATE, validatorv1.Operation_OPERATION_UPDATE, validatorv1.Operation_OPERATION_PATCH
	const old = "spec: {size: small, replicas: 2}\nstatus: {replicas: 2, phase: Pending}\n"
	for _, tc := range []struct {
		name       string
		op         validatorv1.Operation
		sub, mode  string
		obj        string
		raw        string               // the object as JSON, instead of widgetMeta+obj
		meta       func(map[string]any) // edits the object's metadata
		oldMeta    func(map[string]any) // edits the stored object's
		noCaller   bool                 // not compared with a caller's preparation
		err        string               // a 400
		causes     []string             // the causes' fields
		warnings   []string
		spec, stat map[string]any // of the admitted object (nil: none)
		labels     map[string]any
	}{
		{name: "create drops status, its unknown fields count", op: create, mode: "Warn",
			obj:      "spec: {size: small, zz: 1}\nstatus: {phase: Ready, bogus: 2}\n",
			warnings: []string{`unknown field "spec.zz"`, `unknown field "status.bogus"`},
			spec:     map[string]any{"size": "small", "replicas": int64(1), "color": "blue"}},
		{name: "create under Strict", op: create, mode: "Strict",
			obj: "spec: {size: small}\nstatus: {phase: Ready, bogus: 2}\n",
			err: `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "status.bogus"`},
		{name: "create under Ignore", op: create, mode: "Ignore",
			obj:  "spec: {size: small}\nstatus: {phase: Ready, bogus: 2}\n",
			spec: map[string]any{"size": "small", "replicas": int64(1), "color": "blue"}},
		// The test's caller would encode 1.0 as 1 (jsonenc; the gateway's
		// encoding kept it a float): only the validator's preparation is
		// checked.
		{name: "create keeps number kinds (1 and 1.0 differ in a set)", op: create, noCaller: true,
			raw:  `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","uid":"1c1f0e7e-0000-4000-8000-000000000001"},"spec":{"size":"small","codes":[1,1.0]},"status":{"phase":"x"}}`,
			spec: map[string]any{"size": "small", "replicas": int64(1), "color": "blue", "codes": []any{int64(1), int64(1)}}},
		{name: "update keeps the stored status", op: update, mode: "Warn",
			obj:      "spec: {size: large, replicas: 2}\nstatus: {replicas: 9, phase: New, bogus: 1}\n",
			warnings: []string{`unknown field "status.bogus"`},
			spec:     map[string]any{"size": "large", "replicas": int64(2), "color": "blue"},
			stat:     map[string]any{"replicas": int64(2), "phase": "Pending"}},
		{name: "patch under Ignore keeps the stored status", op: patch, mode: "Ignore",
			obj:  "spec: {size: large, replicas: 2}\nstatus: {replicas: 9, bogus: 1}\n",
			spec: map[string]any{"size": "large", "replicas": int64(2), "color": "blue"},
			stat: map[string]any{"replicas": int64(2), "phase": "Pending"}},
		{name: "status write keeps the stored spec", op: update, sub: "status",
			obj:  "spec: {size: large, replicas: 7}\nstatus: {replicas: 3, phase: Ready}\n",
			spec: map[string]any{"size": "small", "replicas": int64(2), "color": "blue"},
			stat: map[string]any{"replicas": int64(3), "phase": "Ready"}},
		{name: "scale write is a main-resource write", op: update, sub: "scale",
			obj:  "spec: {size: small, replicas: 5}\nstatus: {replicas: 9}\n",
			spec: map[string]any{"size": "small", "replicas": int64(5), "color": "blue"},
			stat: map[string]any{"replicas": int64(2), "phase": "Pending"}},
		{name: "the stored uid stays", op: update,
			obj:  "spec: {size: small, replicas: 2}\n",
			meta: func(m map[string]any) { delete(m, "uid"); delete(m, "creationTimestamp") },
			spec: map[string]any{"size": "small", "replicas": int64(2), "color": "blue"},
			stat: map[string]any{"replicas": int64(2), "phase": "Pending"}},
		{name: "common metadata errors come first", op: update,
			obj:    "spec: {size: huge, replicas: 2}\n",
			meta:   func(m map[string]any) { m["labels"] = map[string]any{"x y": "v"} },
			causes: []string{"metadata.labels", "metadata.labels", "metadata.labels", "spec.size"}},
		{name: "common metadata errors alone", op: update,
			obj:     "spec: {size: small, replicas: 2}\n",
			meta:    func(m map[string]any) { m["namespace"] = "ns"; m["finalizers"] = []any{"fin"} },
			oldMeta: func(m map[string]any) { m["namespace"] = "ns" },
			causes:  []string{"metadata.namespace"},
			// The finalizer warning comes with them: the validator's own
			// validation passed (as when the caller checked the metadata).
			warnings: []string{`metadata.finalizers: "fin": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := []byte(tc.raw)
			if tc.raw == "" {
				obj = toJSON(t, widgetMeta+tc.obj)
			}
			if tc.meta != nil {
				o := fromJSON(t, obj)
				tc.meta(o["metadata"].(map[string]any))
				obj = marshal(t, o)
			}
			req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: tc.op, Subresource: tc.sub,
				Object: obj, FieldValidation: tc.mode, ManagedFields: true, FieldManager: "m", Prepare: true}
			if tc.op != create {
				req.OldObject = toJSON(t, widgetMeta+old)
				if tc.oldMeta != nil {
					o := fromJSON(t, req.OldObject)
					tc.oldMeta(o["metadata"].(map[string]any))
					req.OldObject = marshal(t, o)
				}
			}
			resp, err := client.Admit(ctx, req)
			creq, metaErrs := callerPrepared(t, req)
			cresp, cerr := client.Admit(ctx, creq)
			if tc.noCaller {
				cresp, cerr, metaErrs = resp, err, nil
			}
			if tc.err != "" {
				for _, err := range []error{err, cerr} {
					if st := kstatus.FromError(err); st == nil || st.Code != 400 || st.Message != tc.err {
						t.Fatalf("got %v, want 400 %q", st, tc.err)
					}
				}
				return
			}
			if err != nil || cerr != nil {
				t.Fatal(err, cerr)
			}
			var causes, ccauses []string
			for _, c := range resp.GetCauses() {
				causes = append(causes, c.GetField())
			}
			ccauses = append(ccauses, metaErrs...)
			for _, c := range cresp.GetCauses() {
				ccauses = append(ccauses, c.GetField())
			}
			if !reflect.DeepEqual(causes, tc.causes) || !reflect.DeepEqual(causes, ccauses) {
				t.Errorf("causes %q, caller-prepared %q, want %q", causes, ccauses, tc.causes)
			}
			if !reflect.DeepEqual(resp.GetWarnings(), tc.warnings) || !reflect.DeepEqual(resp.GetWarnings(), cresp.GetWarnings()) {
				t.Errorf("warnings %q, caller-prepared %q, want %q", resp.GetWarnings(), cresp.GetWarnings(), tc.warnings)
			}
			if len(tc.causes) > 0 {
				return
			}
			got, want := fromJSON(t, resp.GetObject()), fromJSON(t, cresp.GetObject())
			for _, m := range []map[string]any{got, want} {
				if mf, ok := m["metadata"].(map[string]any)["managedFields"].([]any); ok {
					for _, e := range mf {
						delete(e.(map[string]any), "time")
					}
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("object\n%v\ncaller-prepared\n%v", got, want)
			}
			if !reflect.DeepEqual(got["spec"], any(tc.spec)) {
				t.Errorf("spec %v, want %v", got["spec"], tc.spec)
			}
			if st, ok := got["status"]; ok != (tc.stat != nil) || ok && !reflect.DeepEqual(st, any(tc.stat)) {
				t.Errorf("status %v, want %v", st, tc.stat)
			}
			if uid := got["metadata"].(map[string]any)["uid"]; uid != "1c1f0e7e-0000-4000-8000-000000000001" {
				t.Errorf("uid %v", uid)
			}
		})
	}

	// With prepare the request object is the validator's own.
	req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: create, Object: toJSON(t, widgetMeta+"spec: {size: small}\n"),
		RequestObject: toJSON(t, widgetMeta+"spec: {size: small}\n"), Prepare: true}
	if _, err := client.Admit(ctx, req); kstatus.FromError(err).Code != 400 {
		t.Errorf("prepare with request_object: %v", err)
	}
}

// marshal is obj as JSON.
func marshal(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	b, err := jsonenc.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
