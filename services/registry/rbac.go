package registry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/applyconfigurations"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggapplyconfiguration "k8s.io/kube-aggregator/pkg/client/applyconfiguration"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
)

// rbacObject is a stored rbac.authorization.k8s.io/v1 object (*Role,
// *ClusterRole, *RoleBinding, *ClusterRoleBinding).
type rbacObject interface {
	runtime.Object
	metav1.Object
}

// rbacKind describes one of the four RBAC resources as kube-apiserver's
// registry and strategy for it: its names, scope, validation (v1.33's
// pkg/apis/rbac/validation, worded as upstream) and v1 defaulting.
type rbacKind struct {
	resource, kind string
	namespaced     bool
	// gv is the kind's group version (rbac.authorization.k8s.io/v1 unless
	// set).
	gv schema.GroupVersion
	// keyBase is the storage collection without its trailing slash
	// (/registry/<resource> unless set: kube-apiserver's groupless RBAC
	// keys).
	keyBase   string
	newObject func() rbacObject
	// validate is ValidateRole, ValidateClusterRole, ...
	validate func(obj rbacObject) field.ErrorList
	// validateUpdate is what the update validation adds (roleRef is
	// immutable on bindings).
	validateUpdate func(obj, old rbacObject) field.ErrorList
	// nameFn is the kind's name rule (nil: a path segment name).
	nameFn func(obj rbacObject) metavalidation.ValidateNameFunc
	// status is the kind's status subresource (nil: none).
	status *statusSubresource
	// strict is a strategy that neither creates on update nor updates
	// without a resourceVersion (the RBAC strategies do both), and
	// validates an update's metadata change before the object, as
	// kube-aggregator's APIService strategy.
	strict bool
	// fieldManager is built once (the managedFields of writes and
	// server-side apply).
	fmOnce sync.Once
	fm     *managedfields.FieldManager
	fmErr  error
	// statusFM is the status subresource's field manager.
	statusFMOnce sync.Once
	statusFM     *managedfields.FieldManager
	statusFMErr  error
}

// statusSubresource is what a kind with a status subresource adds to the
// generic store, as upstream's strategy and status strategy.
type statusSubresource struct {
	// prepareCreate is PrepareForCreate (the status a new object starts
	// with).
	prepareCreate func(obj rbacObject)
	// keepStatus is the main strategy's PrepareForUpdate: obj keeps old's
	// status.
	keepStatus func(obj, old rbacObject)
	// keepSpec is the status strategy's PrepareForUpdate: obj keeps old's
	// spec (and the metadata it resets).
	keepSpec func(obj, old rbacObject)
	// validateStatus is ValidateXStatusUpdate past the metadata.
	validateStatus func(obj rbacObject) field.ErrorList
	// resetFields are the main and the status strategies' GetResetFields.
	resetFields, statusResetFields map[fieldpath.APIVersion]*fieldpath.Set
}

var rbacGV = rbacv1.SchemeGroupVersion

func (k *rbacKind) groupVersion() schema.GroupVersion {
	if k.gv.Version == "" {
		return rbacGV
	}
	return k.gv
}

func (k *rbacKind) gvk() schema.GroupVersionKind { return k.groupVersion().WithKind(k.kind) }
func (k *rbacKind) gr() schema.GroupResource {
	return schema.GroupResource{Group: k.groupVersion().Group, Resource: k.resource}
}
func (k *rbacKind) gk() schema.GroupKind {
	return schema.GroupKind{Group: k.groupVersion().Group, Kind: k.kind}
}

func (k *rbacKind) base() string {
	if k.keyBase != "" {
		return k.keyBase
	}
	return "/registry/" + k.resource
}

// key is the object's storage key, kube-apiserver's layout:
// /registry/<resource>/[<namespace>/]<name> for RBAC, keyBase/<name>
// otherwise.
func (k *rbacKind) key(namespace, name string) string {
	if k.namespaced {
		return k.base() + "/" + namespace + "/" + name
	}
	return k.base() + "/" + name
}

// prefix is the storage collection of the resource in namespace (all
// namespaces when empty).
func (k *rbacKind) prefix(namespace string) string {
	if k.namespaced && namespace != "" {
		return k.base() + "/" + namespace + "/"
	}
	return k.base() + "/"
}

var rbacKinds = map[string]*rbacKind{}

