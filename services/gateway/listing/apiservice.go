package listing

import (
	"encoding/json"
	"fmt"

	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// APIServicePrinter is kube-aggregator's table of APIServices (kubectl
// get apiservices): NAME, SERVICE (<namespace>/<name>, or Local),
// AVAILABLE (True, or the status with its reason: "False
// (FailedDiscoveryCheck)"; Unknown without the condition) and AGE.
func APIServicePrinter() *TablePrinter {
	return &TablePrinter{
		headers: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
			{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
			{Name: "Available", Type: "string", Description: "Whether this service is available."},
			{Name: "Age", Type: "string", Description: metadataDescriptions["creationTimestamp"]},
		},
		cells: func(obj Object) []any {
			var ts metav1.Time
			_ = ts.UnmarshalQueryParameter(metaString(obj, "creationTimestamp"))
			var a apiregistrationv1.APIService
			if raw, err := json.Marshal(map[string]any{"spec": obj["spec"], "status": obj["status"]}); err == nil {
				_ = json.Unmarshal(raw, &a)
			}
			service := "Local"
			if a.Spec.Service != nil {
				service = fmt.Sprintf("%s/%s", a.Spec.Service.Namespace, a.Spec.Service.Name)
			}
			status := string(apiregistrationv1.ConditionUnknown)
			for _, c := range a.Status.Conditions {
				if c.Type != apiregistrationv1.Available {
					continue
				}
				switch {
				case c.Status == apiregistrationv1.ConditionTrue, c.Reason == "":
					status = string(c.Status)
				default:
					status = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
				}
				break
			}
			return []any{metaString(obj, "name"), service, status, metatable.ConvertToHumanReadableDateType(ts)}
		},
	}
}
