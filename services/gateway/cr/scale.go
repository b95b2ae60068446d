package cr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/api/httpbody"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/crdplane/crdplane/pkg/patch"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// The scale subresource: an autoscaling/v1 Scale read from and written to
// the custom resource at the CRD version's specReplicasPath,
// statusReplicasPath and labelSelectorPath, as upstream's ScaleREST.

const scaleAPIVersion = "autoscaling/v1"

// invalidSpecReplicas marks, in the Scale a patch applies to, a custom
// resource without a value at specReplicasPath (upstream's marker).
const invalidSpecReplicas = -2147483648

// replicasPath splits a scale JSONPath (".spec.replicas").
func replicasPath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// scaleOf is the Scale of a custom resource; found reports whether it has
// a value at specReplicasPath.
func scaleOf(obj object, sc *apiextensionsv1.CustomResourceSubresourceScale) (*autoscalingv1.Scale, bool, error) {
	spec, found, err := unstructured.NestedInt64(obj, replicasPath(sc.SpecReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	status, _, err := unstructured.NestedInt64(obj, replicasPath(sc.StatusReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	var selector string
	if sc.LabelSelectorPath != nil && *sc.LabelSelectorPath != "" {
		if selector, _, err = unstructured.NestedString(obj, replicasPath(*sc.LabelSelectorPath)...); err != nil {
			return nil, false, err
		}
	}
	u := unstructured.Unstructured{Object: obj}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: scaleAPIVersion, Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              u.GetName(),
			Namespace:         u.GetNamespace(),
			UID:               u.GetUID(),
			ResourceVersion:   u.GetResourceVersion(),
			CreationTimestamp: u.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: selector},
	}, found, nil
}

func encodeScale(s *autoscalingv1.Scale) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return b, nil
}

func (r *resource) scalePrinter() *listing.TablePrinter {
	return listing.NewColumnPrinter(listing.ScaleColumns(r.scale))
}

// scaleGet answers GET .../scale from the object (JSON at the request version).
func (a *Server) scaleGet(r *resource, out httpx.OutputFormat, rm httpx.RequestMeta, data []byte) (*httpbody.HttpBody, error) {
	obj, err := listing.DecodeObject(data)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	s, found, err := scaleOf(obj, r.scale)
	if err != nil {
		return nil, listing.PlainError(err)
	}
	if !found {
		return nil, apierrors.NewInternalError(fmt.Errorf("the spec replicas field %q does not exist", r.scale.SpecReplicasPath))
	}
	doc, err := encodeScale(s)
	if err != nil {
		return nil, err
	}
	return listing.RespondObject(out, rm, doc, r.scalePrinter)
}

// decodeScale decodes a Scale request body (apiVersion and kind default to
// autoscaling/v1 Scale).
func decodeScale(body []byte) (*autoscalingv1.Scale, error) {
	var tm metav1.TypeMeta
	_ = json.Unmarshal(body, &tm)
	kind, apiVersion := tm.Kind, tm.APIVersion
	if kind == "" {
		kind = "Scale"
	}
	if apiVersion == "" {
		apiVersion = scaleAPIVersion
	}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	if kind != "Scale" || apiVersion != scaleAPIVersion {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a Scale: no kind %q is registered for version %q", kind, gv.Version, kind, apiVersion))
	}
	s := &autoscalingv1.Scale{}
	if err := json.Unmarshal(body, s); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Scale in version %q cannot be handled as a Scale: %v", gv.Version, err))
	}
	return s, nil
}

// errScaleBody is upstream's 400 for every Scale body its decoder refuses
// (a PUT's): the handler words a decoding error with the custom
// resource's typer, which does not know the Scale type, so that its
// failure to name the type is the message.
func errScaleBody() error {
	return apierrors.NewBadRequest(`no kind is registered for the type v1.Scale in scheme "pkg/runtime/scheme.go:110"`)
}

// decodeScaleUpdate decodes a PUT's Scale body as upstream's scale
// serializer does: the type meta (sniffed as the JSON serializer does,
// defaulted to autoscaling/v1 Scale) must be autoscaling/v1 Scale (the
// other Scale types of its scheme do not convert to it) and the body
// decode into it, case-sensitively; any failure is errScaleBody.
func decodeScaleUpdate(body []byte, convErr error) (*autoscalingv1.Scale, error) {
	if convErr != nil {
		return nil, errScaleBody()
	}
	var tm typeMetaSniff
	if err := json.Unmarshal(body, &tm); err != nil {
		return nil, errScaleBody()
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, errScaleBody()
	}
	want := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	if gvkWithDefaults(gvkWithDefaults(gv.WithKind(tm.Kind), want), want) != want {
		return nil, errScaleBody()
	}
	s := &autoscalingv1.Scale{}
	if err := utiljson.Unmarshal(body, s); err != nil {
		return nil, errScaleBody()
	}
	return s, nil
}