func init() {
	for _, k := range []*rbacKind{
		{resource: "roles", kind: "Role", namespaced: true,
			newObject: func() rbacObject { return &rbacv1.Role{} },
			validate: func(o rbacObject) field.ErrorList {
				return validateRules(o.(*rbacv1.Role).Rules, true)
			}},
		{resource: "clusterroles", kind: "ClusterRole",
			newObject: func() rbacObject { return &rbacv1.ClusterRole{} },
			validate: func(o rbacObject) field.ErrorList {
				cr := o.(*rbacv1.ClusterRole)
				errs := validateRules(cr.Rules, false)
				if cr.AggregationRule != nil {
					p := field.NewPath("aggregationRule", "clusterRoleSelectors")
					for i, sel := range cr.AggregationRule.ClusterRoleSelectors {
						errs = append(errs, metav1validation.ValidateLabelSelector(&sel, metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
					}
				}
				return errs
			}},
		{resource: "rolebindings", kind: "RoleBinding", namespaced: true,
			newObject: func() rbacObject { return &rbacv1.RoleBinding{} },
			validate: func(o rbacObject) field.ErrorList {
				rb := o.(*rbacv1.RoleBinding)
				return validateBinding(rb.RoleRef, rb.Subjects, true)
			},
			validateUpdate: func(o, old rbacObject) field.ErrorList {
				return validateRoleRefUpdate(o.(*rbacv1.RoleBinding).RoleRef, old.(*rbacv1.RoleBinding).RoleRef)
			}},
		{resource: "clusterrolebindings", kind: "ClusterRoleBinding",
			newObject: func() rbacObject { return &rbacv1.ClusterRoleBinding{} },
			validate: func(o rbacObject) field.ErrorList {
				rb := o.(*rbacv1.ClusterRoleBinding)
				return validateBinding(rb.RoleRef, rb.Subjects, false)
			},
			validateUpdate: func(o, old rbacObject) field.ErrorList {
				return validateRoleRefUpdate(o.(*rbacv1.ClusterRoleBinding).RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)
			}},
		apiServiceKind,
	} {
		rbacKinds[k.resource] = k
	}
}

// rbacKindOf is the kind of a resource name, or the 404 of a path
// kube-apiserver does not route.
func rbacKindOf(resource string) (*rbacKind, error) {
	k, ok := rbacKinds[resource]
	if !ok {
		return nil, notFoundResource()
	}
	return k, nil
}

// rbacScheme knows rbac.authorization.k8s.io/v1 (decoding, the field
// managers).
var rbacScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := rbacv1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, rbacGV)
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, apiregistrationv1.SchemeGroupVersion)
	return s
}()

var (
	rbacStrictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, rbacScheme, rbacScheme, kjson.SerializerOptions{Strict: true})
	rbacLaxSerializer    = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, rbacScheme, rbacScheme, kjson.SerializerOptions{})
)

// decode decodes a request body as the kind (decodeBuiltin) and applies
// v1 defaulting.
func (k *rbacKind) decode(body []byte, fieldValidation string) (rbacObject, []string, error) {
	obj := k.newObject()
	warnings, err := decodeBuiltin(body, fieldValidation, k.gvk(), obj, rbacStrictSerializer, rbacLaxSerializer)
	if err != nil {
		return nil, nil, err
	}
	k.defaults(obj)
	return obj, warnings, nil
}

// defaults is rbac/v1's defaulting: roleRef.apiGroup and the apiGroup of
// User and Group subjects default to rbac.authorization.k8s.io.
func (k *rbacKind) defaults(obj rbacObject) {
	obj.GetObjectKind().SetGroupVersionKind(k.gvk())
	var ref *rbacv1.RoleRef
	var subjects []rbacv1.Subject
	switch o := obj.(type) {
	case *apiregistrationv1.APIService:
		apiregistrationv1.SetObjectDefaults_APIService(o)
		return
	case *rbacv1.RoleBinding:
		ref, subjects = &o.RoleRef, o.Subjects
	case *rbacv1.ClusterRoleBinding:
		ref, subjects = &o.RoleRef, o.Subjects
	default:
		return
	}
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if subjects[i].APIGroup == "" && (subjects[i].Kind == rbacv1.UserKind || subjects[i].Kind == rbacv1.GroupKind) {
			subjects[i].APIGroup = rbacv1.GroupName
		}
	}
}

