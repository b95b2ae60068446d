package validator

import (
	"fmt"

	"github.com/crdplane/crdplane/pkg/structural"
	"github.com/crdplane/crdplane/services/validator/celrules"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// compiledVersion is what admission needs of one CRD version.
type compiledVersion struct {
	crdName    string
	group      string
	version    string
	kind       string
	apiVersion string // group/version
	namespaced bool
	schema     *structural.Schema
	cel        *celrules.Validator // nil without x-kubernetes-validations
	hasStatus  bool
	status     *structural.Schema // .status's schema when the status subresource is on
	scale      *apiextensionsv1.CustomResourceSubresourceScale
	// crd is the CRD compiled (read only); fm what its field managers
	// need, built on first use.
	crd *CRD
	fm  managedState
	// owner is the cache entry of the CRD generation (nil when compiled
	// outside the cache): its type converter is shared by all versions
	// and accounted in the cache's memory budget.
	owner *crdEntry
}

func findVersion(crd *CRD, version string) (*apiextensionsv1.CustomResourceDefinitionVersion, error) {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			return &crd.Spec.Versions[i], nil
		}
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("version %q is not defined in CustomResourceDefinition %s", version, crd.Name))
}

func compileVersion(crd *CRD, version string) (*compiledVersion, error) {
	v, err := findVersion(crd, version)
	if err != nil {
		return nil, err
	}
	var props *apiextensionsv1.JSONSchemaProps
	if v.Schema != nil {
		props = v.Schema.OpenAPIV3Schema
	}
	s, err := structural.Compile(props, structural.WithPreserveUnknownFields(crd.Spec.PreserveUnknownFields))
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s version %s: %w", crd.Name, version, err)
	}
	celValidator, err := celrules.Compile(props)
	if err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s version %s: x-kubernetes-validations: %w", crd.Name, version, err)
	}
	kind := crd.Status.AcceptedNames.Kind
	if kind == "" {
		kind = crd.Spec.Names.Kind
	}
	cv := &compiledVersion{
		crdName:    crd.Name,
		group:      crd.Spec.Group,
		version:    version,
		kind:       kind,
		apiVersion: crd.Spec.Group + "/" + version,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		schema:     s,
		cel:        celValidator,
		crd:        crd,
	}
	if sub := v.Subresources; sub != nil {
		if sub.Status != nil {
			cv.hasStatus = true
			cv.status = s.Property("status")
		}
		cv.scale = sub.Scale
	}
	return cv, nil
}