// checkScaleName is upstream's check of a written Scale against the URL:
// the namespace first (rest.EnsureObjectNamespaceMatchesRequestNamespace),
// then the name (checkName; an empty one is undeterminable).
func checkScaleName(s *autoscalingv1.Scale, name, namespace string) error {
	if namespace != "" && s.Namespace != "" && s.Namespace != namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if s.Name == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s based on URL) was undeterminable: name must be provided", name))
	}
	if s.Name != name {
		return apierrors.NewBadRequest("the name of the object (" + s.Name + ") does not match the name on the URL (" + name + ")")
	}
	return nil
}

// scaleWrite updates a custom resource through its scale subresource: next
// turns the current Scale (spec.replicas invalidSpecReplicas when the
// object has none) into the requested one, whose spec.replicas is written
// to specReplicasPath; the object then goes through the update pipeline of
// the main resource (upstream runs scale writes through the main
// strategy). A lost race is retried unless the Scale named a
// resourceVersion. It returns the new Scale.
func (a *Server) scaleWrite(ctx context.Context, r *resource, ns, name string, p updateParams, next func(old *autoscalingv1.Scale) (*autoscalingv1.Scale, error)) ([]byte, error) {
	for {
		cur, err := a.readCurrent(ctx, r, ns, name)
		if err != nil {
			return nil, err
		}
		old, found, err := scaleOf(cur.obj, r.scale)
		if err != nil {
			return nil, listing.PlainError(err)
		}
		if !found {
			old.Spec.Replicas = invalidSpecReplicas
		}
		s, err := next(old)
		if err != nil {
			return nil, err
		}
		if s.Spec.Replicas == invalidSpecReplicas {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", r.scale.SpecReplicasPath))
		}
		obj := deepCopyObject(cur.obj)
		if err := unstructured.SetNestedField(obj, int64(s.Spec.Replicas), replicasPath(r.scale.SpecReplicasPath)...); err != nil {
			return nil, listing.PlainError(err)
		}
		pinned := s.ResourceVersion != ""
		if pinned && s.ResourceVersion != fmt.Sprint(cur.rv) {
			return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
		}
		p.subresource = "scale"
		result, err := a.applyUpdate(ctx, r, cur, obj, p)
		if errors.Is(err, errStale) {
			if pinned || !retryStale(ctx) {
				return nil, apierrors.NewConflict(r.groupResource(), name, errors.New(optimisticLockMsg))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		updated, err := listing.DecodeObject(result)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		scale, _, err := scaleOf(updated, r.scale)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return encodeScale(scale)
	}
}

// scaleUpdate serves PUT .../scale (convErr: the YAML body did not
// convert to JSON).
func (a *Server) scaleUpdate(ctx context.Context, r *resource, ns, name string, body []byte, convErr error, p updateParams) ([]byte, error) {
	s, err := decodeScaleUpdate(body, convErr)
	if err != nil {
		return nil, err
	}
	if err := checkScaleName(s, name, ns); err != nil {
		return nil, err
	}
	return a.scaleWrite(ctx, r, ns, name, p, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return s, nil })
}

// scalePatch serves PATCH .../scale: the patch applies to the current Scale.
func (a *Server) scalePatch(ctx context.Context, r *resource, ns, name, pt string, body []byte, p updateParams) ([]byte, error) {
	first := true
	return a.scaleWrite(ctx, r, ns, name, p, func(old *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		var strictErrs []error
		if first {
			// Decoded once the object is read, as upstream's patcher does.
			var err error
			if strictErrs, err = decodePatch(pt, body, p.fieldValidation); err != nil {
				return nil, err
			}
		}
		orig, err := encodeScale(old)
		if err != nil {
			return nil, err
		}
		patched, err := patch.Apply(orig, pt, body)
		if err != nil {
			return nil, err
		}
		if first {
			first = false
			if err := patchStrictErrors(ctx, p.fieldValidation, strictErrs, func() []byte { return patched }); err != nil {
				return nil, err
			}
		}
		s, err := decodeScale(patched)
		if err != nil {
			return nil, err
		}
		if err := checkScaleName(s, name, ns); err != nil {
			return nil, err
		}
		return s, nil
	})
}