// encode renders obj as the JSON clients see.
func (k *rbacKind) encode(obj rbacObject) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(k.gvk())
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", k.kind, err)
	}
	return b, nil
}

func (k *rbacKind) decodeStored(data []byte, rv int64) (rbacObject, error) {
	obj := k.newObject()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decode stored %s: %w", k.kind, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk())
	if obj.GetResourceVersion() == "" && rv != 0 {
		obj.SetResourceVersion(strconv.FormatInt(rv, 10))
	}
	return obj, nil
}

// fieldManager maintains managedFields of the kind (no reset fields for
// the RBAC kinds, which have no status; status for a kind that has one).
func (k *rbacKind) fieldManager() (*managedfields.FieldManager, error) {
	k.fmOnce.Do(func() {
		var reset map[fieldpath.APIVersion]*fieldpath.Set
		if k.status != nil {
			reset = k.status.resetFields
		}
		k.fm, k.fmErr = k.newFieldManager("", reset)
	})
	return k.fm, k.fmErr
}

// statusFieldManager maintains managedFields of status updates.
func (k *rbacKind) statusFieldManager() (*managedfields.FieldManager, error) {
	k.statusFMOnce.Do(func() {
		k.statusFM, k.statusFMErr = k.newFieldManager("status", k.status.statusResetFields)
	})
	return k.statusFM, k.statusFMErr
}

func (k *rbacKind) newFieldManager(subresource string, reset map[fieldpath.APIVersion]*fieldpath.Set) (*managedfields.FieldManager, error) {
	var tc managedfields.TypeConverter
	if k.groupVersion() == apiregistrationv1.SchemeGroupVersion {
		tc = aggapplyconfiguration.NewTypeConverter(rbacScheme)
	} else {
		tc = applyconfigurations.NewTypeConverter(rbacScheme)
	}
	var filter map[fieldpath.APIVersion]fieldpath.Filter
	if reset != nil {
		filter = fieldpath.NewExcludeFilterSetMap(reset)
	}
	fm, err := managedfields.NewDefaultFieldManager(tc, rbacScheme, rbacScheme, rbacScheme, k.gvk(), k.groupVersion(), subresource, filter)
	if err != nil {
		return nil, fmt.Errorf("%s field manager: %w", k.kind, err)
	}
	return fm, nil
}

func (k *rbacKind) empty() rbacObject {
	obj := k.newObject()
	obj.GetObjectKind().SetGroupVersionKind(k.gvk())
	return obj
}

// trackUpdate records manager's "Update" of obj over live (nil on create)
// in obj's managedFields; as upstream, a failure keeps live's.
func (k *rbacKind) trackUpdate(live, obj rbacObject, manager string) (rbacObject, error) {
	return k.trackUpdateWith(k.fieldManager, live, obj, manager)
}

// trackStatusUpdate is trackUpdate for the status subresource.
func (k *rbacKind) trackStatusUpdate(live, obj rbacObject, manager string) (rbacObject, error) {
	return k.trackUpdateWith(k.statusFieldManager, live, obj, manager)
}

func (k *rbacKind) trackUpdateWith(fieldManager func() (*managedfields.FieldManager, error), live, obj rbacObject, manager string) (rbacObject, error) {
	fm, err := fieldManager()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if live == nil {
		live = k.empty()
	}
	out := fm.UpdateNoErrors(live.DeepCopyObject(), obj, manager)
	res, ok := out.(rbacObject)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("field manager returned %T", out))
	}
	res.GetObjectKind().SetGroupVersionKind(k.gvk())
	return res, nil
}

// apply merges a server-side apply into live (nil: the apply creates),
// of the status subresource when status is set.
func (k *rbacKind) apply(live rbacObject, body []byte, manager string, force bool, directive string, status bool) (rbacObject, []string, error) {
	fmFor := k.fieldManager
	if status {
		fmFor = k.statusFieldManager
	}
	if live == nil {
		live = k.empty()
	}
	var (
		out      rbacObject
		warnings []string
		err      error
	)
	switch l := live.(type) {
	case *rbacv1.Role:
		out, warnings, err = applyTyped(fmFor, l, body, manager, force, directive)
	case *rbacv1.ClusterRole:
		out, warnings, err = applyTyped(fmFor, l, body, manager, force, directive)
	case *rbacv1.RoleBinding:
		out, warnings, err = applyTyped(fmFor, l, body, manager, force, directive)
	case *rbacv1.ClusterRoleBinding:
		out, warnings, err = applyTyped(fmFor, l, body, manager, force, directive)
	case *apiregistrationv1.APIService:
		out, warnings, err = applyTyped(fmFor, l, body, manager, force, directive)
	default:
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("apply to %T", live))
	}
	if err != nil {
		return nil, nil, err
	}
	k.defaults(out)
	return out, warnings, nil
}

