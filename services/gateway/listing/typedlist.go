package listing

import (
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdplane/crdplane/services/gateway/httpx"
)

// RenderTypedList renders the JSON list of a built-in kind (CRDs,
// Namespaces, the RBAC kinds) as kube-apiserver encodes its typed list:
// kind, apiVersion, metadata (continue and remainingItemCount only when
// set) and items without apiVersion and kind (the items of a typed list
// carry no TypeMeta).
func RenderTypedList(apiVersion, listKind string, p httpx.ListPage) ([]byte, error) {
	items := make([]json.RawMessage, 0, len(p.Items))
	for _, it := range p.Items {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(it, &obj); err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("decode an item of %s: %w", listKind, err))
		}
		delete(obj, "apiVersion")
		delete(obj, "kind")
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		items = append(items, b)
	}
	// the field order of upstream's encoding
	list := struct {
		Kind       string            `json:"kind"`
		APIVersion string            `json:"apiVersion"`
		Metadata   metav1.ListMeta   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}{
		Kind:       listKind,
		APIVersion: apiVersion,
		Metadata: metav1.ListMeta{
			ResourceVersion:    strconv.FormatInt(p.ResourceVersion, 10),
			Continue:           p.ContinueToken,
			RemainingItemCount: p.Remaining,
		},
		Items: items,
	}
	return json.Marshal(list)
}
