package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/crdplane/crdplane/pkg/crdlimits"
	"github.com/crdplane/crdplane/pkg/crdlimits/crdgen"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// estimate is the compiled-size estimate of a CRD body, decoded and
// defaulted as the registry does.
func estimate(t *testing.T, body []byte) int64 {
	t.Helper()
	crd, _, err := decodeCRD(body, fieldValidationStrict)
	if err != nil {
		t.Fatal(err)
	}
	return crdlimits.EstimateCompiledSize(crd).Total()
}

// atLimit returns the shape with the most strings (versions and rules as
// given) whose estimate stays within crdlimits.MaxCompiledBytes. The
// estimate grows linearly with strings of names of one length (s10000 to
// s99999): two points give the answer, which the next string crosses.
func atLimit(t *testing.T, s crdgen.Shape) crdgen.Shape {
	t.Helper()
	est := func(n int) int64 {
		s.Strings = n
		crd := &CRD{}
		if err := json.Unmarshal(s.JSON(), crd); err != nil {
			t.Fatal(err)
		}
		return crdlimits.EstimateCompiledSize(crd).Total()
	}
	a, b := est(10000), est(11000)
	n := 10000 + int((crdlimits.MaxCompiledBytes-a)*1000/(b-a))
	if n >= 100000 || est(n) > crdlimits.MaxCompiledBytes || est(n+1) <= crdlimits.MaxCompiledBytes {
		t.Fatalf("%d strings: not at the limit", n)
	}
	s.Strings = n
	return s
}

// A CRD whose estimated compiled size exceeds the bound is refused with a
// 422 at its schema's path, before the validator compiles anything; one
// at the bound is created.
func TestCompiledSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape crdgen.Shape
		path  string
	}{
		{"one version", crdgen.Shape{}, "spec.validation.openAPIV3Schema"},
		{"shared schema", crdgen.Shape{Versions: 3}, "spec.validation.openAPIV3Schema"},
		{"distinct schemas", crdgen.Shape{Versions: 2, Distinct: true}, "spec.versions[0].schema.openAPIV3Schema"},
		{"rules", crdgen.Shape{Rules: 2000}, "spec.validation.openAPIV3Schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := atLimit(t, tc.shape)
			ok.Name = fmt.Sprintf("big%ds", groupSeq.Add(1))
			over := ok
			over.Strings++
			body := over.JSON()
			total := estimate(t, body)
			versions := max(1, tc.shape.Versions)
			unit := "versions"
			if versions == 1 {
				unit = "version"
			}
			want := fmt.Sprintf(`CustomResourceDefinition.apiextensions.k8s.io "%s.gen.example.com" is invalid: %s: Forbidden: must have at most 67108864 bytes of estimated compiled size (found %d bytes in %d %s; try fewer properties, x-kubernetes-validations rules, patterns or versions)`,
				ok.Name, tc.path, total, versions, unit)
			_, err := testRegistry.Create(testCtx(t), &registryv1.CreateRequest{Object: body})
			st := status(err)
			if st.Code != 422 || st.Reason != "Invalid" || st.Message != want {
				t.Fatalf("%d bytes: got %d %s %q\nwant 422 %q", len(body), st.Code, st.Reason, st.Message, want)
			}
			if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tc.path || st.Details.Causes[0].Type != "FieldValueForbidden" {
				t.Errorf("causes %+v", st.Details)
			}
			if tc.name != "one version" {
				// at the limit: valid (created once below, as it costs
				// the registry's controllers seconds of CPU)
				crd := &CRD{}
				if err := json.Unmarshal(ok.JSON(), crd); err != nil {
					t.Fatal(err)
				}
				scheme.Default(crd)
				if err := prepareForCreate(crd); err != nil {
					t.Fatal(err)
				}
				if err := validateCRDCreate(context.Background(), crd); err != nil {
					t.Errorf("at the limit: %v", err)
				}
				return
			}
			if got := createT(t, ok.JSON()); got.Name != ok.Name+".gen.example.com" {
				t.Errorf("created %s", got.Name)
			}
			t.Logf("%s: %d strings, %d bytes of JSON, estimate %d: created; one more string: refused", tc.name, ok.Strings, len(ok.JSON()), estimate(t, ok.JSON()))

			// an update that takes a small CRD over the bound is refused too
			small := over
			small.Name, small.Strings = fmt.Sprintf("big%ds", groupSeq.Add(1)), 10
			created := createT(t, small.JSON())
			grown := over
			grown.Name = small.Name
			var obj map[string]any
			if err := json.Unmarshal(grown.JSON(), &obj); err != nil {
				t.Fatal(err)
			}
			obj["metadata"].(map[string]any)["resourceVersion"] = created.ResourceVersion
			raw, _ := json.Marshal(obj)
			_, err = testRegistry.Update(testCtx(t), &registryv1.UpdateRequest{Name: created.Name, Object: raw})
			if st := status(err); st.Code != 422 || st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tc.path {
				t.Errorf("update: %v", err)
			}
			if got := getT(t, created.Name); got.Generation != created.Generation {
				t.Errorf("the CRD's spec changed: generation %d → %d", created.Generation, got.Generation)
			}
		})
	}
}

// On update, a CRD already over the bound (stored by an earlier release
// with other weights, or by kube-apiserver) stays writable as long as its
// estimate does not grow.
func TestCompiledSizeRatchet(t *testing.T) {
	decode := func(s crdgen.Shape) *CRD {
		crd := &CRD{}
		if err := json.Unmarshal(s.JSON(), crd); err != nil {
			t.Fatal(err)
		}
		scheme.Default(crd)
		return crd
	}
	ok := atLimit(t, crdgen.Shape{})
	over := ok
	over.Strings += 100
	bigger := over
	bigger.Strings += 100
	smaller := over
	smaller.Strings -= 50
	oldCRD := decode(over)
	for _, tc := range []struct {
		name string
		new  crdgen.Shape
		old  *CRD
		errs int
	}{
		{"create over", over, nil, 1},
		{"create at the limit", ok, nil, 0},
		{"unchanged", over, oldCRD, 0},
		{"smaller but still over", smaller, oldCRD, 0},
		{"bigger", bigger, oldCRD, 1},
	} {
		crd := decode(tc.new)
		in, err := toInternal(crd)
		if err != nil {
			t.Fatal(err)
		}
		if errs := validateCompiledSize(crd, tc.old, in); len(errs) != tc.errs {
			t.Errorf("%s: %v", tc.name, errs)
		}
	}
}
