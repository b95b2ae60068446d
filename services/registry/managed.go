package registry

import (
	"fmt"
	"strings"
	"sync"

	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	openapispec "k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/crdplane/crdplane/pkg/objsize"
)

// applyPatchType is the media type of a server-side apply.
const applyPatchType = "application/apply-patch+yaml"

// crdFieldManagers maintain metadata.managedFields of CRDs and merge their
// server-side applies, as kube-apiserver's field managers for the
// customresourcedefinitions resource and its status: a type converter built
// from apiextensions' generated OpenAPI definitions (the Go types' list and
// map strategies), the scheme's conversion and defaulting, and upstream's
// reset fields (status on the main resource; metadata and spec on status).
type crdFieldManagers struct {
	once         sync.Once
	err          error
	main, status *managedfields.FieldManager
}

var fieldManagers crdFieldManagers

// managers returns the CRD field managers, built once.
func (m *crdFieldManagers) managers() (*crdFieldManagers, error) {
	m.once.Do(func() { m.err = m.build() })
	return m, m.err
}

func (m *crdFieldManagers) build() error {
	tc, err := crdTypeConverter()
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition type converter: %w", err)
	}
	v1 := fieldpath.APIVersion(crdGV.String())
	mainReset := map[fieldpath.APIVersion]*fieldpath.Set{v1: fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
	statusReset := map[fieldpath.APIVersion]*fieldpath.Set{v1: fieldpath.NewSet(fieldpath.MakePathOrDie("metadata"), fieldpath.MakePathOrDie("spec"))}
	if m.main, err = managedfields.NewDefaultFieldManager(tc, scheme, scheme, scheme, crdGVK, crdGV, "", fieldpath.NewExcludeFilterSetMap(mainReset)); err != nil {
		return err
	}
	m.status, err = managedfields.NewDefaultFieldManager(tc, scheme, scheme, scheme, crdGVK, crdGV, "status", fieldpath.NewExcludeFilterSetMap(statusReset))
	return err
}

// crdTypeConverter builds the type converter of the apiextensions types
// from their generated OpenAPI definitions, named and tagged with their
// group-version-kinds as kube-apiserver's OpenAPI builder names them.
func crdTypeConverter() (managedfields.TypeConverter, error) {
	namer := openapinamer.NewDefinitionNamer(scheme)
	defs := generatedopenapi.GetOpenAPIDefinitions(func(path string) openapispec.Ref {
		return openapispec.MustCreateRef("#/definitions/" + definitionName(path))
	})
	models := make(map[string]*openapispec.Schema, len(defs))
	for path, def := range defs {
		s := def.Schema
		name := definitionName(path)
		_, ext := namer.GetDefinitionName(name)
		for k, v := range ext {
			s.AddExtension(k, v)
		}
		models[name] = &s
	}
	return managedfields.NewTypeConverter(models, false)
}

// definitionName is the OpenAPI name of a generated definition: the
// generator's keys are REST-friendly already ("io.k8s.apiextensions-
// apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"); a Go
// path ("k8s.io/...") is made so.
func definitionName(path string) string {
	if strings.Contains(path, "/") {
		return openapiutil.ToRESTFriendlyName(path)
	}
	return path
}

// fieldManagerFor is the field manager of a write of subresource.
func fieldManagerFor(subresource string) (*managedfields.FieldManager, error) {
	m, err := fieldManagers.managers()
	if err != nil {
		return nil, err
	}
	if subresource == "status" {
		return m.status, nil
	}
	return m.main, nil
}

// emptyCRD is the object a create starts from.
func emptyCRD() *CRD {
	return &CRD{TypeMeta: metav1.TypeMeta{APIVersion: crdGV.String(), Kind: crdKind}}
}

// trackUpdate records manager's "Update" of crd (as decoded) over live
// (nil on create) in crd's managedFields. As upstream (UpdateNoErrors), a
// failure keeps live's managedFields instead of failing the write.
func trackUpdate(live, crd *CRD, subresource, manager string) (*CRD, error) {
	fm, err := fieldManagerFor(subresource)
	if err != nil {
		return nil, err
	}
	if live == nil {
		live = emptyCRD()
	}
	out := fm.UpdateNoErrors(live.DeepCopy(), crd, manager)
	res, ok := out.(*CRD)
	if !ok {
		return nil, fmt.Errorf("field manager returned %T", out)
	}
	res.APIVersion, res.Kind = crdGV.String(), crdKind
	return res, nil
}

// applyCRD merges a server-side apply patch into live (nil: the apply
// creates) as upstream's applyPatcher: the body decoded as YAML ("error
// decoding YAML: ..." 400), the field manager's merge (its conflicts are
// 409, its other failures a plain 500 with their text), then the strict
// decoding of the body under fieldValidation Strict (400 "error strict
// decoding YAML: ...") or Warn (warnings).
func applyCRD(live *CRD, body []byte, subresource, manager string, force bool, directive string) (*CRD, []string, error) {
	if live == nil {
		live = emptyCRD()
	}
	crd, warnings, err := applyWithManager(func() (*managedfields.FieldManager, error) { return fieldManagerFor(subresource) },
		live, body, manager, force, directive)
	if err != nil {
		return nil, nil, err
	}
	crd.APIVersion, crd.Kind = crdGV.String(), crdKind
	return crd, warnings, nil
}

// applyWithManager is the server-side apply of body to live (a built-in
// object the registry serves: a CRD, a Namespace) as upstream's
// applyPatcher: the body over objsize.MaxBytes is 413, decoded as YAML
// ("error decoding YAML: ..." 400), merged by the field manager fmFor
// returns (its conflicts are 409, its other failures a plain 500 with
// their text), then strictly decoded under fieldValidation Strict (400
// "error strict decoding YAML: ...") or Warn (warnings).
func applyWithManager[T interface {
	*E
	runtime.Object
}, E any](fmFor func() (*managedfields.FieldManager, error), live T, body []byte, manager string, force bool, directive string) (T, []string, error) {
	if len(body) > objsize.MaxBytes {
		// What the HTTP edge answers a body over MaxRequestBodyBytes.
		return nil, nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", objsize.MaxBytes))
	}
	patchObj := map[string]any{}
	if err := yaml.Unmarshal(body, &patchObj); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	fm, err := fmFor()
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	out, err := fm.Apply(live.DeepCopyObject(), &unstructured.Unstructured{Object: patchObj}, manager, force)
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, nil, err
		}
		return nil, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: err.Error()}}
	}
	var warnings []string
	if directive == fieldValidationStrict || directive == fieldValidationWarn || directive == "" {
		if err := yaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
			if directive == fieldValidationStrict {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", err))
			}
			warnings = yamlWarnings(err.Error())
		}
	}
	obj, ok := out.(T)
	if !ok {
		u, isU := out.(*unstructured.Unstructured)
		if !isU {
			return nil, nil, apierrors.NewInternalError(fmt.Errorf("field manager returned %T", out))
		}
		obj = T(new(E))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
	}
	return obj, warnings, nil
}

// yamlWarnings splits a YAML strict decoding error into one warning a line
// (upstream's parseYAMLWarnings).
func yamlWarnings(msg string) []string {
	rest, ok := strings.CutPrefix(msg, "error converting YAML to JSON: yaml: unmarshal errors:\n")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "yaml: unmarshal errors:\n"); !ok {
			return []string{msg}
		}
	}
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}
