package registry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/crdplane/crdplane/pkg/objmeta/metavalidation"
	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
	storagev1 "github.com/crdplane/crdplane/proto/crdplane/storage/v1"
)

// apiServiceKind is apiregistration.k8s.io/v1 APIService in the generic
// store of built-in kinds (rbac_server.go), as kube-aggregator's registry
// (pkg/registry/apiservice): cluster-scoped, stored at
// /registry/apiregistration.k8s.io/apiservices/<name>, with a status
// subresource; the gateway's availability controller writes its
// Available condition.
var apiServiceKind = &rbacKind{
	resource:  "apiservices",
	kind:      "APIService",
	gv:        apiregistrationv1.SchemeGroupVersion,
	keyBase:   "/registry/apiregistration.k8s.io/apiservices",
	newObject: func() rbacObject { return &apiregistrationv1.APIService{} },
	validate: func(o rbacObject) field.ErrorList {
		return validateAPIServiceSpec(o.(*apiregistrationv1.APIService))
	},
	nameFn: apiServiceNameFn,
	strict: true,
	status: &statusSubresource{
		prepareCreate: func(o rbacObject) {
			a := o.(*apiregistrationv1.APIService)
			a.Status = apiregistrationv1.APIServiceStatus{}
			// local APIServices are available from their creation
			if a.Spec.Service == nil {
				a.Status.Conditions = []apiregistrationv1.APIServiceCondition{{
					Type:               apiregistrationv1.Available,
					Status:             apiregistrationv1.ConditionTrue,
					LastTransitionTime: now(),
					Reason:             "Local",
					Message:            "Local APIServices are always available",
				}}
			}
		},
		keepStatus: func(o, old rbacObject) {
			o.(*apiregistrationv1.APIService).Status = old.(*apiregistrationv1.APIService).Status
		},
		keepSpec: func(o, old rbacObject) {
			a, b := o.(*apiregistrationv1.APIService), old.(*apiregistrationv1.APIService)
			a.Spec = b.Spec
			a.Labels, a.Annotations, a.Finalizers, a.OwnerReferences = b.Labels, b.Annotations, b.Finalizers, b.OwnerReferences
		},
		validateStatus: func(o rbacObject) field.ErrorList {
			var errs field.ErrorList
			for i, c := range o.(*apiregistrationv1.APIService).Status.Conditions {
				switch c.Status {
				case apiregistrationv1.ConditionTrue, apiregistrationv1.ConditionFalse, apiregistrationv1.ConditionUnknown:
				default:
					errs = append(errs, field.NotSupported(field.NewPath("status", "conditions").Index(i).Child("status"), c.Status,
						[]string{string(apiregistrationv1.ConditionTrue), string(apiregistrationv1.ConditionFalse), string(apiregistrationv1.ConditionUnknown)}))
				}
			}
			return errs
		},
		resetFields: map[fieldpath.APIVersion]*fieldpath.Set{
			"apiregistration.k8s.io/v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
		},
		statusResetFields: map[fieldpath.APIVersion]*fieldpath.Set{
			"apiregistration.k8s.io/v1": fieldpath.NewSet(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata")),
		},
	},
}

// apiServiceNameFn is ValidateAPIService's name rule: a path segment name
// that is spec.version + "." + spec.group.
func apiServiceNameFn(obj rbacObject) metavalidation.ValidateNameFunc {
	a := obj.(*apiregistrationv1.APIService)
	required := a.Spec.Version + "." + a.Spec.Group
	return func(name string, prefix bool) []string {
		if msgs := metavalidation.ValidatePathSegmentName(name, prefix); len(msgs) > 0 {
			return msgs
		}
		if name != required {
			return []string{fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)}
		}
		return nil
	}
}

