package registry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/build"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// deepSchema is a schema of levels nested objects (~35 bytes a level).
func deepSchema(levels int) string {
	return strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels)
}

// deepCRD is a valid CRD but for the depth of its versions' schemas.
func deepCRD(name string, schemas ...string) []byte {
	group := "deep.example.com"
	var b strings.Builder
	fmt.Fprintf(&b, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"%s.%s"},"spec":{"group":"%s","scope":"Namespaced","names":{"plural":"%s","singular":"%s","kind":"Deep","listKind":"DeepList"},"versions":[`,
		name, group, group, name, strings.TrimSuffix(name, "s"))
	for i, s := range schemas {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"v%d","served":true,"storage":%t,"schema":{"openAPIV3Schema":%s}}`, i+1, i == 0, s)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

func depthMessage(name, errs string) string {
	return fmt.Sprintf(`CustomResourceDefinition.apiextensions.k8s.io "%s.deep.example.com" is invalid: %s`, name, errs)
}

func depthError(path string, depth int) string {
	return fmt.Sprintf("%s: Forbidden: must not nest schemas more than 64 levels deep (found %d levels of properties, items, additionalProperties, allOf, anyOf, oneOf or not)", path, depth)
}

// allocated returns the bytes allocated by fn (an upper bound of the heap
// growth it causes) and how long it took.
func allocated(fn func()) (uint64, time.Duration) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	fn()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc, elapsed
}

// A CRD whose schema nests 4,900 levels (~170 KB: as deep as the JSON
// decoder's 10000 levels allow) is refused with a 422 naming the limit,
// before it is decoded: quickly and with little memory (decoding and
// validating it cost ~40 MiB in the registry; compiling it, hundreds of MiB
// in the gateway and validators).
func TestDeepSchemaRejected(t *testing.T) {
	body := deepCRD("deeps", deepSchema(4900))
	if len(body) < 170_000 {
		t.Fatalf("%d bytes", len(body))
	}
	want := depthMessage("deeps", depthError("spec.validation.openAPIV3Schema", 4900))

	var err error
	alloc, elapsed := allocated(func() { _, err = testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: body}) })
	t.Logf("Create of %d bytes: %v, %d KiB allocated", len(body), elapsed, alloc>>10)
	st := status(err)
	if st == nil || st.Code != 422 || st.Message != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.validation.openAPIV3Schema" {
		t.Errorf("causes %+v", st.Details.Causes)
	}
	// the gRPC round trip and the 422 included; the whole test process
	// (etcd too) counts, so the bound is loose
	if alloc > 50<<20 {
		t.Errorf("Create allocated %d MiB", alloc>>20)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Create took %v", elapsed)
	}

	// the registry's own part: well under 1 MiB, in a few milliseconds
	alloc, elapsed = allocated(func() { _, _, err = decodeCRD(body, fieldValidationStrict) })
	t.Logf("decodeCRD: %v, %d KiB allocated", elapsed, alloc>>10)
	if err == nil || err.Error() != want {
		t.Fatalf("decodeCRD: %v", err)
	}
	if alloc > 1<<20 {
		t.Errorf("decodeCRD allocated %d KiB", alloc>>10)
	}
}

