package validator

import (
	"context"
	"testing"

	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

func benchRequest(b *testing.B) *validatorv1.AdmitRequest {
	return &validatorv1.AdmitRequest{Crd: cronTabRef, Version: "v1", Operation: validatorv1.Operation_OPERATION_CREATE,
		Object: toJSON(b, cronTab("  cronSpec: \"* * * * */5\"\n  image: my-awesome-cron-image\n  replicas: 5\n"))}
}

// BenchmarkAdmit is the whole admission of the reference's CronTab (decode,
// prune, default, validate, encode), called directly.
func BenchmarkAdmit(b *testing.B) {
	svc := newDirService(b)
	req := benchRequest(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := svc.Admit(ctx, req)
		if err != nil || len(resp.Causes) > 0 {
			b.Fatal(err, resp.GetCauses())
		}
	}
}

// BenchmarkAdmitInvalid admits the reference's invalid CronTab (two causes).
func BenchmarkAdmitInvalid(b *testing.B) {
	svc := newDirService(b)
	req := benchRequest(b)
	req.Object = toJSON(b, cronTab("  cronSpec: \"* * * *\"\n  image: my-awesome-cron-image\n  replicas: 15\n"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := svc.Admit(ctx, req)
		if err != nil || len(resp.Causes) != 2 {
			b.Fatal(err, resp.GetCauses())
		}
	}
}

// BenchmarkAdmitGRPC is BenchmarkAdmit over an in-memory gRPC connection,
// in parallel.
func BenchmarkAdmitGRPC(b *testing.B) {
	client := serve(b, newDirService(b))
	req := benchRequest(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			resp, err := client.Admit(ctx, req)
			if err != nil || len(resp.Causes) > 0 {
				b.Error(err, resp.GetCauses())
				return
			}
		}
	})
}
