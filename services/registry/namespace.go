package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdplane/crdplane/pkg/fielderr"
	"github.com/crdplane/crdplane/pkg/objmeta"
	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// Namespace is the stored and served form of a core/v1 Namespace.
type Namespace = corev1.Namespace

const (
	nsResource = "namespaces"
	nsKind     = "Namespace"
	// nsPrefix is the storage collection of namespaces, as kube-apiserver
	// lays it out (the legacy group has no group segment).
	nsPrefix = "/registry/" + nsResource + "/"
	// finalizerKubernetes is the spec finalizer every namespace gets on
	// create; the namespace controller removes it once the namespace's
	// content is gone.
	finalizerKubernetes = string(corev1.FinalizerKubernetes)
)

var (
	nsGV  = corev1.SchemeGroupVersion
	nsGVK = nsGV.WithKind(nsKind)
	nsGR  = schema.GroupResource{Resource: nsResource}
	// nsGK is the kind 422s name: kube-apiserver's qualified kind of
	// namespaces (the legacy group: just "Namespace").
	nsGK = schema.GroupKind{Kind: nsKind}
)

func nsKey(name string) string { return nsPrefix + name }

// nsScheme knows core/v1 Namespace (decoding, the field managers).
var nsScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}()

var (
	nsStrictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, nsScheme, nsScheme, kjson.SerializerOptions{Strict: true})
	nsLaxSerializer    = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, nsScheme, nsScheme, kjson.SerializerOptions{})
)

// decodeNamespace decodes a request body as a v1 Namespace as
// kube-apiserver's handlers do (decodeBuiltin) and applies v1 defaulting
// (the kubernetes.io/metadata.name label).
func decodeNamespace(body []byte, fieldValidation string) (*Namespace, []string, error) {
	ns := &Namespace{}
	warnings, err := decodeBuiltin(body, fieldValidation, nsGVK, ns, nsStrictSerializer, nsLaxSerializer)
	if err != nil {
		return nil, nil, err
	}
	defaultNamespace(ns)
	return ns, warnings, nil
}

// decodeBuiltin decodes a request body into a built-in object of kind gvk
// as kube-apiserver's handlers do: fieldValidation Strict, Warn or Ignore
// for unknown and duplicate fields (strict and lax decode with and
// without them), upstream's 400 wording otherwise.
func decodeBuiltin(body []byte, fieldValidation string, gvk schema.GroupVersionKind, into runtime.Object, strict, lax runtime.Decoder) ([]string, error) {
	if fieldValidation == "" {
		fieldValidation = fieldValidationWarn
	}
	switch fieldValidation {
	case fieldValidationIgnore, fieldValidationWarn, fieldValidationStrict:
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of %q, %q or %q; got %q",
			fieldValidationIgnore, fieldValidationWarn, fieldValidationStrict, fieldValidation))
	}
	dec := strict
	if fieldValidation == fieldValidationIgnore {
		dec = lax
	}
	var warnings []string
	kind := gvk.Kind
	obj, got, err := dec.Decode(body, &gvk, into)
	if err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		switch {
		case isStrict && obj != nil && fieldValidation == fieldValidationWarn:
			for _, e := range strictErr.Errors() {
				warnings = append(warnings, e.Error())
			}
		case got != nil && got.Kind != "":
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", got.Kind, got.Version, kind, err))
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", kind, err, summarize(body, 30)))
		}
	}
	if obj != into {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s", got.Kind, got.Version, kind))
	}
	if gv := got.GroupVersion(); gv != gvk.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gv, gvk.GroupVersion()))
	}
	return warnings, nil
}

// defaultNamespace is v1 defaulting and the strategy's canonicalization:
// a named namespace carries the kubernetes.io/metadata.name label with its
// name.
func defaultNamespace(ns *Namespace) {
	ns.APIVersion, ns.Kind = nsGV.String(), nsKind
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// encodeNamespace renders ns as the JSON clients see.
func encodeNamespace(ns *Namespace) ([]byte, error) {
	out := *ns
	out.APIVersion, out.Kind = nsGV.String(), nsKind
	b, err := json.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encode Namespace: %w", err)
	}
	return b, nil
}

