package registry

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	registryv1 "github.com/crdplane/crdplane/proto/crdplane/registry/v1"
)

// TestApplyCRDAsUpstream runs server-side applies and patches of a CRD
// through the registry's gRPC API; the expected answers and managedFields
// were observed on the upstream apiextensions-apiserver v0.33.13 for the
// same requests (time stamps aside; the entries of the status
// controllers' writes are not compared).
func TestApplyCRDAsUpstream(t *testing.T) {
	group := newGroup(t)
	name := "gadgets." + group
	applyBody := func(rest string) []byte {
		return []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n" + rest)
	}
	aliceEntry := `{"manager":"alice","operation":"Apply","apiVersion":"apiextensions.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:group":{},"f:names":{"f:kind":{},"f:plural":{}},"f:scope":{},"f:versions":{}}}}`
	bobEntry := `{"manager":"bob","operation":"Apply","apiVersion":"apiextensions.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:owner":{}}}}}`
	annotateEntry := `{"manager":"kubectl-annotate","operation":"Update","apiVersion":"apiextensions.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:a":{}}}}}`
	steps := []struct {
		name        string
		sub         string
		patchType   string
		body        []byte
		opts        *registryv1.WriteOptions
		wantCode    int32
		wantMessage string
		wantCauses  []metav1.StatusCause
		wantCreated bool
		wantLabels  map[string]string
		wantManaged string // entries of the managers compared, without time
	}{
		{name: "apply creates", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "alice", UserAgent: "probe/1.0"},
			body:        applyBody("  labels:\n    team: a\nspec:\n  group: " + group + "\n  names:\n    plural: gadgets\n    kind: Gadget\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"),
			wantCreated: true, wantLabels: map[string]string{"team": "a"}, wantManaged: "[" + aliceEntry + "]"},
		{name: "conflict", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "bob"}, body: applyBody("spec:\n  scope: Cluster\n"),
			wantCode: 409, wantMessage: `Apply failed with 1 conflict: conflict with "alice": .spec.scope`,
			wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict, Message: `conflict with "alice"`, Field: ".spec.scope"}}},
		{name: "a second manager's labels", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "bob"}, body: applyBody("  labels:\n    owner: bob\n"),
			wantLabels: map[string]string{"team": "a", "owner": "bob"}, wantManaged: "[" + aliceEntry + "," + bobEntry + "]"},
		{name: "merge patch: manager from the User-Agent", patchType: "application/merge-patch+json", opts: &registryv1.WriteOptions{UserAgent: "kubectl-annotate/v1.33.0"},
			body:       []byte(`{"metadata":{"annotations":{"a":"b"}}}`),
			wantLabels: map[string]string{"team": "a", "owner": "bob"}, wantManaged: "[" + aliceEntry + "," + bobEntry + "," + annotateEntry + "]"},
		{name: "apply at v1beta1", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "x"},
			body:     []byte("apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + name + "\n"),
			wantCode: 400, wantMessage: "invalid object type: apiextensions.k8s.io/v1beta1, Kind=CustomResourceDefinition"},
		{name: "not YAML", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "x"}, body: []byte("{{{"),
			wantCode: 400, wantMessage: "error decoding YAML: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{name: "status apply of a missing CRD", sub: "status", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "x"},
			body:     []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: nosuch." + group + "\n"),
			wantCode: 404, wantMessage: `customresourcedefinitions.apiextensions.k8s.io "nosuch.` + group + `" not found`},
		{name: "another name", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "x"},
			body:     []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: other." + group + "\n"),
			wantCode: 400, wantMessage: "the name of the object (other." + group + ") does not match the name on the URL (" + name + ")"},
		{name: "undeclared field", patchType: applyPatchType, opts: &registryv1.WriteOptions{FieldManager: "x"}, body: applyBody("spec:\n  bogus: 1\n"),
			wantCode: 500, wantMessage: "failed to create typed patch object (/" + name + "; apiextensions.k8s.io/v1, Kind=CustomResourceDefinition): .spec.bogus: field not declared in schema"},
	}
	for _, st := range steps {
		target := name
		if st.sub == "status" {
			target = "nosuch." + group
		}
		resp, err := testRegistry.Patch(testCtx(t), &registryv1.PatchRequest{Name: target, Subresource: st.sub, PatchType: st.patchType, Patch: st.body, Options: st.opts})
		if st.wantCode != 0 {
			s := status(err)
			var causes []metav1.StatusCause
			if s.Details != nil {
				causes = s.Details.Causes
			}
			if s.Code != st.wantCode || s.Message != st.wantMessage || !reflect.DeepEqual(causes, st.wantCauses) {
				t.Errorf("%s: got %d %q %+v, want %d %q %+v", st.name, s.Code, s.Message, causes, st.wantCode, st.wantMessage, st.wantCauses)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if resp.GetCreated() != st.wantCreated {
			t.Errorf("%s: created %v", st.name, resp.GetCreated())
		}
		crd := decodeT(t, resp.GetObject())
		if !reflect.DeepEqual(crd.Labels, st.wantLabels) {
			t.Errorf("%s: labels %v, want %v", st.name, crd.Labels, st.wantLabels)
		}
		var got []map[string]any
		for _, e := range crd.ManagedFields {
			if e.Manager == "alice" || e.Manager == "bob" || e.Manager == "kubectl-annotate" {
				if e.Time == nil {
					t.Errorf("%s: entry of %s without a time", st.name, e.Manager)
				}
				e.Time = nil
				b, _ := json.Marshal(e)
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				got = append(got, m)
			}
		}
		var want []map[string]any
		_ = json.Unmarshal([]byte(st.wantManaged), &want)
		if st.wantCreated {
			// The controllers' status writes: upstream's entry once the
			// names are accepted and the CRD established (its manager is
			// the loopback client's, kube-apiserver's in a cluster).
			const wantStatus = `{"f:status":{"f:acceptedNames":{"f:kind":{},"f:listKind":{},"f:plural":{},"f:singular":{}},"f:conditions":{"k:{\"type\":\"Established\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"NamesAccepted\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}}`
			var got string
			eventually(t, 10*time.Second, "the controllers' managedFields entry", func() bool {
				for _, e := range getT(t, name).ManagedFields {
					if e.Manager == controllerManager && e.Subresource == "status" && e.Operation == metav1.ManagedFieldsOperationUpdate && e.FieldsV1 != nil {
						got = e.FieldsV1.GetRawString()
						return got == wantStatus
					}
				}
				return false
			})
		}
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.Marshal(got)
			t.Errorf("%s: managedFields\n got %s\nwant %s", st.name, gb, st.wantManaged)
		}
	}
}
