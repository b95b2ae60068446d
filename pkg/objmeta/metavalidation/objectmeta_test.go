package metavalidation

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
)

// The expected texts are upstream v1.33's (kube-apiserver's answers to
// the conformance cases 240-cr-metadata and 310/360, and
// k8s.io/apimachinery v0.33's sources), rendered by fielderr as v1.33
// renders them; pointers' addresses read <pointer>.

var pointer = regexp.MustCompile(`\(0x[0-9a-f]+\)`)

func texts(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, pointer.ReplaceAllString(fielderr.Error(e), "(<pointer>)"))
	}
	return out
}

const (
	qualifiedNameMsg = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
	namePartMsg      = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	labelValueMsg    = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
	subdomainMsg     = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	labelMsg         = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

func TestValidateObjectMetaAccessor(t *testing.T) {
	yes := true
	cases := []struct {
		name       string
		meta       metav1.ObjectMeta
		namespaced bool
		nameFn     ValidateNameFunc
		want       []string
	}{
		{name: "valid", meta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{"a": "b"}}, namespaced: true},
		{name: "label value of 64 characters (240-cr-metadata#19)",
			meta: metav1.ObjectMeta{Name: "l3", Namespace: "default", Labels: map[string]string{"k": strings.Repeat("v", 64)}}, namespaced: true,
			want: []string{`metadata.labels: Invalid value: "` + strings.Repeat("v", 64) + `": must be no more than 63 characters`}},
		{name: "label keys -a, c/d/e and value -v- (240-cr-metadata#23)",
			meta: metav1.ObjectMeta{Name: "l7", Labels: map[string]string{"c/d/e": "x"}},
			want: []string{`metadata.labels: Invalid value: "c/d/e": ` + qualifiedNameMsg}},
		{name: "label key and value",
			meta: metav1.ObjectMeta{Name: "l7", Labels: map[string]string{"-a": "-v-"}},
			want: []string{`metadata.labels: Invalid value: "-a": ` + namePartMsg, `metadata.labels: Invalid value: "-v-": ` + labelValueMsg}},
		{name: "label key name part too long",
			meta: metav1.ObjectMeta{Name: "l", Labels: map[string]string{strings.Repeat("k", 64): ""}},
			want: []string{`metadata.labels: Invalid value: "` + strings.Repeat("k", 64) + `": name part must be no more than 63 characters`}},
		{name: "label key with an empty prefix",
			meta: metav1.ObjectMeta{Name: "l", Labels: map[string]string{"/k": ""}},
			want: []string{`metadata.labels: Invalid value: "/k": prefix part must be non-empty`}},
		{name: "annotation key",
			meta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"@": ""}},
			want: []string{`metadata.annotations: Invalid value: "@": ` + namePartMsg}},
		{name: "annotations too large",
			meta: metav1.ObjectMeta{Name: "a", Annotations: map[string]string{"k": strings.Repeat("v", TotalAnnotationSizeLimitB)}},
			want: []string{`metadata.annotations: Too long: may not be more than 262144 bytes`}},
		{name: "owner reference without kind, name and uid (240-cr-metadata#27)",
			meta: metav1.ObjectMeta{Name: "o1", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1"}}},
			want: []string{
				`metadata.ownerReferences.kind: Invalid value: "": kind must not be empty`,
				`metadata.ownerReferences.name: Invalid value: "": name must not be empty`,
				`metadata.ownerReferences.uid: Invalid value: "": uid must not be empty`,
			}},
		{name: "owner reference without version",
			meta: metav1.ObjectMeta{Name: "o", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/", Kind: "K", Name: "n", UID: "u"}}},
			want: []string{`metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty`}},
		{name: "an Event as owner",
			meta: metav1.ObjectMeta{Name: "o", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Event", Name: "n", UID: "u"}}},
			want: []string{`metadata.ownerReferences: Invalid value: v1.OwnerReference{APIVersion:"v1", Kind:"Event", Name:"n", UID:"u", Controller:(*bool)(nil), BlockOwnerDeletion:(*bool)(nil)}: /v1, Kind=Event is disallowed from being an owner`}},
		{name: "two controller owner references (240-cr-metadata#28)",
			meta: metav1.ObjectMeta{Name: "o2", OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: types.UID("11111111-1111-1111-1111-111111111111"), Controller: &yes},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "b", UID: types.UID("22222222-2222-2222-2222-222222222222"), Controller: &yes},
			}},
			want: []string{`metadata.ownerReferences: Invalid value: []v1.OwnerReference{v1.OwnerReference{APIVersion:"v1", Kind:"ConfigMap", Name:"a", UID:"11111111-1111-1111-1111-111111111111", Controller:(*bool)(<pointer>), BlockOwnerDeletion:(*bool)(nil)}, v1.OwnerReference{APIVersion:"v1", Kind:"ConfigMap", Name:"b", UID:"22222222-2222-2222-2222-222222222222", Controller:(*bool)(<pointer>), BlockOwnerDeletion:(*bool)(nil)}}: Only one reference can have Controller set to true. Found "true" in references for ConfigMap/a and ConfigMap/b`}},
		{name: "finalizers",
			meta: metav1.ObjectMeta{Name: "f", Finalizers: []string{"a/b/c", metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}},
			want: []string{
				`metadata.finalizers: Invalid value: "a/b/c": ` + qualifiedNameMsg,
				`metadata.finalizers: Invalid value: []string{"a/b/c", "orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion cannot be both set`,
			}},
		{name: "name, generateName, namespace",
			meta: metav1.ObjectMeta{GenerateName: "x_", Namespace: "NS", Generation: -1}, namespaced: true,
			want: []string{
				`metadata.generateName: Invalid value: "x_": ` + subdomainMsg,
				`metadata.name: Required value: name or generateName is required`,
				`metadata.namespace: Invalid value: "NS": ` + labelMsg,
				`metadata.generation: Invalid value: -1: must be greater than or equal to 0`,
			}},
		{name: "missing namespace", meta: metav1.ObjectMeta{Name: "a"}, namespaced: true,
			want: []string{`metadata.namespace: Required value`}},
		{name: "namespace of a cluster-scoped object", meta: metav1.ObjectMeta{Name: "a", Namespace: "x"},
			want: []string{`metadata.namespace: Forbidden: not allowed on this type`}},
		{name: "long name", meta: metav1.ObjectMeta{Name: strings.Repeat("n", 254)},
			want: []string{`metadata.name: Invalid value: "` + strings.Repeat("n", 254) + `": must be no more than 253 characters`}},
		{name: "namespace with dots", meta: metav1.ObjectMeta{Name: "a", Namespace: "a.b"}, namespaced: true,
			want: []string{`metadata.namespace: Invalid value: "a.b": must not contain dots`}},
		{name: "path segment names", meta: metav1.ObjectMeta{Name: "..", GenerateName: "a/b%"}, nameFn: ValidatePathSegmentName,
			want: []string{`metadata.generateName: Invalid value: "a/b%": may not contain '/'`, `metadata.generateName: Invalid value: "a/b%": may not contain '%'`, `metadata.name: Invalid value: "..": may not be '..'`}},
		{name: "generateName with a trailing dash", meta: metav1.ObjectMeta{Name: "a", GenerateName: "a-"}},
		{name: "managed fields",
			meta: metav1.ObjectMeta{Name: "m", ManagedFields: []metav1.ManagedFieldsEntry{
				{Operation: "Patch", FieldsType: "FieldsV2", Manager: "m\x01", Subresource: strings.Repeat("s", 257)},
			}},
			want: []string{
				"metadata.managedFields[0].operation: Invalid value: \"Patch\": must be `Apply` or `Update`",
				"metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
				`metadata.managedFields[0].manager: Invalid value: "m\x01": invalid character U+0001 (at position 1)`,
				`metadata.managedFields[0].subresource: Too long: may not be more than 256 bytes`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nameFn := tc.nameFn
			if nameFn == nil {
				nameFn = NameIsDNSSubdomain
			}
			got := texts(ValidateObjectMetaAccessor(&tc.meta, tc.namespaced, nameFn, field.NewPath("metadata")))
			if !reflect.DeepEqual(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestValidateObjectMetaAccessorUpdate(t *testing.T) {
	now := metav1.Now()
	old := metav1.ObjectMeta{Name: "n", Namespace: "default", UID: "u1", ResourceVersion: "5", Generation: 2,
		CreationTimestamp: now, Finalizers: []string{"example.com/hold"}}
	deleting := old
	deleting.DeletionTimestamp = &now
	cases := []struct {
		name string
		meta metav1.ObjectMeta
		old  metav1.ObjectMeta
		want []string
	}{
		{name: "valid", meta: old, old: old},
		{name: "no resourceVersion", meta: func() metav1.ObjectMeta { m := old; m.ResourceVersion = ""; return m }(), old: old,
			want: []string{`metadata.resourceVersion: Invalid value: "": must be specified for an update`}},
		{name: "uid changed", meta: func() metav1.ObjectMeta { m := old; m.UID = "u2"; return m }(), old: old,
			want: []string{`metadata.uid: Invalid value: "u2": field is immutable`}},
		{name: "name, namespace and generation", meta: func() metav1.ObjectMeta {
			m := old
			m.Name, m.Namespace, m.Generation = "m", "other", 1
			return m
		}(), old: old,
			want: []string{
				`metadata.generation: Invalid value: 1: must not be decremented`,
				`metadata.name: Invalid value: "m": field is immutable`,
				`metadata.namespace: Invalid value: "other": field is immutable`,
			}},
		{name: "a finalizer added while deleting", meta: func() metav1.ObjectMeta {
			m := deleting
			m.Finalizers = []string{"example.com/hold", "example.com/another"}
			return m
		}(), old: deleting,
			want: []string{`metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/another"}`}},
		{name: "labels and annotations", meta: func() metav1.ObjectMeta {
			m := old
			m.Labels = map[string]string{"x y": ""}
			m.Annotations = map[string]string{"@": ""}
			return m
		}(), old: old,
			want: []string{
				`metadata.labels: Invalid value: "x y": ` + namePartMsg,
				`metadata.annotations: Invalid value: "@": ` + namePartMsg,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := texts(ValidateObjectMetaAccessorUpdate(&tc.meta, &tc.old, field.NewPath("metadata")))
			if !reflect.DeepEqual(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestStringChecks(t *testing.T) {
	cases := []struct {
		fn    func(string) []string
		value string
		want  []string
	}{
		{IsQualifiedName, "a/b/c", []string{qualifiedNameMsg}},
		{IsQualifiedName, "example.com/x", nil},
		{IsQualifiedName, "Example.com/x", []string{"prefix part " + subdomainMsg}},
		{IsQualifiedName, "", []string{"name part must be non-empty", namePartMsg}},
		{IsValidLabelValue, strings.Repeat("v", 64), []string{"must be no more than 63 characters"}},
		{IsValidLabelValue, "", nil},
		{IsDNS1123Label, strings.Repeat("a", 64), []string{"must be no more than 63 characters"}},
		{IsDNS1123Subdomain, "a_b", []string{subdomainMsg}},
		{IsDNS1035Label, "1a", []string{"a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"}},
		{IsDNS1035Label, strings.Repeat("a", 64), []string{"must be no more than 63 characters"}},
	}
	for _, tc := range cases {
		if got := tc.fn(tc.value); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got %q\nwant %q", tc.value, got, tc.want)
		}
	}
}

func TestV133Wording(t *testing.T) {
	cases := []struct{ in, want string }{
		{`unable to parse requirement: <nil>: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters`,
			`unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters`},
		{`values[0][a]: Invalid value: "vvv": must be no more than 63 bytes; a valid label must be`,
			`values[0][a]: Invalid value: "vvv": must be no more than 63 characters; a valid label must be`},
		{`name part must be no more than 63 bytes`, `name part must be no more than 63 characters`},
		{`nothing to change`, `nothing to change`},
	}
	for _, c := range cases {
		if got := V133Wording(c.in); got != c.want {
			t.Errorf("V133Wording(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
