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

	"github.com/crdplane/crdplane/pkg/structural"
)

// fieldManagers are the field managers of one CRD version (metadata
// .managedFields and server-side apply), built on first use from the CRD's
// structural schemas as upstream's CRD handler builds them, and cached with
// the compiled version (so rebuilt when the CRD's generation changes).
type fieldManagers struct {
	once   sync.Once
	err    error
	main   *managedfields.FieldManager
	status *managedfields.FieldManager // nil without a status subresource
	scale  *managedfields.FieldManager // nil without a scale subresource
}

// managers returns cv's field managers, building them once.
func (cv *compiledVersion) managers() (*fieldManagers, error) {
	fm := &cv.fm
	fm.once.Do(func() { fm.err = fm.build(cv) })
	return fm, fm.err
}

func (fm *fieldManagers) build(cv *compiledVersion) error {
	var tc managedfields.TypeConverter
	var err error
	if cv.owner != nil {
		tc, err = entryTypeConverter(cv.owner)
	} else {
		tc, err = typeConverter(cv.crd)
	}
	if apierrors.IsInternalError(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s: type converter: %w", cv.crdName, err)
	}
	gvk := runtimeschema.GroupVersionKind{Group: cv.group, Version: cv.version, Kind: cv.kind}
	conv := &versionConverter{crd: cv.crd}
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
	if fm.main, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, creater, gvk, gvk.GroupVersion(), "", fieldpath.NewExcludeFilterSetMap(mainReset)); err != nil {
		return err
	}
	if cv.scale != nil {
		// The Scale's manager (upstream: the scale request scope's, with
		// the custom resource's version as hub and no reset fields).
		if fm.scale, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, creater, scaleGVK, gvk.GroupVersion(), "scale", nil); err != nil {
			return err
		}
	}
	if cv.hasStatus {
		if fm.status, err = managedfields.NewDefaultCRDFieldManager(tc, conv, def, creater, gvk, gvk.GroupVersion(), "status", fieldpath.NewExcludeFilterSetMap(statusReset)); err != nil {
			return err
		}
	}
	return nil
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
// another version). With the None strategy a conversion rewrites
// apiVersion; webhook conversion is the converter service's and not
// available here (the field manager then drops the entries it cannot
// convert, see managedfields' IsMissingVersionError handling).
type versionConverter struct{ crd *CRD }

// noWebhookConversion ends the error of a conversion the field manager
// would need a webhook for (the library wraps it with %v: matched by text).
const noWebhookConversion = "is not available to the field manager"

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
	if conv := c.crd.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter {
		return nil, fmt.Errorf("webhook conversion of %s to %s %s", from, to.GroupVersion(), noWebhookConversion)
	}
	out := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(u.Object)}
	out.SetAPIVersion(to.GroupVersion().String())
	return out, nil
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
