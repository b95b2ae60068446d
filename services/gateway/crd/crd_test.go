package crd

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"

	"github.com/crdplane/crdplane/pkg/kstatus"
	"github.com/crdplane/crdplane/services/gateway/httpx"
	"github.com/crdplane/crdplane/services/gateway/listing"
)

// TestRenderCRDList: a CustomResourceDefinitionList as kube-apiserver
// encodes its typed list: items without apiVersion and kind,
// metadata.continue and remainingItemCount only when set, upstream's
// field order.
func TestRenderCRDList(t *testing.T) {
	item := []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"a.example.com","resourceVersion":"7"},"spec":{"group":"example.com"},"status":{}}`)
	two := int64(2)
	for _, tc := range []struct {
		page httpx.ListPage
		want string
	}{
		{httpx.ListPage{ResourceVersion: 9},
			`{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{"resourceVersion":"9"},"items":[]}`},
		{httpx.ListPage{Items: [][]byte{item}, ResourceVersion: 9},
			`{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a.example.com","resourceVersion":"7"},"spec":{"group":"example.com"},"status":{}}]}`},
		{httpx.ListPage{Items: [][]byte{item}, ResourceVersion: 9, ContinueToken: "tok", Remaining: &two},
			`{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{"resourceVersion":"9","continue":"tok","remainingItemCount":2},"items":[{"metadata":{"name":"a.example.com","resourceVersion":"7"},"spec":{"group":"example.com"},"status":{}}]}`},
	} {
		got, err := listing.RenderTypedList(APIVersion, ListKind, tc.page)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	if _, err := listing.RenderTypedList(APIVersion, ListKind, httpx.ListPage{Items: [][]byte{[]byte(`{`)}}); err == nil {
		t.Error("a corrupt item rendered")
	}
}

// TestCRDFieldSelectorAndPatchTypes: a field selector on CRDs names
// metadata.name or metadata.namespace (upstream's typed field label
// conversion and its message); a CRD patch of a type upstream's go-restful
// route does not consume is its 415 "415: Unsupported Media Type".
func TestCRDFieldSelectorAndPatchTypes(t *testing.T) {
	for sel, want := range map[string]string{
		"metadata.name=a":        "",
		"metadata.namespace=":    "",
		"spec.group=example.com": `"spec.group" is not a known field selector: only "metadata.name", "metadata.namespace"`,
	} {
		s, err := fields.ParseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := checkCRDFieldSelector(s); err != nil {
			st := kstatus.FromError(err)
			if st.Code != 400 || st.Reason != "BadRequest" {
				t.Errorf("%s: %+v", sel, st)
			}
			got = st.Message
		}
		if got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	for pt, ok := range map[string]bool{
		"application/json-patch+json": true, "application/merge-patch+json": true,
		"application/strategic-merge-patch+json": true, "application/apply-patch+yaml": true,
		"text/plain": false, "application/json": false,
	} {
		if PatchTypeAllowed(pt) != ok {
			t.Errorf("PatchTypeAllowed(%s) = %v", pt, !ok)
		}
	}
	st := kstatus.FromError(ErrUnsupportedMediaType())
	if st.Code != 415 || st.Reason != "UnsupportedMediaType" || st.Message != "415: Unsupported Media Type" || st.Details == nil || len(st.Details.Causes) != 0 {
		t.Errorf("415: %+v", st)
	}
}
