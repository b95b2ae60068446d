package validator

import (
	"fmt"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/crdplane/crdplane/pkg/celconv"
	"github.com/crdplane/crdplane/pkg/structural"
)

// fieldManagers are the field managers of one CRD version (metadata
// .managedFields and server-side apply), built as upstream's CRD handler
// builds them: one for the main resource, one for status, one for scale.
type fieldManagers struct {
	main   *managedfields.FieldManager
	status *managedfields.FieldManager // nil without a status subresource
	scale  *managedfields.FieldManager // nil without a scale subresource
}

// managedState is what a compiled version keeps for its field managers,
// built on first use and cached with the compiled version (so rebuilt when
// the CRD's generation changes): the type converter and, for a CRD whose
// conversion runs in process (None without conversion rules), the field
// managers themselves. A CRD converted by webhook or by conversion rules
// converts through the converter service, with the request's context: its
// field managers are built per request (newFieldManagers, a few small
// allocations) around a converter bound to that request.
type managedState struct {
	once  sync.Once
	err   error
	tc    managedfields.TypeConverter
	local *fieldManagers // nil when conversion goes through the converter service
}

// managed returns cv's managed state, building it once.
func (cv *compiledVersion) managed() (*managedState, error) {
	ms := &cv.fm
	ms.once.Do(func() {
		var tc managedfields.TypeConverter
		var err error
		if cv.owner != nil {
			// Shared by the CRD generation's versions and charged to the
			// cache's memory budget.
			tc, err = entryTypeConverter(cv.owner)
		} else {
			tc, err = typeConverter(cv.crd)
		}
		if apierrors.IsInternalError(err) {
			ms.err = err
			return
		}
		if err != nil {
			ms.err = fmt.Errorf("CustomResourceDefinition %s: type converter: %w", cv.crdName, err)
			return
		}
		ms.tc = tc
		if !remoteConversion(cv.crd) {
			ms.local, ms.err = cv.newFieldManagers(tc, &versionConverter{crd: cv.crd})
		}
	})
	return ms, ms.err
}

// remoteConversion reports whether crd's objects convert between versions
// through the converter service: webhook conversion, and None conversion
// with CEL conversion rules (pkg/celconv), which the converter runs as the
// gateway's conversions do.
func remoteConversion(crd *CRD) bool {
	if conv := crd.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
		return true
	}
	return celconv.HasRules(crd)
}

// newFieldManagers builds cv's field managers around the type converter tc
// and the object converter conv (upstream's scopeWithFieldManager, per
// subresource).
func (cv *compiledVersion) newFieldManagers(tc managedfields.TypeConverter, conv runtime.ObjectConvertor) (*fieldManagers, error) {
	fm := &fieldManagers{}
	gvk := runtimeschema.GroupVersionKind{Group: cv.group, Version: cv.version, Kind: cv.kind}
	def := &defaulter{schema: cv.schema}
	creater := &creater{}
	// The main resource's manager resets .status (upstream's
	// customResourceStrategy.GetResetFields) when the status subresource
	// is on; the status manager resets spec only (upstream's statusStrategy:
	// a status write's metadata changes are dropped by PrepareForUpdate but
	// still recorded in its entry).
	var mainReset, statusReset map[fieldpath.APIVersion]*fieldpath.Set
	if cv.hasStatus {
		mainReset = map[fieldpath.APIVersion]*fieldpath.Set{
			fieldpath.APIVersion(cv.apiVersion): fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
		}
		statusReset = map[fieldpath.APIVersion]*fieldpath.Set{
			fieldpath.APIVersion(cv.apiVersion): fieldpath.NewSet(fieldpath.MakePathOrDie("spec")),
		}
	}
	var err error
	if fm.main, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, creater, gvk, gvk.GroupVersion(), "", fieldpath.NewExcludeFilterSetMap(mainReset)); err != nil {
		return nil, err
	}
	if cv.scale != nil {
		// The Scale's manager (upstream: the scale request scope's, with
		// the custom resource's version as hub and no reset fields).
		if fm.scale, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, creater, scaleGVK, gvk.GroupVersion(), "scale", nil); err != nil {
			return nil, err
		}
	}
	if cv.hasStatus {
		if fm.status, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, creater, gvk, gvk.GroupVersion(), "status", fieldpath.NewExcludeFilterSetMap(statusReset)); err != nil {
			return nil, err
		}
	}
	return fm, nil
}

