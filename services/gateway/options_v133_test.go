package gateway

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOptionsAsV133: invalid update, patch, delete and list options of
// custom resources and CRDs are v1.33's 422 on the options' kind, values
// rendered as v1.33 renders them (dryRun's with %#v: []string{"Some"}).
func TestOptionsAsV133(t *testing.T) {
	g := newTestGateway(t)
	g.createCronTabCRD()
	const (
		coll = "/apis/stable.example.com/v1/namespaces/default/crontabs"
		crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	)
	g.expect(http.StatusCreated, "POST", coll, cronTab("a", map[string]any{"image": "i"}))
	unsupported := func(kind string, values string) string {
		return kind + `.meta.k8s.io "" is invalid: dryRun: Unsupported value: ` + values + `: supported values: "All"`
	}
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            any
		want                            string
	}{
		{"update", "PUT", coll + "/a?dryRun=Some", "", cronTab("a", nil), unsupported("UpdateOptions", `[]string{"Some"}`)},
		{"status update, two values", "PUT", coll + "/a/status?dryRun=Some&dryRun=All", "", cronTab("a", nil), unsupported("UpdateOptions", `[]string{"Some", "All"}`)},
		{"patch", "PATCH", coll + "/a?dryRun=Some", "application/merge-patch+json", `{}`, unsupported("PatchOptions", `[]string{"Some"}`)},
		{"delete", "DELETE", coll + "/a?dryRun=Some", "", nil, unsupported("DeleteOptions", `[]string{"Some"}`)},
		{"delete with a body", "DELETE", coll + "/a", "", `{"dryRun":["Some"]}`, unsupported("DeleteOptions", `[]string{"Some"}`)},
		{"delete collection", "DELETE", coll + "?dryRun=Some", "", nil, unsupported("DeleteOptions", `[]string{"Some"}`)},
		{"CRD update", "PUT", crds + "/crontabs.stable.example.com?dryRun=Some", "", cronTabCRD(), unsupported("UpdateOptions", `[]string{"Some"}`)},
		{"CRD patch", "PATCH", crds + "/crontabs.stable.example.com?dryRun=Some", "application/merge-patch+json", `{}`, unsupported("PatchOptions", `[]string{"Some"}`)},
		{"CRD delete", "DELETE", crds + "/crontabs.stable.example.com?dryRun=Some", "", nil, unsupported("DeleteOptions", `[]string{"Some"}`)},
		{"list", "GET", coll + "?resourceVersionMatch=Bogus&resourceVersion=1", "", nil,
			`ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var header []string
			if tc.contentType != "" {
				header = []string{"Content-Type", tc.contentType}
			}
			s := g.expect(http.StatusUnprocessableEntity, tc.method, tc.path, tc.body, header...)
			if s["message"] != tc.want || s["reason"] != string(metav1.StatusReasonInvalid) {
				t.Fatalf("%v: %v", s["reason"], s["message"])
			}
			details, _ := s["details"].(map[string]any)
			causes, _ := details["causes"].([]any)
			if len(causes) != 1 || !strings.HasSuffix(tc.want, causes[0].(map[string]any)["message"].(string)) {
				t.Fatalf("causes %v", causes)
			}
		})
	}
	// Nothing was deleted.
	g.expect(http.StatusOK, "GET", coll+"/a", nil)
}
