package validator

// A differential test of Admit against upstream's decoder and strategies
// (k8s.io/apiextensions-apiserver, test-only).

import (
	"context"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/warning"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/upstreamv133"
	commonv1 "github.com/crdplane/crdplane/proto/crdplane/common/v1"
	validatorv1 "github.com/crdplane/crdplane/proto/crdplane/validator/v1"
)

type upstreamCRD struct {
	structural *structuralschema.Structural
	create     func(rec *warningRecorder, obj *unstructured.Unstructured) field.ErrorList
	update     func(rec *warningRecorder, obj, old *unstructured.Unstructured) field.ErrorList
	status     func(rec *warningRecorder, obj, old *unstructured.Unstructured) field.ErrorList
}

// warningRecorder collects the warnings upstream's strategies add to the
// request context (CEL failures excused by ratcheting).
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (r *warningRecorder) AddWarning(_, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, text)
}

const celCRD = "crontabs.cel.example.com"

const celSpec = "spec: {cronSpec: '*/5 * * * *', image: 'nginx:1.27', replicas: 2, maxReplicas: 5, env: [{name: TZ, value: UTC}], labels: {app: cron}}\n"

func celTab(rest string) string {
	return `apiVersion: cel.example.com/v1
kind: CronTab
metadata:
  name: nightly
  namespace: default
  uid: 6a0b1c2d-0000-4000-8000-000000000001
  creationTimestamp: "2024-05-31T12:56:35Z"
  generation: 1
  resourceVersion: "5"
` + rest
}

