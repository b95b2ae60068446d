package listing

import (
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespacePrinter is kube-apiserver's table of core/v1 Namespaces
// (kubectl get ns): NAME, STATUS (the phase) and AGE.
func NamespacePrinter() *TablePrinter {
	return &TablePrinter{
		headers: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
			{Name: "Status", Type: "string", Description: "The status of the namespace"},
			{Name: "Age", Type: "string", Description: metadataDescriptions["creationTimestamp"]},
		},
		cells: func(obj Object) []any {
			var ts metav1.Time
			_ = ts.UnmarshalQueryParameter(metaString(obj, "creationTimestamp"))
			status, _ := obj["status"].(map[string]any)
			phase, _ := status["phase"].(string)
			return []any{metaString(obj, "name"), phase, metatable.ConvertToHumanReadableDateType(ts)}
		},
	}
}
