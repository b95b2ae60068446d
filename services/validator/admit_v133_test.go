package validator

import (
	"context"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/crdplane/crdplane/pkg/kstatus"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

var pointerRE = regexp.MustCompile(`\(0x[0-9a-f]+\)`)

// TestAdmitV133 admits objects where the v0.37 libraries this module
// builds with answer differently from upstream v1.33 (the specification):
// the causes (or the error) are v1.33's, as kube-apiserver v1.33 answered
// the conformance cases named.
func TestAdmitV133(t *testing.T) {
	svc, err := New(context.Background(), Config{CRDDir: "testdata/v133", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	client := serve(t, svc)

	const meta = `"apiVersion":"v133.example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"`
	const stored = `"apiVersion":"v133.example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","uid":"u1","resourceVersion":"3","generation":1,"creationTimestamp":"2024-05-31T12:56:35Z"`
	const namePart = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	cases := []struct {
		name     string
		obj, old string // JSON, as the gateway sends it
		want     []cause
		err      string // a request error's message instead
	}{
		{name: "int32 format stripped (200-schema-keywords#16)",
			obj: `{` + meta + `},"spec":{"i32":2147483648}}`},
		{name: "float format stripped (200-schema-keywords#17)",
			obj: `{` + meta + `},"spec":{"f32":1e300}}`},
		{name: "unknown string format ignored", obj: `{` + meta + `},"spec":{"odd":"anything"}}`},
		{name: "integer given 1.5: one cause (200-schema-keywords#7)",
			obj:  `{` + meta + `},"spec":{"int":1.5}}`,
			want: []cause{{"FieldValueTypeInvalid", "spec.int", `Invalid value: "number": spec.int in body must be of type integer: "number"`}}},
		{name: "integer beyond int64: one cause (200-schema-keywords#10)",
			obj:  `{` + meta + `},"spec":{"int":9223372036854775808}}`,
			want: []cause{{"FieldValueTypeInvalid", "spec.int", `Invalid value: "number": spec.int in body must be of type integer: "number"`}}},
		{name: "set of numbers: 1 and 1.0 differ (230-list-types#6)",
			obj:  `{` + meta + `},"spec":{"setNum":[1,1.0,2.5,2.5]}}`,
			want: []cause{{"FieldValueDuplicate", "spec.setNum[3]", `Duplicate value: 2.5`}}},
		{name: "embedded metadata that does not decode (210-embedded-preserve#17)",
			obj: `{` + meta + `},"spec":{"emb":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","labels":{"a":1}}}}}`,
			err: `Widget in version "v1" cannot be handled as a Widget: spec.emb.metadata: Invalid value: map[string]interface {}{"labels":map[string]interface {}{"a":1}, "name":"ok"}: json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string`},
		{name: "label value of 64 characters (240-cr-metadata#19)",
			obj:  `{` + meta + `,"labels":{"k":"` + strings.Repeat("v", 64) + `"}}}`,
			want: []cause{{"FieldValueInvalid", "metadata.labels", `Invalid value: "` + strings.Repeat("v", 64) + `": must be no more than 63 characters`}}},
		{name: "label key c/d/e (240-cr-metadata#23)",
			obj:  `{` + meta + `,"labels":{"c/d/e":"x"}}}`,
			want: []cause{{"FieldValueInvalid", "metadata.labels", `Invalid value: "c/d/e": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`}}},
		{name: "owner reference without kind, name, uid (240-cr-metadata#27)",
			obj: `{` + meta + `,"ownerReferences":[{"apiVersion":"v1"}]}}`,
			want: []cause{
				{"FieldValueInvalid", "metadata.ownerReferences.kind", `Invalid value: "": kind must not be empty`},
				{"FieldValueInvalid", "metadata.ownerReferences.name", `Invalid value: "": name must not be empty`},
				{"FieldValueInvalid", "metadata.ownerReferences.uid", `Invalid value: "": uid must not be empty`},
			}},
		{name: "two controllers, once (240-cr-metadata#28)",
			obj:  `{` + meta + `,"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"1","controller":true},{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"2","controller":true}]}}`,
			want: []cause{{"FieldValueInvalid", "metadata.ownerReferences", `Invalid value: []v1.OwnerReference{v1.OwnerReference{APIVersion:"v1", Kind:"ConfigMap", Name:"a", UID:"1", Controller:(*bool)(<pointer>), BlockOwnerDeletion:(*bool)(nil)}, v1.OwnerReference{APIVersion:"v1", Kind:"ConfigMap", Name:"b", UID:"2", Controller:(*bool)(<pointer>), BlockOwnerDeletion:(*bool)(nil)}}: Only one reference can have Controller set to true. Found "true" in references for ConfigMap/a and ConfigMap/b`}}},
		{name: "update: the strategy's metadata errors (the gateway adds rest.BeforeUpdate's)",
			old: `{` + stored + `},"spec":{}}`,
			obj: `{` + strings.Replace(stored, `"resourceVersion":"3",`, ``, 1) + `,"annotations":{"@":""}},"spec":{}}`,
			want: []cause{
				{"FieldValueInvalid", "metadata.resourceVersion", `Invalid value: "": must be specified for an update`},
				{"FieldValueInvalid", "metadata.annotations", `Invalid value: "@": ` + namePart},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: "widgets.v133.example.com"}, Version: "v1",
				Operation: validatorv1.Operation_OPERATION_CREATE, Object: []byte(tc.obj)}
			if tc.old != "" {
				req.Operation, req.OldObject = validatorv1.Operation_OPERATION_UPDATE, []byte(tc.old)
			}
			resp, err := client.Admit(context.Background(), req)
			if tc.err != "" {
				st := kstatus.FromError(err)
				if err == nil || st.Message != tc.err {
					t.Fatalf("error %v (%s)\nwant %s", err, status.Convert(err).Message(), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := causesOf(resp)
			for i := range got {
				got[i].Message = pointerRE.ReplaceAllString(got[i].Message, "(<pointer>)")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("causes:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