func newUpstreamCRD(t testing.TB, crd *CRD, version string) *upstreamCRD {
	t.Helper()
	v, err := findVersion(crd, version)
	if err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		t.Fatal(err)
	}
	validator, err := upstreamv133.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	var statusSpec *apiextensions.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	var scaleSpec *apiextensions.CustomResourceSubresourceScale
	if sub := v.Subresources; sub != nil {
		if sub.Status != nil {
			statusSpec = &apiextensions.CustomResourceSubresourceStatus{}
			if st, ok := internal.OpenAPIV3Schema.Properties["status"]; ok {
				if statusValidator, err = upstreamv133.NewSchemaValidator(&st); err != nil {
					t.Fatal(err)
				}
			}
		}
		if sub.Scale != nil {
			scaleSpec = &apiextensions.CustomResourceSubresourceScale{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(sub.Scale, scaleSpec, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind}
	strategy := customresource.NewStrategy(nil, crd.Spec.Scope == apiextensionsv1.NamespaceScoped, gvk,
		validator, statusValidator, s, statusSpec, scaleSpec, nil)
	statusStrategy := customresource.NewStatusStrategy(strategy)
	ctx := func(rec *warningRecorder) context.Context {
		return warning.WithWarningRecorder(genericapirequest.NewContext(), rec)
	}
	return &upstreamCRD{
		structural: s,
		create: func(rec *warningRecorder, obj *unstructured.Unstructured) field.ErrorList {
			return metaAsV133(embeddedV133(strategy.Validate(ctx(rec), obj), obj, s))
		},
		update: func(rec *warningRecorder, obj, old *unstructured.Unstructured) field.ErrorList {
			return metaAsV133(embeddedV133(strategy.ValidateUpdate(ctx(rec), obj, old), obj, s))
		},
		status: func(rec *warningRecorder, obj, old *unstructured.Unstructured) field.ErrorList {
			return metaAsV133(statusStrategy.ValidateUpdate(ctx(rec), obj, old))
		},
	}
}

// embeddedV133 words errs as upstream v1.33 does where the v0.37 library
// differs: a missing apiVersion or kind of an embedded resource is
// "Required value: must not be empty" (the library leaves the detail
// empty).
func embeddedV133(errs field.ErrorList, obj *unstructured.Unstructured, s *structuralschema.Structural) field.ErrorList {
	missing := map[string]bool{}
	for _, e := range schemaobjectmeta.Validate(context.Background(), nil, obj.Object, s, false) {
		if e.Type == field.ErrorTypeRequired && e.Detail == "" {
			missing[e.Field] = true
		}
	}
	for _, e := range errs {
		if e.Type == field.ErrorTypeRequired && e.Detail == "" && missing[e.Field] {
			e.Detail = "must not be empty"
		}
	}
	return errs
}

var (
	// maxLenBytes is v0.37's MaxLenError (v0.33: "characters").
	maxLenBytes = regexp.MustCompile(`must be no more than ([0-9]+) bytes`)
)

// metaAsV133 words the v0.37 library's errors as v1.33 where they differ:
// the number validator's range errors are dropped (v1.33's has no type or
// format, so reports none); a qualified name's (label or annotation key,
// finalizer) error reads "a qualified name must consist of ..." (v0.37: "a
// valid label key ..."), a too long string "must be no more than 63
// characters" (v0.37: "bytes").
func metaAsV133(errs field.ErrorList) field.ErrorList {
	out := errs[:0:0]
	for _, e := range errs {
		if upstreamv133.IsRangeError(e) {
			continue
		}
		e.Detail = strings.ReplaceAll(e.Detail, "a valid label key must consist of", "a qualified name must consist of")
		e.Detail = maxLenBytes.ReplaceAllString(e.Detail, "must be no more than $1 characters")
		out = append(out, e)
	}
	return out
}

// decode is upstream's decoder for an object (schema coercion, then
// defaulting).
func (u *upstreamCRD) decode(t testing.TB, raw []byte, stored bool) *unstructured.Unstructured {
	t.Helper()
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	meta, found, err := schemaobjectmeta.GetObjectMeta(obj, stored)
	if err != nil {
		t.Fatal(err)
	}
	structuralpruning.Prune(obj, u.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, u.structural)
	if err := schemaobjectmeta.Coerce(nil, obj, u.structural, false, stored); err != nil {
		t.Fatal(err)
	}
	if found {
		if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
			t.Fatal(err)
		}
	}
	structuraldefaulting.Default(obj, u.structural)
	return &unstructured.Unstructured{Object: obj}
}

func TestAdmitDifferential(t *testing.T) {
	svc := newDirService(t)
	client := serve(t, svc)
	src := svc.src.(*dirSource)
	const create, update = validatorv1.Operation_OPERATION_CREATE, validatorv1.Operation_OPERATION_UPDATE

	cases := []struct {
		name     string
		crd      string
		sub      string
		obj, old string
	}{
		{name: "crontab invalid", crd: "crontabs.stable.example.com",
			obj: cronTab("  cronSpec: \"* * * *\"\n  image: my-awesome-cron-image\n  replicas: 15\n")},
		{name: "crontab bad meta", crd: "crontabs.stable.example.com",
			obj: "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {generateName: \"x_\", annotations: {\"a/b/c\": x}, ownerReferences: [{apiVersion: v1, kind: K, name: owner, uid: u}], finalizers: [orphan, foregroundDeletion]}\nspec: {replicas: 0}\n"},
		{name: "crontab update ratchet", crd: "crontabs.stable.example.com",
			obj: cronTab("  cronSpec: \"bad\"\n  replicas: 12\n  image: new\n"),
			old: cronTab("  cronSpec: \"bad\"\n  replicas: 11\n  image: old\n")},
		{name: "crontab update no rv", crd: "crontabs.stable.example.com",
			obj: cronTab("  replicas: 2\n"), old: cronTab("  replicas: 1\n")},
		{name: "widget create", crd: "widgets.example.com",
			obj: widgetMeta + "spec: {size: huge, replicas: 3000000000, ports: [{name: a, port: 0}, {name: a}, {port: 3}], template: {apiVersion: \"a/b/c\", kind: \"\", metadata: {namespace: \"NS\"}}}\nstatus: {replicas: -1, selector: 5}\n"},
		{name: "widget create missing", crd: "widgets.example.com", obj: widgetMeta},
		{name: "widget embedded without type meta", crd: "widgets.example.com",
			obj: widgetMeta + "spec: {size: small, template: {metadata: {name: x}}}\n"},
		{name: "widget update", crd: "widgets.example.com",
			obj: widgetMeta + "spec: {size: huge, ports: [{name: a, port: 0}, {name: a, port: 1}]}\n",
			old: widgetMeta + "spec: {size: huge, ports: [{name: a, port: 0}, {name: b, port: 1}]}\n"},
		{name: "widget update dup ratchet", crd: "widgets.example.com",
			obj: widgetMeta + "spec: {size: small, ports: [{name: a, port: 0}, {name: a, port: 1}]}\n",
			old: widgetMeta + "spec: {size: small, ports: [{name: a, port: 0}, {name: a, port: 2}]}\n"},
		{name: "widget status", crd: "widgets.example.com", sub: "status",
			obj: widgetMeta + "spec: {size: huge}\nstatus: {phase: Nope, replicas: x, selector: 3}\n",
			old: widgetMeta + "spec: {size: huge}\nstatus: {phase: Nope}\n"},
		{name: "widget status ok", crd: "widgets.example.com", sub: "status",
			obj: widgetMeta + "spec: {size: small}\nstatus: {phase: Ready, replicas: 2}\n",
			old: widgetMeta + "spec: {size: small}\n"},
		{name: "cel create ok", crd: celCRD, obj: celTab(celSpec)},
		{name: "cel create invalid", crd: celCRD,
			obj: celTab("spec: {cronSpec: '* * *', image: nginx, replicas: 20, env: [{name: lower}], labels: {kubernetes.io/x: a}}\nstatus: {availableReplicas: 11}\n")},
		{name: "cel create long name", crd: celCRD,
			obj: strings.Replace(celTab(celSpec), "name: nightly", "name: "+strings.Repeat("n", 64), 1)},
		{name: "cel blocked by schema error", crd: celCRD,
			obj: celTab("spec: {cronSpec: '* * *', image: nginx, replicas: x}\n")},
		{name: "cel blocked by required", crd: celCRD,
			obj: celTab("spec: {cronSpec: '* * *'}\n")},
		{name: "cel not blocked by pattern-like errors", crd: celCRD,
			obj: strings.Replace(celTab("spec: {cronSpec: '* * *', image: nginx}\n"), "name: nightly", "name: Nightly", 1)},
		{name: "cel update transition", crd: celCRD,
			obj: celTab("spec: {cronSpec: '0 * * * *', image: 'nginx:2'}\n"),
			old: celTab("spec: {cronSpec: '0 * * * *', image: 'nginx:1'}\n")},
		{name: "cel update paused", crd: celCRD,
			obj: celTab("spec: {cronSpec: '0 * * * *', image: 'nginx:2', paused: true}\n"),
			old: celTab("spec: {cronSpec: '0 * * * *', image: 'nginx:1'}\n")},
		{name: "cel update ratchet", crd: celCRD,
			obj: celTab("spec: {cronSpec: '* * *', image: nginx, replicas: 20, env: [{name: lower}, {name: OK, value: b}]}\n"),
			old: celTab("spec: {cronSpec: '* * *', image: nginx, replicas: 20, env: [{name: lower}, {name: OK, value: a}]}\n")},
		{name: "cel status transition", crd: celCRD, sub: "status",
			obj: celTab(celSpec + "status: {phase: Pending, availableReplicas: 20}\n"),
			old: celTab(celSpec + "status: {phase: Failed}\n")},
		{name: "cel status ratchets spec rules", crd: celCRD, sub: "status",
			obj: celTab("spec: {cronSpec: '* * *', image: nginx}\nstatus: {phase: Running}\n"),
			old: celTab("spec: {cronSpec: '* * *', image: nginx}\nstatus: {phase: Pending}\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crd, err := src.Get(context.Background(), &commonv1.CRDRef{Name: tc.crd})
			if err != nil {
				t.Fatal(err)
			}
			up := newUpstreamCRD(t, crd, "v1")
			op := create
			if tc.old != "" {
				op = update
			}
			req := &validatorv1.AdmitRequest{Crd: &commonv1.CRDRef{Name: tc.crd}, Version: "v1", Operation: op,
				Subresource: tc.sub, Object: toJSON(t, tc.obj)}
			if tc.old != "" {
				req.OldObject = toJSON(t, tc.old)
			}
			resp, err := client.Admit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.Causes {
				got = append(got, c.Field+": "+c.Message)
			}

			obj := up.decode(t, req.Object, false)
			var want field.ErrorList
			rec := &warningRecorder{}
			switch {
			case tc.sub == "status":
				want = up.status(rec, obj, up.decode(t, req.OldObject, true))
			case tc.old != "":
				want = up.update(rec, obj, up.decode(t, req.OldObject, true))
			default:
				want = up.create(rec, obj)
			}
			var gotWarnings []string
			for _, w := range resp.Warnings {
				if !strings.HasPrefix(w, "unknown field") && !strings.HasPrefix(w, "metadata.finalizers") {
					gotWarnings = append(gotWarnings, w)
				}
			}
			gotWarnings, upWarnings := asV133(gotWarnings, rec.warnings)
			slices.Sort(gotWarnings)
			slices.Sort(upWarnings)
			if !reflect.DeepEqual(gotWarnings, upWarnings) {
				t.Errorf("warnings differ from upstream:\n      got %q\n upstream %q", gotWarnings, upWarnings)
			}
			var wantStrings []string
			for _, e := range want {
				wantStrings = append(wantStrings, fielderr.Error(e))
			}
			got, wantStrings = asV133(got, wantStrings)
			slices.Sort(got)
			slices.Sort(wantStrings)
			if !reflect.DeepEqual(got, wantStrings) {
				t.Errorf("differs from upstream:\n      got %q\n upstream %q", got, wantStrings)
			}
			if len(got) == 0 {
				if !reflect.DeepEqual(fromJSON(t, resp.Object), obj.Object) {
					t.Errorf("object differs from upstream:\n      got %s\n upstream %v", resp.Object, obj.Object)
				}
			}
		})
	}
}