func decodeStoredNamespace(data []byte, rv int64) (*Namespace, error) {
	ns := &Namespace{}
	if err := json.Unmarshal(data, ns); err != nil {
		return nil, fmt.Errorf("decode stored Namespace: %w", err)
	}
	ns.APIVersion, ns.Kind = nsGV.String(), nsKind
	if ns.ResourceVersion == "" && rv != 0 {
		ns.ResourceVersion = strconv.FormatInt(rv, 10)
	}
	return ns, nil
}

// prepareNamespaceCreate sets what the server owns on a new namespace:
// system metadata (as BeforeCreate; namespaces have no generation), phase
// Active, and the kubernetes spec finalizer (added when missing).
func prepareNamespaceCreate(ns *Namespace) error {
	meta, err := metaMap(&ns.ObjectMeta)
	if err != nil {
		return err
	}
	obj := objmeta.Object{"metadata": meta}
	if err := objmeta.CheckNameAndNamespace(obj, "", "", false); err != nil {
		return err
	}
	objmeta.PrepareCreate(obj, now().Time, false)
	delete(objmeta.Meta(obj), "generation")
	if err := setMetaMap(&ns.ObjectMeta, objmeta.Meta(obj)); err != nil {
		return err
	}
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	defaultNamespace(ns) // the name may come from generateName
	return nil
}

// prepareNamespaceUpdate merges an update of subresource ("", "status" or
// "finalize") into old as the namespace strategies do: the main resource
// keeps spec.finalizers and status, status keeps the spec, finalize keeps
// the status; the generic rules keep the system metadata.
func prepareNamespaceUpdate(ns, old *Namespace, subresource string) {
	ns.Namespace = ""
	ns.Generation = old.Generation
	if ns.UID == "" {
		ns.UID = old.UID
	}
	ns.CreationTimestamp = old.CreationTimestamp
	ns.DeletionTimestamp = old.DeletionTimestamp.DeepCopy()
	if old.DeletionGracePeriodSeconds != nil && ns.DeletionGracePeriodSeconds == nil {
		v := *old.DeletionGracePeriodSeconds
		ns.DeletionGracePeriodSeconds = &v
	}
	switch subresource {
	case "status":
		ns.Spec = *old.Spec.DeepCopy()
	case "finalize":
		ns.Status = *old.Status.DeepCopy()
	default:
		ns.Spec.Finalizers = slices.Clone(old.Spec.Finalizers)
		ns.Status = *old.Status.DeepCopy()
	}
	defaultNamespace(ns)
}

// standardFinalizers are the finalizer names that need no domain
// (kube-apiserver's IsStandardFinalizerName).
var standardFinalizers = []string{finalizerKubernetes, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// validateFinalizerName is core validation's check of a finalizer name: a
// qualified name, and a domain unless it is a standard one.
func validateFinalizerName(name string, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, path)
	return append(errs, validateKubeFinalizerName(name, path)...)
}