func applyTyped[T interface {
	*E
	rbacObject
}, E any](fmFor func() (*managedfields.FieldManager, error), live T, body []byte, manager string, force bool, directive string) (rbacObject, []string, error) {
	out, warnings, err := applyWithManager(fmFor, live, body, manager, force, directive)
	if err != nil {
		return nil, nil, err
	}
	return out, warnings, nil
}

// validateRules is validatePolicyRule over a role's rules.
func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		p := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
		if len(rule.ResourceNames) > 0 && len(rule.Resources) > 1 {
			errs = append(errs, field.Required(p.Child("resourceNames"), "resource names cannot apply to multiple resources"))
		}
	}
	return errs
}

// validateBinding is ValidateRoleBinding and ValidateClusterRoleBinding
// past the metadata.
func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(field.NewPath("roleRef", "apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if ref.Kind != "ClusterRole" && (!namespaced || ref.Kind != "Role") {
		errs = append(errs, field.NotSupported(field.NewPath("roleRef", "kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(field.NewPath("roleRef", "name"), ""))
	} else {
		for _, msg := range metavalidation.ValidatePathSegmentName(ref.Name, false) {
			errs = append(errs, field.Invalid(field.NewPath("roleRef", "name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range metavalidation.IsDNS1123Subdomain(s.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.Name == "" {
			what := "user"
			if s.Kind == rbacv1.GroupKind {
				what = "group"
			}
			errs = append(errs, field.Invalid(p.Child("name"), s.Name, what+" name cannot be empty"))
		}
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

func validateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), internalRoleRef(ref), "cannot change roleRef")}
	}
	return nil
}

// internalRoleRef renders as upstream's error renders its internal type
// (%#v of rbac.RoleRef).
type internalRoleRef rbacv1.RoleRef

func (r internalRoleRef) GoString() string {
	return "rbac.RoleRef" + strings.TrimPrefix(fmt.Sprintf("%#v", rbacv1.RoleRef(r)), "v1.RoleRef")
}

// validateCreate is the kind's validation of a new object: the metadata
// (names are path segments, as upstream's minimalNameRequirements) and the
// kind's own rules.
func (k *rbacKind) validateCreate(obj rbacObject) error {
	errs := metavalidation.ValidateObjectMetaAccessor(obj, k.namespaced, k.names(obj), field.NewPath("metadata"))
	errs = append(errs, k.validate(obj)...)
	return k.invalid(obj.GetName(), errs)
}

func (k *rbacKind) names(obj rbacObject) metavalidation.ValidateNameFunc {
	if k.nameFn != nil {
		return k.nameFn(obj)
	}
	return metavalidation.ValidatePathSegmentName
}

// validateStatusUpdateOf is the status strategy's ValidateUpdate.
func (k *rbacKind) validateStatusUpdateOf(obj, old rbacObject) error {
	errs := metavalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))
	errs = append(errs, k.status.validateStatus(obj)...)
	return k.invalid(obj.GetName(), errs)
}

func (k *rbacKind) validateUpdateOf(obj, old rbacObject) error {
	if k.strict {
		errs := metavalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))
		errs = append(errs, metavalidation.ValidateObjectMetaAccessor(obj, k.namespaced, k.names(obj), field.NewPath("metadata"))...)
		errs = append(errs, k.validate(obj)...)
		return k.invalid(obj.GetName(), errs)
	}
	errs := metavalidation.ValidateObjectMetaAccessor(obj, k.namespaced, k.names(obj), field.NewPath("metadata"))
	errs = append(errs, k.validate(obj)...)
	errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))...)
	if k.validateUpdate != nil {
		errs = append(errs, k.validateUpdate(obj, old)...)
	}
	return k.invalid(obj.GetName(), errs)
}

func (k *rbacKind) invalid(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fielderr.NewInvalid(k.gk(), name, errs)
}

// accessor is meta.Accessor for the typed objects (always succeeds).
func accessor(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	return m
}
