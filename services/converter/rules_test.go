package converter

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"
)

// celCRD is examples/crontab-cel-conversion's CRD: the versions tutorial's
// CronTab (v1beta1 hostPort, v1 host and port) with CEL conversion rules.
func celCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile("../../examples/crontab-cel-conversion/crontab-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	crd.UID, crd.ResourceVersion = "uid-1", "1"
	return crd
}

func TestConvertObjectsWithRules(t *testing.T) {
	local := `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"local-crontab","namespace":"default"},"hostPort":"localhost:1234"}`
	remote := `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"remote-crontab"},"host":"example.com","port":"2345"}`
	tests := []struct {
		name     string
		desired  string
		in       []string
		want     []string
		wantCode int32
		wantMsg  string
	}{
		{"to v1", "example.com/v1", []string{local, remote},
			[]string{`{"apiVersion":"example.com/v1","host":"localhost","hostPort":"localhost:1234","kind":"CronTab","metadata":{"name":"local-crontab","namespace":"default"},"port":"1234"}`, remote}, 0, ""},
		{"to v1beta1", "example.com/v1beta1", []string{local, remote},
			[]string{local, `{"apiVersion":"example.com/v1beta1","host":"example.com","hostPort":"example.com:2345","kind":"CronTab","metadata":{"name":"remote-crontab"},"port":"2345"}`}, 0, ""},
		{"expression fails", "example.com/v1", []string{local, `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"x"},"hostPort":"nocolon"}`},
			nil, 500, "conversion rules for example.com/v1beta1, Kind=CronTab failed: host: "},
		{"not JSON", "example.com/v1", []string{`{`}, nil, 400, ""},
	}
	cache := NewRuleCache()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([][]byte, len(tt.in))
			for i, s := range tt.in {
				objs[i] = []byte(s)
			}
			out, err := ConvertObjects(context.Background(), nil, cache, celCRD(t), tt.desired, objs)
			if tt.wantCode != 0 {
				se, ok := err.(*apierrors.StatusError)
				if !ok || se.ErrStatus.Code != tt.wantCode || se.ErrStatus.Reason != "" && tt.wantCode == 500 {
					t.Fatalf("want %d, got %#v", tt.wantCode, err)
				}
				if len(se.ErrStatus.Message) < len(tt.wantMsg) || se.ErrStatus.Message[:len(tt.wantMsg)] != tt.wantMsg {
					t.Fatalf("message %q, want prefix %q", se.ErrStatus.Message, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range out {
				var got, want any
				if err := json.Unmarshal(out[i], &got); err != nil {
					t.Fatal(err)
				}
				_ = json.Unmarshal([]byte(tt.want[i]), &want)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("object %d: got %s, want %s", i, out[i], tt.want[i])
				}
			}
		})
	}
	if n := len(cache.rules); n != 1 {
		t.Fatalf("%d compiled rule sets, want 1 (compiled once per CRD resourceVersion)", n)
	}
}

// A CRD whose stored rules no longer compile (written before the
// validator checked them) fails conversions with a 500, never converts
// with half its rules.
func TestConvertObjectsBadStoredRules(t *testing.T) {
	crd := celCRD(t)
	crd.Annotations["conversion.crdplane.dev/rules"] = `[{from: v1beta1, to: v1, fields: [{path: host, expression: "self.nope"}]}]`
	_, err := ConvertObjects(context.Background(), nil, NewRuleCache(), crd, "example.com/v1", [][]byte{[]byte(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"}}`)})
	if se, ok := err.(*apierrors.StatusError); !ok || se.ErrStatus.Code != 500 {
		t.Fatalf("got %v", err)
	}
}

// BenchmarkConvertObjectsWithRules is the converter's CEL path for one
// object (decode, three expressions, encode); bench/'s
// BenchmarkCELConversion compares it with a webhook doing the same.
func BenchmarkConvertObjectsWithRules(b *testing.B) {
	crd := celCRD(b)
	cache := NewRuleCache()
	objs := [][]byte{[]byte(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"local-crontab","namespace":"default","labels":{"app":"bench"}},"hostPort":"localhost:1234","spec":{"cronSpec":"* * * * */5","replicas":5}}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ConvertObjects(context.Background(), nil, cache, crd, "example.com/v1", objs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConvertObjectsRulesRuntimeLimits: a rule whose estimated cost passes
// the CRD write check but whose evaluation exceeds the per-call cost limit
// on a large object fails the conversion (a plain 500, no object), and a
// rule reading a field the object does not have leaves its target unset.
func TestConvertObjectsRulesRuntimeLimits(t *testing.T) {
	crd := celCRD(t)
	beta := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	beta.Properties["items"] = apiextensionsv1.JSONSchemaProps{Type: "array", MaxItems: ptr(int64(700)),
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr(int64(4))}}}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = beta
	crd.Annotations["conversion.crdplane.dev/rules"] = `[{from: v1beta1, to: v1, fields: [
  {path: spec.cronSpec, expression: "self.spec.items.map(a, self.spec.items.map(b, a + b)).size() > 0 ? 'many' : 'none'"},
  {path: host, expression: "self.hostPort.substring(0, self.hostPort.lastIndexOf(':'))"}]}]`
	cache := NewRuleCache()

	items := make([]string, 700)
	for i := range items {
		items[i] = "ab"
	}
	big, _ := json.Marshal(map[string]any{"apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": map[string]any{"name": "big"},
		"hostPort": "h:1", "spec": map[string]any{"items": items}})
	out, err := ConvertObjects(context.Background(), nil, cache, crd, "example.com/v1", [][]byte{big})
	se, ok := err.(*apierrors.StatusError)
	const want = "conversion rules for example.com/v1beta1, Kind=CronTab failed: spec.cronSpec: operation cancelled: actual cost limit exceeded"
	if !ok || se.ErrStatus.Code != 500 || se.ErrStatus.Reason != "" || se.ErrStatus.Message != want || out != nil {
		t.Fatalf("got %v, %v\nwant 500 %q", out, err, want)
	}

	// No hostPort: host is left unset, the rest converts.
	small := []byte(`{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"small"},"spec":{"items":["a","b"]}}`)
	out, err = ConvertObjects(context.Background(), nil, cache, crd, "example.com/v1", [][]byte{small})
	if err != nil {
		t.Fatal(err)
	}
	const wantObj = `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"small"},"spec":{"cronSpec":"many","items":["a","b"]}}`
	if string(out[0]) != wantObj {
		t.Fatalf("got  %s\nwant %s", out[0], wantObj)
	}
}

func ptr[T any](v T) *T { return &v }
