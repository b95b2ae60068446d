package validator

import (
	"context"
	"encoding/json"
	"testing"

	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

// benchWidget is a Widget of testdata/crds/ssa-widgets.yaml as stored
// after a server-side apply by "bob" (with its managedFields).
func benchWidget(b *testing.B, svc *Service) []byte {
	b.Helper()
	resp, err := svc.Admit(context.Background(), &validatorv1.AdmitRequest{
		Crd: ssaWidgetRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_APPLY, ManagedFields: true,
		FieldManager: "bob", Namespace: "default", Name: "w", ApplyPatch: []byte(benchApply),
	})
	if err != nil || len(resp.GetCauses()) > 0 {
		b.Fatal(err, resp.GetCauses())
	}
	var m map[string]any
	if err := json.Unmarshal(resp.GetObject(), &m); err != nil {
		b.Fatal(err)
	}
	m["metadata"].(map[string]any)["resourceVersion"] = "7"
	out, _ := json.Marshal(m)
	return out
}

const benchApply = `apiVersion: ssa.example.com/v1
kind: Widget
metadata:
  name: w
  labels: {app: w}
spec:
  replicas: 3
  color: red
  ports:
  - {name: http, port: 80}
  - {name: https, port: 443}
  - {name: metrics, port: 9090}
  tags: [a, b, c]
  labels: {k1: v1, k2: v2}
  free: {any: [1, 2, 3]}
`

// BenchmarkApplyCreate is a server-side apply that creates (the merge into
// an empty object, defaulting, validation, managedFields).
func BenchmarkApplyCreate(b *testing.B) {
	svc := newDirService(b)
	req := &validatorv1.AdmitRequest{
		Crd: ssaWidgetRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_APPLY, ManagedFields: true,
		FieldManager: "bob", Namespace: "default", Name: "w", ApplyPatch: []byte(benchApply),
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := svc.Admit(ctx, req); err != nil || !resp.GetCreated() {
			b.Fatal(err, resp.GetCauses())
		}
	}
}

// BenchmarkApplyUpdate is a second manager's apply over a stored object
// (one field changed, the others untouched).
func BenchmarkApplyUpdate(b *testing.B) {
	svc := newDirService(b)
	req := &validatorv1.AdmitRequest{
		Crd: ssaWidgetRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_APPLY, ManagedFields: true,
		FieldManager: "alice", Namespace: "default", Name: "w", OldObject: benchWidget(b, svc),
		ApplyPatch: []byte("apiVersion: ssa.example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  tags: [d]\n"),
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := svc.Admit(ctx, req); err != nil || len(resp.GetCauses()) > 0 {
			b.Fatal(err, resp.GetCauses())
		}
	}
}

// BenchmarkUpdate is an update (PUT) of the stored object changing one
// field, with and without managedFields tracking, and prepared by the
// validator (prepare, as the gateway sends it: managedFields tracked).
func BenchmarkUpdate(b *testing.B) {
	svc := newDirService(b)
	old := benchWidget(b, svc)
	var m map[string]any
	_ = json.Unmarshal(old, &m)
	m["spec"].(map[string]any)["replicas"] = 4
	obj, _ := json.Marshal(m)
	for _, tc := range []struct {
		name             string
		tracked, prepare bool
	}{{"untracked", false, false}, {"managedFields", true, false}, {"prepare", true, true}} {
		b.Run(tc.name, func(b *testing.B) {
			req := &validatorv1.AdmitRequest{
				Crd: ssaWidgetRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_UPDATE, ManagedFields: tc.tracked,
				UserAgent: "kubectl/v1.33.0", Object: obj, OldObject: old, Prepare: tc.prepare,
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if resp, err := svc.Admit(ctx, req); err != nil || len(resp.GetCauses()) > 0 {
					b.Fatal(err, resp.GetCauses())
				}
			}
		})
	}
}

// BenchmarkFieldManagersBuild is the cost of building a CRD version's
// field managers (OpenAPI models of every version, the type converter,
// the main, status and scale managers): paid once per CRD generation.
func BenchmarkFieldManagersBuild(b *testing.B) {
	crd := loadCRD(b, "testdata/crds/ssa-widgets.yaml")
	b.ReportAllocs()
	for b.Loop() {
		cv, err := compileVersion(crd, "v1")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cv.managed(); err != nil {
			b.Fatal(err)
		}
	}
}