func validateKubeFinalizerName(name string, path *field.Path) field.ErrorList {
	if !strings.Contains(name, "/") && !slices.Contains(standardFinalizers, name) {
		return field.ErrorList{field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

// validateNamespaceName is ValidateNamespaceName (a DNS-1123 label),
// worded as v1.33.
func validateNamespaceName(name string, prefix bool) []string {
	msgs := apivalidation.ValidateNamespaceName(name, prefix)
	for i := range msgs {
		msgs[i] = metavalidation.V133Wording(msgs[i])
	}
	return msgs
}

// validateNamespaceMeta is core validation's ValidateObjectMeta for a
// namespace: the generic rules with the name a DNS-1123 label, and the
// core rule on finalizer names.
func validateNamespaceMeta(ns *Namespace) field.ErrorList {
	path := field.NewPath("metadata")
	errs := metavalidation.ValidateObjectMetaAccessor(&ns.ObjectMeta, false, validateNamespaceName, path)
	for i, f := range ns.Finalizers {
		errs = append(errs, validateKubeFinalizerName(f, path.Child("finalizers").Index(i))...)
	}
	return errs
}

func validateNamespaceMetaUpdate(ns, old *Namespace) field.ErrorList {
	path := field.NewPath("metadata")
	errs := metavalidation.ValidateObjectMetaAccessorUpdate(&ns.ObjectMeta, &old.ObjectMeta, path)
	for i, f := range ns.Finalizers {
		errs = append(errs, validateKubeFinalizerName(f, path.Child("finalizers").Index(i))...)
	}
	return errs
}

// validateNamespaceCreate is ValidateNamespace.
func validateNamespaceCreate(ns *Namespace) field.ErrorList {
	errs := validateNamespaceMeta(ns)
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// validateNamespaceUpdate is the validation of an update of subresource,
// as the namespace strategies run it.
func validateNamespaceUpdate(ns, old *Namespace, subresource string) field.ErrorList {
	switch subresource {
	case "status":
		errs := validateNamespaceMetaUpdate(ns, old)
		if ns.DeletionTimestamp.IsZero() {
			if ns.Status.Phase != corev1.NamespaceActive {
				errs = append(errs, field.Invalid(field.NewPath("status", "Phase"), ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
			}
		} else if ns.Status.Phase != corev1.NamespaceTerminating {
			errs = append(errs, field.Invalid(field.NewPath("status", "Phase"), ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
		}
		return errs
	case "finalize":
		errs := validateNamespaceMetaUpdate(ns, old)
		path := field.NewPath("spec", "finalizers")
		for i, f := range ns.Spec.Finalizers {
			errs = append(errs, validateFinalizerName(string(f), path.Index(i))...)
		}
		return errs
	}
	return append(validateNamespaceCreate(ns), validateNamespaceMetaUpdate(ns, old)...)
}

func invalidNamespace(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fielderr.NewInvalid(nsGK, name, errs)
}

// namespaceFieldSelector converts a field selector on namespaces as
// core/v1's field label conversion does: metadata.name, status.phase and
// the legacy name (as metadata.name); anything else is 400.
func namespaceFieldSelector(sel string) (string, error) {
	if strings.TrimSpace(sel) == "" {
		return sel, nil
	}
	fs, err := fields.ParseSelector(sel)
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	fs, err = fs.Transform(func(f, v string) (string, string, error) {
		switch f {
		case "metadata.name", "status.phase":
			return f, v, nil
		case "name":
			return "metadata.name", v, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", f)
	})
	if err != nil {
		return "", apierrors.NewBadRequest(err.Error())
	}
	return fs.String(), nil
}

// nsSelectableFields are the fields beyond metadata.name the storage
// filters namespaces by.
var nsSelectableFields = []string{"status.phase"}

// nsStore reads and writes namespaces through the StorageService.
type nsStore struct {
	client storagev1.StorageServiceClient
}

func nsStorageError(err error, name string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch e := storageError(err, name); {
	case apierrors.IsNotFound(e):
		return apierrors.NewNotFound(nsGR, name)
	case apierrors.IsAlreadyExists(e):
		return apierrors.NewAlreadyExists(nsGR, name)
	case apierrors.IsConflict(e):
		return apierrors.NewConflict(nsGR, name, errors.New(registryModifiedMsg))
	default:
		return e
	}
}

func (s *nsStore) get(ctx context.Context, name string) (*Namespace, error) {
	resp, err := s.client.Get(ctx, &storagev1.GetRequest{Key: nsKey(name)})
	if err != nil {
		return nil, nsStorageError(err, name)
	}
	return decodeStoredNamespace(resp.GetObject(), resp.GetResourceVersion())
}

func nsForStorage(ns *Namespace) ([]byte, error) {
	out := *ns
	out.ObjectMeta = *ns.ObjectMeta.DeepCopy()
	out.ResourceVersion = ""
	return encodeNamespace(&out)
}

func (s *nsStore) create(ctx context.Context, ns *Namespace) (*Namespace, error) {
	data, err := nsForStorage(ns)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Create(ctx, &storagev1.CreateRequest{Key: nsKey(ns.Name), Object: data})
	if err != nil {
		return nil, nsStorageError(err, ns.Name)
	}
	return decodeStoredNamespace(resp.GetObject(), resp.GetResourceVersion())
}

func nsRV(ns *Namespace) (int64, error) {
	rv, err := strconv.ParseInt(ns.ResourceVersion, 10, 64)
	if err != nil {
		return 0, apierrors.NewInternalError(fmt.Errorf("stored Namespace %s has resourceVersion %q: %w", ns.Name, ns.ResourceVersion, err))
	}
	return rv, nil
}

// write stores updated in place of current (compare-and-swap on current's
// resourceVersion), or removes it when the update leaves a namespace being
// deleted without finalizers (ShouldDeleteNamespaceDuringUpdate).
func (s *nsStore) write(ctx context.Context, updated, current *Namespace) (*Namespace, error) {
	rv, err := nsRV(current)
	if err != nil {
		return nil, err
	}
	if shouldDeleteNamespaceOnUpdate(updated, current) {
		return s.remove(ctx, current, rv)
	}
	data, err := nsForStorage(updated)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Update(ctx, &storagev1.UpdateRequest{Key: nsKey(updated.Name), Object: data, ExpectedResourceVersion: rv})
	if err != nil {
		return nil, nsStorageError(err, updated.Name)
	}
	return decodeStoredNamespace(resp.GetObject(), resp.GetResourceVersion())
}

// remove deletes the namespace if it is still at resourceVersion rv; the
// result is the namespace as it was.
func (s *nsStore) remove(ctx context.Context, ns *Namespace, rv int64) (*Namespace, error) {
	resp, err := s.client.Delete(ctx, &storagev1.DeleteRequest{Key: nsKey(ns.Name), PreconditionUid: string(ns.UID), PreconditionResourceVersion: rv})
	if err != nil {
		return nil, nsStorageError(err, ns.Name)
	}
	return decodeStoredNamespace(resp.GetObject(), 0)
}

// guaranteedUpdate reads the namespace, applies mutate and writes the
// result with compare-and-swap, starting over when another writer got in
// first; mutate returns nil when there is nothing to write.
func (s *nsStore) guaranteedUpdate(ctx context.Context, name string, mutate func(cur *Namespace) (*Namespace, error)) (*Namespace, error) {
	for attempt := 0; ; attempt++ {
		cur, err := s.get(ctx, name)
		if err != nil {
			return nil, err
		}
		updated, err := mutate(cur.DeepCopy())
		if err != nil || updated == nil {
			return cur, err
		}
		out, err := s.write(ctx, updated, cur)
		if apierrors.IsConflict(err) && attempt < maxCASRetries {
			continue
		}
		return out, err
	}
}

// shouldDeleteNamespaceOnUpdate is ShouldDeleteNamespaceDuringUpdate: no
// spec finalizers left, and the generic rule (deletion requested, no
// metadata finalizers, no grace period left).
func shouldDeleteNamespaceOnUpdate(ns, old *Namespace) bool {
	if len(ns.Spec.Finalizers) > 0 || len(ns.Finalizers) > 0 || old.DeletionTimestamp == nil {
		return false
	}
	return old.DeletionGracePeriodSeconds == nil || *old.DeletionGracePeriodSeconds == 0
}

func namespaceEqual(a, b *Namespace) bool { return apiequality.Semantic.DeepEqual(a, b) }
