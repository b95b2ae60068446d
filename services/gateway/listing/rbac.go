package listing

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metatable "k8s.io/apimachinery/pkg/api/meta/table"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolePrinter is kube-apiserver's table of Roles and ClusterRoles
// (kubectl get role): NAME and CREATED AT (RFC 3339, UTC).
func RolePrinter() *TablePrinter {
	return &TablePrinter{
		headers: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
			{Name: "Created At", Type: "date", Description: metadataDescriptions["creationTimestamp"]},
		},
		cells: func(obj Object) []any {
			var ts metav1.Time
			_ = ts.UnmarshalQueryParameter(metaString(obj, "creationTimestamp"))
			return []any{metaString(obj, "name"), ts.UTC().Format(time.RFC3339)}
		},
	}
}

// RoleBindingPrinter is kube-apiserver's table of RoleBindings: NAME,
// ROLE (<kind>/<name>), AGE, and with -o wide USERS, GROUPS and
// SERVICEACCOUNTS (<namespace>/<name>).
func RoleBindingPrinter() *TablePrinter {
	return bindingPrinter("roleBinding", rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"])
}

// ClusterRoleBindingPrinter is RoleBindingPrinter's for
// ClusterRoleBindings.
func ClusterRoleBindingPrinter() *TablePrinter {
	return bindingPrinter("clusterRoleBinding", rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"])
}

func bindingPrinter(what, roleRefDoc string) *TablePrinter {
	return &TablePrinter{
		headers: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: metadataDescriptions["name"]},
			{Name: "Role", Type: "string", Description: roleRefDoc},
			{Name: "Age", Type: "string", Description: metadataDescriptions["creationTimestamp"]},
			{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + what},
			{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + what},
			{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + what},
		},
		cells: func(obj Object) []any {
			var ts metav1.Time
			_ = ts.UnmarshalQueryParameter(metaString(obj, "creationTimestamp"))
			var b struct {
				RoleRef  rbacv1.RoleRef   `json:"roleRef"`
				Subjects []rbacv1.Subject `json:"subjects"`
			}
			if raw, err := json.Marshal(map[string]any{"roleRef": obj["roleRef"], "subjects": obj["subjects"]}); err == nil {
				_ = json.Unmarshal(raw, &b)
			}
			var users, groups, sas []string
			for _, s := range b.Subjects {
				switch s.Kind {
				case rbacv1.ServiceAccountKind:
					sas = append(sas, fmt.Sprintf("%s/%s", s.Namespace, s.Name))
				case rbacv1.UserKind:
					users = append(users, s.Name)
				case rbacv1.GroupKind:
					groups = append(groups, s.Name)
				}
			}
			return []any{metaString(obj, "name"), b.RoleRef.Kind + "/" + b.RoleRef.Name, metatable.ConvertToHumanReadableDateType(ts),
				strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
		},
	}
}
