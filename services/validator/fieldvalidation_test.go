package validator

import (
	"context"
	"reflect"
	"testing"

	"github.com/crdplane/crdplane/pkg/kstatus"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

func TestAdmitFieldValidation(t *testing.T) {
	client := serve(t, newDirService(t))
	ctx := context.Background()
	// Two unknown fields, and an invalid value: Strict fails on decoding,
	// before validation (400, not 422).
	obj := toJSON(t, cronTab("  replicas: 50\n  zz: 1\n  xx: [2]\n"))
	unknown := []string{`unknown field "spec.xx"`, `unknown field "spec.zz"`}
	for _, tc := range []struct {
		mode     string
		warnings []string
		err      string
	}{
		{mode: "", warnings: unknown},
		{mode: "Warn", warnings: unknown},
		{mode: "Ignore"},
		{mode: "Strict", err: `CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "spec.xx", unknown field "spec.zz"`},
		{mode: "Bogus", err: `invalid AdmitRequest: field_validation "Bogus" must be Strict, Warn, Ignore or empty`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			req := createRequest(obj)
			req.FieldValidation = tc.mode
			resp, err := client.Admit(ctx, req)
			if tc.err != "" {
				st := kstatus.FromError(err)
				if st == nil || st.Code != 400 || st.Message != tc.err || st.Reason != "BadRequest" {
					t.Fatalf("got %v, want 400 %q", st, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Causes) != 1 {
				t.Errorf("causes %v", resp.Causes)
			}
			// The warnings come with the causes.
			if !reflect.DeepEqual(resp.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.warnings)
			}
		})
	}

	// Strict with only known fields passes; the finalizer warnings come
	// only when the object is valid.
	req := createRequest(toJSON(t, cronTab("  replicas: 5\n")))
	req.FieldValidation = "Strict"
	if resp, err := client.Admit(ctx, req); err != nil || len(resp.Causes) > 0 {
		t.Fatalf("strict valid: %v %v", err, resp.GetCauses())
	}
	fin := `metadata.finalizers: "fin": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers`
	for _, tc := range []struct {
		replicas string
		warnings []string
	}{{"5", []string{fin}}, {"50", nil}} {
		obj := cronTab("  replicas: " + tc.replicas + "\n")
		obj = obj[:len("\napiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n")] + "  finalizers: [fin]\n" + obj[len("\napiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n"):]
		resp, err := client.Admit(ctx, createRequest(toJSON(t, obj)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(resp.Warnings, tc.warnings) {
			t.Errorf("replicas %s: warnings %q, want %q", tc.replicas, resp.Warnings, tc.warnings)
		}
	}
}

// TestAdmitStrictDecoding: the caller's strict errors (a body's duplicate
// fields) and the unknown fields of the whole request (request_object,
// when the caller's preparation dropped part of it) under each
// fieldValidation directive, as upstream's decoder: the duplicates first,
// then the unknown fields, in one 400 under Strict, as warnings under Warn
// (the default).
func TestAdmitStrictDecoding(t *testing.T) {
	client := serve(t, newDirService(t))
	ctx := context.Background()
	const cannot = `Widget in version "v1" cannot be handled as a Widget: strict decoding error: `
	// The prepared object: the request without its status (a main-resource
	// create of a CRD with a status subresource).
	prepared := toJSON(t, widgetMeta+"spec: {size: small, zz: 1}\n")
	whole := toJSON(t, widgetMeta+"spec: {size: small, zz: 1}\nstatus: {phase: Ready, bogus: 2}\n")
	dup := []string{`duplicate field "spec.size"`}
	for _, tc := range []struct {
		name     string
		mode     string
		strict   []string
		reqObj   []byte
		err      string
		warnings []string
	}{
		{name: "strict: duplicates first", mode: "Strict", strict: dup,
			err: cannot + `duplicate field "spec.size", unknown field "spec.zz"`},
		{name: "strict: unknown fields of the whole request", mode: "Strict", reqObj: whole,
			err: cannot + `unknown field "spec.zz", unknown field "status.bogus"`},
		{name: "strict: both", mode: "Strict", strict: dup, reqObj: whole,
			err: cannot + `duplicate field "spec.size", unknown field "spec.zz", unknown field "status.bogus"`},
		{name: "warn", mode: "Warn", strict: dup, reqObj: whole,
			warnings: []string{`duplicate field "spec.size"`, `unknown field "spec.zz"`, `unknown field "status.bogus"`}},
		{name: "default is warn", strict: dup,
			warnings: []string{`duplicate field "spec.size"`, `unknown field "spec.zz"`}},
		{name: "ignore", mode: "Ignore", strict: dup, reqObj: whole},
		{name: "request object decoding error", mode: "Warn",
			reqObj: toJSON(t, widgetMeta+"spec: {size: small}\nstatus: {phase: Ready}\n")[:10],
			err:    `Widget in version "v1" cannot be handled as a Widget: unexpected end of JSON input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &validatorv1.AdmitRequest{Crd: widgetRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE,
				Object: prepared, FieldValidation: tc.mode, StrictErrors: tc.strict, RequestObject: tc.reqObj}
			resp, err := client.Admit(ctx, req)
			if tc.err != "" {
				st := kstatus.FromError(err)
				if st == nil || st.Code != 400 || st.Message != tc.err || st.Reason != "BadRequest" {
					t.Fatalf("got %v, want 400 %q", st, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Causes) > 0 {
				t.Errorf("causes %v", resp.Causes)
			}
			if !reflect.DeepEqual(resp.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", resp.Warnings, tc.warnings)
			}
		})
	}
}