// validateAPIServiceSpec is the rest of kube-aggregator's
// ValidateAPIService, worded as v1.33.
func validateAPIServiceSpec(a *apiregistrationv1.APIService) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if a.Spec.Group == "" && a.Spec.Version != "v1" {
		errs = append(errs, field.Required(spec.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if a.Spec.Group != "" {
		for _, msg := range metavalidation.IsDNS1123Subdomain(a.Spec.Group) {
			errs = append(errs, field.Invalid(spec.Child("group"), a.Spec.Group, msg))
		}
	}
	for _, msg := range metavalidation.IsDNS1035Label(a.Spec.Version) {
		errs = append(errs, field.Invalid(spec.Child("version"), a.Spec.Version, msg))
	}
	if a.Spec.GroupPriorityMinimum <= 0 || a.Spec.GroupPriorityMinimum > 20000 {
		errs = append(errs, field.Invalid(spec.Child("groupPriorityMinimum"), a.Spec.GroupPriorityMinimum, "must be positive and less than 20000"))
	}
	if a.Spec.VersionPriority <= 0 || a.Spec.VersionPriority > 1000 {
		errs = append(errs, field.Invalid(spec.Child("versionPriority"), a.Spec.VersionPriority, "must be positive and less than 1000"))
	}
	if a.Spec.Service == nil {
		if len(a.Spec.CABundle) != 0 {
			errs = append(errs, field.Invalid(spec.Child("caBundle"), fmt.Sprintf("%d bytes", len(a.Spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if a.Spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), a.Spec.InsecureSkipTLSVerify, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	svc := spec.Child("service")
	if a.Spec.Service.Namespace == "" {
		errs = append(errs, field.Required(svc.Child("namespace"), ""))
	}
	if a.Spec.Service.Name == "" {
		errs = append(errs, field.Required(svc.Child("name"), ""))
	}
	// v1 defaults the port to 443; the internal type validated upstream
	// has a plain int32.
	var port int32
	if a.Spec.Service.Port != nil {
		port = *a.Spec.Service.Port
	}
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(svc.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if a.Spec.InsecureSkipTLSVerify && len(a.Spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), a.Spec.InsecureSkipTLSVerify, "may not be true if caBundle is present"))
	}
	return errs
}

// apiRegistrationServer is the APIRegistrationService: the generic store
// of built-in kinds limited to apiregistration.k8s.io.
type apiRegistrationServer struct {
	registryv1.UnimplementedAPIRegistrationServiceServer
	store *rbacServer
}

func newAPIRegistrationServer(client storagev1.StorageServiceClient, log *slog.Logger) *apiRegistrationServer {
	return &apiRegistrationServer{store: &rbacServer{client: client, log: log, group: apiregistrationv1.GroupName}}
}

// Create validates and stores a new APIService.
func (s *apiRegistrationServer) Create(ctx context.Context, r *registryv1.RBACServiceCreateRequest) (*registryv1.CreateResponse, error) {
	return s.store.Create(ctx, r)
}

// Get reads one APIService.
func (s *apiRegistrationServer) Get(ctx context.Context, r *registryv1.RBACServiceGetRequest) (*registryv1.GetResponse, error) {
	return s.store.Get(ctx, r)
}

// List reads APIServices.
func (s *apiRegistrationServer) List(ctx context.Context, r *registryv1.RBACServiceListRequest) (*registryv1.ListResponse, error) {
	return s.store.List(ctx, r)
}

// Update replaces an APIService or its status.
func (s *apiRegistrationServer) Update(ctx context.Context, r *registryv1.RBACServiceUpdateRequest) (*registryv1.UpdateResponse, error) {
	return s.store.Update(ctx, r)
}

// Patch patches or applies to an APIService or its status.
func (s *apiRegistrationServer) Patch(ctx context.Context, r *registryv1.RBACServicePatchRequest) (*registryv1.PatchResponse, error) {
	return s.store.Patch(ctx, r)
}

// Delete deletes an APIService.
func (s *apiRegistrationServer) Delete(ctx context.Context, r *registryv1.RBACServiceDeleteRequest) (*registryv1.DeleteResponse, error) {
	return s.store.Delete(ctx, r)
}

// Watch follows the APIServices.
func (s *apiRegistrationServer) Watch(r *registryv1.RBACServiceWatchRequest, stream grpc.ServerStreamingServer[registryv1.WatchResponse]) error {
	return s.store.Watch(r, stream)
}