// The depth error's paths: spec.validation when every version has the same
// schema (upstream's internal form), else each version's; 64 levels pass.
func TestSchemaDepthLimit(t *testing.T) {
	ok, deep, deeper := deepSchema(64), deepSchema(65), deepSchema(100)
	for _, tc := range []struct {
		name    string
		schemas []string
		want    string
	}{
		{"at the limit", []string{ok}, ""},
		{"at the limit, two versions", []string{ok, ok}, ""},
		{"one over", []string{deep}, depthError("spec.validation.openAPIV3Schema", 65)},
		{"shared", []string{deeper, deeper}, depthError("spec.validation.openAPIV3Schema", 100)},
		{"second version", []string{ok, deep}, depthError("spec.versions[1].schema.openAPIV3Schema", 65)},
		{"two versions", []string{deeper, ok, deep}, "[" + depthError("spec.versions[0].schema.openAPIV3Schema", 100) + ", " +
			depthError("spec.versions[2].schema.openAPIV3Schema", 65) + "]"},
		{"items", []string{strings.Repeat(`{"type":"array","items":`, 70) + `{"type":"string"}` + strings.Repeat(`}`, 70)},
			depthError("spec.validation.openAPIV3Schema", 70)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := deepCRD("deeps", tc.schemas...)
			want := ""
			if tc.want != "" {
				want = depthMessage("deeps", tc.want)
			}
			// before decoding
			_, _, err := decodeCRD(body, fieldValidationStrict)
			if got := errString(err); got != want {
				t.Errorf("decodeCRD:\n got %s\nwant %s", got, want)
			}
			// and the same rule after decoding
			var crd CRD
			if err := json.Unmarshal(body, &crd); err != nil {
				t.Fatal(err)
			}
			scheme.Default(&crd)
			if err := prepareForCreate(&crd); err != nil {
				t.Fatal(err)
			}
			if got := errString(validateCRDCreate(context.Background(), &crd)); got != want {
				t.Errorf("validation:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The validator's ValidateCRD (which compiles the schema) is not asked about
// a schema the registry refuses.
func TestDeepSchemaNotSentToValidator(t *testing.T) {
	var crd CRD
	if err := json.Unmarshal(deepCRD("deeps", deepSchema(4900)), &crd); err != nil {
		t.Fatal(err)
	}
	scheme.Default(&crd)
	if err := prepareForCreate(&crd); err != nil {
		t.Fatal(err)
	}
	f := &fakeValidator{resp: celResponse()}
	_, err := validateCRDWithWarnings(context.Background(), validatorChecks{client: f}, &crd, nil)
	if want := depthMessage("deeps", depthError("spec.validation.openAPIV3Schema", 4900)); errString(err) != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if len(f.calls) != 0 {
		t.Errorf("ValidateCRD called %d times", len(f.calls))
	}
}

// Updates and patches (merge, JSON, strategic merge) that make a schema too
// deep are refused the same way.
func TestDeepSchemaUpdateAndPatch(t *testing.T) {
	ctx := testCtx(t)
	name := fmt.Sprintf("deep%ds", groupSeq.Add(1))
	created := createT(t, deepCRD(name, deepSchema(3)))
	want := depthMessage(name, depthError("spec.validation.openAPIV3Schema", 65))

	var obj map[string]any
	raw, _ := json.Marshal(created)
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	var deep any
	if err := json.Unmarshal([]byte(deepSchema(65)), &deep); err != nil {
		t.Fatal(err)
	}
	versions := spec(obj)["versions"].([]any)
	versions[0].(map[string]any)["schema"] = map[string]any{"openAPIV3Schema": deep}
	updated, _ := json.Marshal(obj)
	_, err := testRegistry.Update(ctx, &registryv1.UpdateRequest{Name: created.Name, Object: updated})
	if st := status(err); st == nil || st.Message != want {
		t.Errorf("update: %v", err)
	}

	deepVersions, _ := json.Marshal(versions)
	for pt, patch := range map[string]string{
		"application/merge-patch+json":           `{"spec":{"versions":` + string(deepVersions) + `}}`,
		"application/json-patch+json":            `[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema","value":` + deepSchema(65) + `}]`,
		"application/strategic-merge-patch+json": `{"spec":{"versions":[{"name":"v1","schema":{"openAPIV3Schema":` + deepSchema(65) + `}}]}}`,
	} {
		_, err := testRegistry.Patch(ctx, &registryv1.PatchRequest{Name: created.Name, PatchType: pt, Patch: []byte(patch)})
		if st := status(err); st == nil || st.Message != want {
			t.Errorf("%s: %v", pt, err)
		}
	}
	if got := getT(t, created.Name); got.Generation != created.Generation {
		t.Errorf("the CRD's spec changed: generation %d → %d", created.Generation, got.Generation)
	}
}

// Real CRDs stay well within the limits and valid: prometheus-operator's
// (the largest in common use, the Prometheus CRD ~768 KB) and
// cert-manager's (the deepest: ClusterIssuer nests 18 levels), from the Go
// module cache when it has them, and those of $CRDPLANE_REAL_CRDS (a
// directory of manifests). Their compiled-size estimates stay below a
// quarter of the bound.
func TestRealCRDsWithinLimits(t *testing.T) {
	mod := os.Getenv("GOMODCACHE")
	if mod == "" {
		mod = filepath.Join(build.Default.GOPATH, "pkg", "mod")
	}
	dirs := []string{
		filepath.Join(mod, "github.com/prometheus-operator/prometheus-operator@v0.85.0/example/prometheus-operator-crd"),
		filepath.Join(mod, "github.com/cert-manager/cert-manager@v1.21.2/deploy/crds"),
	}
	// more CRDs (e.g. Gateway API's and kyverno's) from a directory
	if dir := os.Getenv("CRDPLANE_REAL_CRDS"); dir != "" {
		dirs = append(dirs, dir)
	}
	seen := 0
	deepest := 0
	var largest int64
	largestName := ""
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			for {
				doc, err := r.Read()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				body, err := utilyaml.ToJSON(doc)
				if err != nil || !bytes.Contains(body, []byte(`"CustomResourceDefinition"`)) {
					continue
				}
				seen++
				versions, ok := crdlimits.VersionSchemaDepths(body)
				if !ok {
					t.Errorf("%s: not scanned", f)
				}
				for _, v := range versions {
					deepest = max(deepest, v.Depth)
				}
				crd, _, err := decodeCRD(body, fieldValidationStrict)
				if err != nil {
					t.Errorf("%s: %v", f, err)
					continue
				}
				if err := prepareForCreate(crd); err != nil {
					t.Fatal(err)
				}
				if err := validateCRDCreate(context.Background(), crd); err != nil {
					t.Errorf("%s: %v", f, err)
				}
				est := crdlimits.EstimateCompiledSize(crd).Total()
				t.Logf("%-55s %8d bytes of JSON, %d versions, estimate %9d", crd.Name, len(body), len(crd.Spec.Versions), est)
				if est > largest {
					largest, largestName = est, crd.Name
				}
			}
		}
	}
	if seen == 0 {
		t.Skip("the operators' modules are not in the module cache")
	}
	t.Logf("%d CRDs, the deepest schema nests %d levels, the largest (%s) estimates at %d bytes compiled", seen, deepest, largestName, largest)
	if largest > crdlimits.MaxCompiledBytes/4 {
		t.Errorf("%s estimates at %d bytes compiled: the limit (%d) leaves too little room", largestName, largest, crdlimits.MaxCompiledBytes)
	}
	if deepest > crdlimits.MaxSchemaDepth/2 {
		t.Errorf("a real CRD nests %d levels: the limit (%d) leaves too little room", deepest, crdlimits.MaxSchemaDepth)
	}
}