// typeConverter builds the structured-merge-diff type converter of a CRD
// from the OpenAPI v3 models of all its versions (upstream's
// buildOpenAPIModelsForApply, through the same library calls). A CRD
// whose models cannot be built gets the deduced converter, as upstream.
func typeConverter(crd *CRD) (managedfields.TypeConverter, error) {
	specs := make([]*spec3.OpenAPI, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return managedfields.NewDeducedTypeConverter(), nil //nolint:nilerr // upstream falls back to the deduced converter
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil || merged.Components == nil || len(merged.Components.Schemas) == 0 {
		return managedfields.NewDeducedTypeConverter(), nil //nolint:nilerr // as upstream
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
}

// versionConverter converts custom resources between the versions of
// their CRD for the field manager (managedFields entries recorded at
// another version), as upstream's CRD converter (the "safe" one, without
// schema coercion) that upstream's CRD handler gives its field managers:
// None conversion rewrites apiVersion; webhook conversion and conversion
// rules go through the converter service (remote, bound to one request).
type versionConverter struct {
	crd    *CRD
	remote *remoteConverter // nil: None conversion, in process
}

func (c *versionConverter) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("unexpected conversion of %T to %T", in, out)
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (c *versionConverter) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	if sc, ok := in.(*autoscalingv1.Scale); ok {
		// A typed Scale converts as a built-in type (upstream's
		// converter special-cases it): autoscaling/v1 is its only version.
		return sc, nil
	}
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", in)
	}
	from := u.GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]runtimeschema.GroupVersionKind{from})
	if !ok {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("crdplane-validator", from, target)
	}
	// Upstream's custom resource converter: only the CRD's versions (an
	// unstructured Scale, as an applied one, is refused).
	if !c.valid(to.GroupVersion()) {
		return nil, fmt.Errorf("request to convert CR to an invalid group/version: %s", to.GroupVersion())
	}
	if !c.valid(from.GroupVersion()) {
		return nil, fmt.Errorf("request to convert CR from an invalid group/version: %s", from.GroupVersion())
	}
	if to.GroupVersion() == from.GroupVersion() {
		return u, nil
	}
	if c.remote != nil && !isEmptyObject(u) {
		return c.remote.convert(u, to.GroupVersion().String())
	}
	// None conversion, and (as upstream's webhook converter) an object
	// with nothing but apiVersion and kind.
	out := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(u.Object)}
	out.SetAPIVersion(to.GroupVersion().String())
	return out, nil
}

// isEmptyObject reports an object of only apiVersion and kind, which
// upstream's webhook converter converts without calling the webhook.
func isEmptyObject(u *unstructured.Unstructured) bool {
	if len(u.Object) != 2 {
		return false
	}
	_, k := u.Object["kind"]
	_, v := u.Object["apiVersion"]
	return k && v
}

func (c *versionConverter) valid(gv runtimeschema.GroupVersion) bool {
	if gv.Group != c.crd.Spec.Group {
		return false
	}
	for _, v := range c.crd.Spec.Versions {
		if v.Name == gv.Version {
			return true
		}
	}
	return false
}

func (c *versionConverter) ConvertFieldLabel(_ runtimeschema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// defaulter applies the version's structural defaults (the field manager
// defaults an applied object after the merge, as upstream).
type defaulter struct{ schema *structural.Schema }

func (d *defaulter) Default(in runtime.Object) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		structural.Default(u.Object, d.schema)
	}
}

// creater makes the empty object an apply creates from.
type creater struct{}

func (creater) New(gvk runtimeschema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
