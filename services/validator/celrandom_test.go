package validator

// A randomized differential test of the CEL rules in admission: random
// CronTabs of testdata/crds/crontab-cel.yaml (creates, updates and status
// updates, many invalid) admitted here and by upstream's strategies
// (test-only), which must agree on the errors and on the warnings of
// failures that ratcheting excused.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

func randomCelTab(r *rand.Rand) string {
	pick := func(l ...string) string { return l[r.IntN(len(l))] }
	var spec []string
	if r.IntN(10) > 0 {
		spec = append(spec, "cronSpec: "+pick(`"*/5 * * * *"`, `"0 0 * * *"`, `"* * *"`, `"1 2 3 4 5 6"`))
	}
	if r.IntN(10) > 0 {
		spec = append(spec, "image: "+pick(`"nginx:1.27"`, `"nginx:1.28"`, "nginx", `"busybox@sha256:abc"`))
	}
	if r.IntN(2) == 0 {
		spec = append(spec, "replicas: "+pick("0", "1", "2", "5", "11", `"x"`))
	}
	if r.IntN(3) == 0 {
		spec = append(spec, "minReplicas: "+pick("0", "1", "3"))
	}
	if r.IntN(3) == 0 {
		spec = append(spec, "maxReplicas: "+pick("1", "5", "10"))
	}
	if r.IntN(3) == 0 {
		spec = append(spec, "paused: "+pick("true", "false"))
	}
	if r.IntN(2) == 0 {
		var env []string
		for range r.IntN(4) {
			e := "{name: " + pick("A", "B", "TZ", "lower", "_X1")
			if r.IntN(2) == 0 {
				e += ", value: " + pick("'1'", "'2'", "x")
			}
			env = append(env, e+"}")
		}
		spec = append(spec, "env: ["+strings.Join(env, ", ")+"]")
	}
	if r.IntN(2) == 0 {
		var labels []string
		for _, k := range []string{"app", "tier", "kubernetes.io/x", strings.Repeat("k", 70)} {
			if r.IntN(3) == 0 {
				labels = append(labels, k+": "+pick("a", "b"))
			}
		}
		spec = append(spec, "labels: {"+strings.Join(labels, ", ")+"}")
	}
	out := "spec: {" + strings.Join(spec, ", ") + "}\n"
	if r.IntN(2) == 0 {
		var st []string
		if r.IntN(2) == 0 {
			st = append(st, "phase: "+pick("Pending", "Running", "Failed", "Gone"))
		}
		if r.IntN(2) == 0 {
			st = append(st, "availableReplicas: "+pick("0", "3", "12"))
		}
		out += "status: {" + strings.Join(st, ", ") + "}\n"
	}
	obj := celTab(out)
	if r.IntN(8) == 0 {
		obj = strings.Replace(obj, "name: nightly", "name: "+strings.Repeat("n", 64), 1)
	}
	return obj
}

func TestAdmitCELRandomDifferential(t *testing.T) {
	svc := newDirService(t)
	client := serve(t, svc)
	crd, err := svc.src.Get(context.Background(), &commonv1.CRDRef{Name: celCRD})
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstreamCRD(t, crd, "v1")
	r := rand.New(rand.NewPCG(3, 14))
	var withErrors, withWarnings, celErrors int
	n := 600
	if testing.Short() {
		n = 100
	}
	for i := range n {
		obj := randomCelTab(r)
		var old, sub string
		op := validatorv1.Operation_OPERATION_CREATE
		switch r.IntN(3) {
		case 1:
			op, old = validatorv1.Operation_OPERATION_UPDATE, randomCelTab(r)
			if r.IntN(2) == 0 {
				old = obj // unchanged: every failure is ratcheted
			}
		case 2:
			op, old, sub = validatorv1.Operation_OPERATION_UPDATE, randomCelTab(r), "status"
		}
		req := &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: celCRD}, Version: "v1", Operation: op,
			Subresource: sub, Object: toJSON(t, obj)}
		if old != "" {
			req.OldObject = toJSON(t, old)
		}
		resp, err := client.Admit(context.Background(), req)
		if err != nil {
			// Upstream's decoder fails too (e.g. not a string); skip.
			continue
		}
		var got []string
		for _, c := range resp.Causes {
			got = append(got, c.Field+": "+c.Message)
		}
		var gotWarnings []string
		for _, w := range resp.Warnings {
			if !strings.HasPrefix(w, "unknown field") && !strings.HasPrefix(w, "metadata.finalizers") {
				gotWarnings = append(gotWarnings, w)
			}
		}
		rec := &warningRecorder{}
		o := up.decode(t, req.Object, false)
		var want []string
		var errs field.ErrorList
		switch {
		case sub == "status":
			errs = append(errs, up.status(rec, o, up.decode(t, req.OldObject, true))...)
		case old != "":
			errs = append(errs, up.update(rec, o, up.decode(t, req.OldObject, true))...)
		default:
			errs = append(errs, up.create(rec, o)...)
		}
		for _, e := range errs {
			want = append(want, fielderr.Error(e))
		}
		got, want = asV133(got, want)
		gotWarnings, upWarnings := asV133(gotWarnings, rec.warnings)
		for _, l := range [][]string{got, want, gotWarnings, upWarnings} {
			slices.Sort(l)
		}
		if len(got) > 0 {
			withErrors++
		}
		if len(gotWarnings) > 0 {
			withWarnings++
		}
		for _, c := range resp.Causes {
			if strings.Contains(c.Message, "rule") || strings.Contains(c.Message, "must") {
				celErrors++
				break
			}
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotWarnings, upWarnings) {
			t.Errorf("case %d (%s %s):\nobject:\n%s\nold:\n%s\n     got %q\nupstream %q\n     warnings %q\nupstream %q",
				i, op, sub, obj, old, got, want, gotWarnings, upWarnings)
		}
	}
	t.Logf("%d objects: %d with errors (%d from rules), %d with ratcheting warnings", n, withErrors, celErrors, withWarnings)
}

// TestAdmitCELConcurrent admits CEL CronTabs (creates, ratcheted updates)
// from several goroutines: the compiled programs and schema adapters are
// shared (run with -race).
func TestAdmitCELConcurrent(t *testing.T) {
	client := serve(t, newDirService(t))
	bad := "spec: {cronSpec: '* * *', image: nginx, env: [{name: lower}]}\n"
	reqs := []struct {
		req              *validatorv1.AdmitRequest
		causes, warnings int
	}{
		{req: &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: celCRD}, Version: "v1",
			Operation: validatorv1.Operation_OPERATION_CREATE, Object: toJSON(t, celTab(celSpec))}},
		{req: &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: celCRD}, Version: "v1",
			Operation: validatorv1.Operation_OPERATION_CREATE, Object: toJSON(t, celTab(bad))}, causes: 3},
		{req: &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: celCRD}, Version: "v1",
			Operation: validatorv1.Operation_OPERATION_UPDATE, Object: toJSON(t, celTab(bad)), OldObject: toJSON(t, celTab(bad))}, warnings: 3},
	}
	errc := make(chan error, 6)
	for g := range 6 {
		go func() {
			for range 30 {
				tc := reqs[g%len(reqs)]
				resp, err := client.Admit(context.Background(), tc.req)
				if err == nil && (len(resp.Causes) != tc.causes || len(resp.Warnings) != tc.warnings) {
					err = fmt.Errorf("got %d causes, %d warnings, want %d, %d", len(resp.Causes), len(resp.Warnings), tc.causes, tc.warnings)
				}
				if err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 6 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}
